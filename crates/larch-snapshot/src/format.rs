//! The container of a snapshot (`docs/snapshot-format.md` §2–3): a checksummed header, then frames of
//! at most 64 KiB of the record stream, each stored or deflated, each with a CRC-32. Records run
//! across frame boundaries freely: the frames are a checksummed, compressed transport for one byte
//! stream, which [`FrameWriter`] cuts and [`FrameReader`] joins.

use crate::error::{Result, SnapshotError};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::io::{Read, Write};

/// The snapshot magic, at offset 0.
pub const MAGIC: &[u8; 8] = b"LARCHSNP";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Length of the file header.
pub const HEADER_LEN: usize = 24;
/// The most record-stream bytes one frame carries.
pub const FRAME_MAX: usize = 64 << 10;
/// Length of a frame header (codec, raw length, stored length).
pub const FRAME_HEADER_LEN: usize = 9;
/// Frame codec: the bytes as they are.
pub const CODEC_STORED: u8 = 0;
/// Frame codec: raw DEFLATE (RFC 1951, no zlib header).
pub const CODEC_DEFLATE: u8 = 1;
/// The largest back-reference window a reader accepts (objects).
pub const WINDOW_MAX: u32 = 1 << 20;
/// The window the exporter uses by default (objects): see `docs/snapshot-format.md` §5.
pub const DEFAULT_WINDOW: u32 = 1 << 20;

/// Encodes the file header for a back-reference window of `window` objects.
pub fn encode_header(window: u32) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&window.to_le_bytes());
    let crc = crc32fast::hash(&header[..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Checks a file header; returns its window.
pub fn decode_header(header: &[u8; HEADER_LEN]) -> Result<u32> {
    if &header[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    let word = |at: usize| u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    if crc32fast::hash(&header[..20]) != word(20) {
        return Err(SnapshotError::Corrupt { offset: 0, reason: "header checksum mismatch".into() });
    }
    if word(8) != VERSION {
        return Err(SnapshotError::UnknownVersion { found: word(8), supported: VERSION });
    }
    if word(16) != 0 {
        return Err(SnapshotError::Corrupt {
            offset: 16,
            reason: "reserved header bytes are not zero".into(),
        });
    }
    let window = word(12);
    if window == 0 || window > WINDOW_MAX {
        return Err(SnapshotError::Corrupt {
            offset: 12,
            reason: format!("window {window} outside 1..={WINDOW_MAX}"),
        });
    }
    Ok(window)
}

/// Cuts a record stream into frames and writes them to `out`.
pub struct FrameWriter<W: Write> {
    out: W,
    raw: Vec<u8>,
    packed: Vec<u8>,
    compress: Option<Compress>,
    /// Record-stream bytes written.
    pub stream_bytes: u64,
    /// File bytes written (header and frames).
    pub file_bytes: u64,
    /// Frames written.
    pub frames: u64,
}

fn write_error(source: std::io::Error) -> SnapshotError {
    SnapshotError::Io { op: "writing", path: "the snapshot".into(), source }
}

impl<W: Write> FrameWriter<W> {
    /// Writes the header to `out`; frames are deflated at `level` (0–9) when that makes them
    /// smaller, or stored when `level` is `None`.
    pub fn new(mut out: W, window: u32, level: Option<u32>) -> Result<FrameWriter<W>> {
        out.write_all(&encode_header(window)).map_err(write_error)?;
        Ok(FrameWriter {
            out,
            raw: Vec::with_capacity(2 * FRAME_MAX),
            packed: Vec::with_capacity(FRAME_MAX + 1024),
            compress: level.map(|level| Compress::new(Compression::new(level), false)),
            stream_bytes: 0,
            file_bytes: HEADER_LEN as u64,
            frames: 0,
        })
    }

    /// Appends record-stream bytes, writing every full frame.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.raw.extend_from_slice(bytes);
        self.stream_bytes += bytes.len() as u64;
        if self.raw.len() >= FRAME_MAX {
            let mut start = 0;
            while self.raw.len() - start >= FRAME_MAX {
                let end = start + FRAME_MAX;
                let chunk = std::mem::take(&mut self.raw);
                let result = self.frame(chunk.get(start..end).unwrap_or_default());
                self.raw = chunk;
                result?;
                start = end;
            }
            self.raw.drain(..start);
        }
        Ok(())
    }

    /// Writes `raw` (1 to [`FRAME_MAX`] bytes of the stream, after any bytes given to
    /// [`FrameWriter::write`] that are not yet in a frame) as one frame.
    pub fn write_frame(&mut self, raw: &[u8]) -> Result<()> {
        self.stream_bytes += raw.len() as u64;
        self.frame(raw)
    }

    fn frame(&mut self, raw: &[u8]) -> Result<()> {
        self.packed.clear();
        self.packed.extend_from_slice(&[CODEC_STORED, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut codec = CODEC_STORED;
        if let Some(compress) = &mut self.compress {
            compress.reset();
            let before = self.packed.len();
            self.packed.reserve(raw.len() + 1024);
            let status = compress.compress_vec(raw, &mut self.packed, FlushCompress::Finish);
            let packed_len = self.packed.len() - before;
            if matches!(status, Ok(Status::StreamEnd)) && packed_len < raw.len() {
                codec = CODEC_DEFLATE;
            } else {
                self.packed.truncate(before);
            }
        }
        if codec == CODEC_STORED {
            self.packed.extend_from_slice(raw);
        }
        let stored_len = (self.packed.len() - FRAME_HEADER_LEN) as u32;
        self.packed[0] = codec;
        self.packed[1..5].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        self.packed[5..9].copy_from_slice(&stored_len.to_le_bytes());
        let crc = crc32fast::hash(&self.packed);
        self.packed.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&self.packed).map_err(write_error)?;
        self.file_bytes += self.packed.len() as u64;
        self.frames += 1;
        Ok(())
    }

    /// Writes the last (partial) frame and flushes; returns the output, the file bytes written
    /// and the number of frames.
    pub fn finish(mut self) -> Result<(W, u64, u64)> {
        if !self.raw.is_empty() {
            let raw = std::mem::take(&mut self.raw);
            self.frame(&raw)?;
        }
        self.out.flush().map_err(write_error)?;
        Ok((self.out, self.file_bytes, self.frames))
    }
}

/// Reads frames from a snapshot file and serves the record stream, checking every frame.
pub struct FrameReader<R: Read> {
    input: R,
    window: u32,
    frame: Vec<u8>,
    pos: usize,
    packed: Vec<u8>,
    decompress: Decompress,
    /// File offset of the current frame.
    frame_offset: u64,
    /// Stream offset of the current frame's first byte.
    frame_stream_start: u64,
    /// File bytes read so far.
    file_offset: u64,
    ended: bool,
    /// Frames read.
    pub frames: u64,
}

/// Reads up to `buf.len()` bytes, stopping only at end of input; returns how many were read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match input.read(buf.get_mut(done..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn read_error(source: std::io::Error) -> SnapshotError {
    SnapshotError::Io { op: "reading", path: "the snapshot".into(), source }
}

impl<R: Read> FrameReader<R> {
    /// Reads and checks the header of `input`.
    pub fn new(mut input: R) -> Result<FrameReader<R>> {
        let mut header = [0u8; HEADER_LEN];
        let got = read_full(&mut input, &mut header).map_err(read_error)?;
        if got < 8 || header[..8] != MAGIC[..] {
            return Err(if got >= 8 || header[..got] != MAGIC[..got] {
                SnapshotError::NotASnapshot
            } else {
                SnapshotError::Truncated { offset: got as u64, what: "the header".into() }
            });
        }
        if got < HEADER_LEN {
            return Err(SnapshotError::Truncated { offset: got as u64, what: "the header".into() });
        }
        let window = decode_header(&header)?;
        Ok(FrameReader {
            input,
            window,
            frame: Vec::with_capacity(FRAME_MAX),
            pos: 0,
            packed: Vec::with_capacity(FRAME_MAX + FRAME_HEADER_LEN + 4),
            decompress: Decompress::new(false),
            frame_offset: HEADER_LEN as u64,
            frame_stream_start: 0,
            file_offset: HEADER_LEN as u64,
            ended: false,
            frames: 0,
        })
    }

    /// The back-reference window the header declares.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Offset of the next byte in the record stream.
    pub fn stream_offset(&self) -> u64 {
        self.frame_stream_start + self.pos as u64
    }

    /// File offset of the frame that holds the next byte.
    pub fn frame_offset(&self) -> u64 {
        if self.pos < self.frame.len() { self.frame_offset } else { self.file_offset }
    }

    /// File bytes read so far.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// Loads the next frame; `false` at the end of the file (between frames).
    fn next_frame(&mut self) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let start = self.file_offset;
        let mut head = [0u8; FRAME_HEADER_LEN];
        let got = read_full(&mut self.input, &mut head).map_err(read_error)?;
        if got == 0 {
            self.ended = true;
            return Ok(false);
        }
        if got < FRAME_HEADER_LEN {
            return Err(SnapshotError::Truncated {
                offset: start + got as u64,
                what: "a frame header".into(),
            });
        }
        let codec = head[0];
        let raw_len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let stored_len = u32::from_le_bytes([head[5], head[6], head[7], head[8]]) as usize;
        let corrupt = |reason: String| SnapshotError::Corrupt { offset: start, reason };
        if raw_len == 0 || raw_len > FRAME_MAX || stored_len > FRAME_MAX {
            return Err(corrupt(format!("frame lengths {stored_len}/{raw_len} outside 1..={FRAME_MAX}")));
        }
        self.packed.clear();
        self.packed.extend_from_slice(&head);
        self.packed.resize(FRAME_HEADER_LEN + stored_len + 4, 0);
        let body = self.packed.get_mut(FRAME_HEADER_LEN..).unwrap_or_default();
        let got = read_full(&mut self.input, body).map_err(read_error)?;
        if got < stored_len + 4 {
            let offset = start + (FRAME_HEADER_LEN + got) as u64;
            return Err(SnapshotError::Truncated { offset, what: "a frame".into() });
        }
        let crc_at = FRAME_HEADER_LEN + stored_len;
        let crc = self.packed.get(crc_at..crc_at + 4).unwrap_or_default();
        let claimed = u32::from_le_bytes(crc.try_into().unwrap_or([0; 4]));
        if crc32fast::hash(self.packed.get(..crc_at).unwrap_or_default()) != claimed {
            return Err(corrupt("frame checksum mismatch".into()));
        }
        let stored = self.packed.get(FRAME_HEADER_LEN..crc_at).unwrap_or_default();
        self.frame.clear();
        match codec {
            CODEC_STORED if stored_len == raw_len => self.frame.extend_from_slice(stored),
            CODEC_DEFLATE => {
                self.decompress.reset(false);
                self.frame.reserve(raw_len);
                let status = self.decompress.decompress_vec(stored, &mut self.frame, FlushDecompress::Finish);
                let whole = self.decompress.total_in() == stored_len as u64;
                if !matches!(status, Ok(Status::StreamEnd)) || !whole || self.frame.len() != raw_len {
                    return Err(corrupt("deflated frame does not inflate to its length".into()));
                }
            }
            _ => return Err(corrupt(format!("unknown frame codec {codec} (or stored lengths differ)"))),
        }
        self.frame_stream_start += self.pos as u64;
        self.pos = 0;
        self.frame_offset = start;
        self.file_offset = start + self.packed.len() as u64;
        self.frames += 1;
        Ok(true)
    }

    /// The next stream byte; `None` at the end of the stream.
    #[inline]
    pub fn byte(&mut self) -> Result<Option<u8>> {
        if let Some(byte) = self.frame.get(self.pos) {
            self.pos += 1;
            return Ok(Some(*byte));
        }
        if !self.next_frame()? {
            return Ok(None);
        }
        Ok(self.frame.get(self.pos).inspect(|_| self.pos += 1).copied())
    }

    /// Appends exactly `len` stream bytes to `out`; `false` if the stream ends first.
    pub fn bytes(&mut self, len: usize, out: &mut Vec<u8>) -> Result<bool> {
        let mut left = len;
        while left > 0 {
            let available = self.frame.len() - self.pos;
            if available == 0 {
                if !self.next_frame()? {
                    return Ok(false);
                }
                continue;
            }
            let take = available.min(left);
            out.extend_from_slice(self.frame.get(self.pos..self.pos + take).unwrap_or_default());
            self.pos += take;
            left -= take;
        }
        Ok(true)
    }

    /// Whether the stream and the file end here (no byte left in this frame, no frame after).
    pub fn at_end(&mut self) -> Result<bool> {
        if self.pos < self.frame.len() {
            return Ok(false);
        }
        Ok(!self.next_frame()?)
    }
}
