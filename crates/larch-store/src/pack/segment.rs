//! GC segment files `seg.<gen>` (docs/gc-design.md §3.3): the live records of a collected range of
//! the pack, copied byte for byte in runs, with a mapping from global offsets to file positions.
//!
//! [`SegmentWriter`] writes one through the [`Storage`] seam (header, runs, mapping, footer);
//! [`Segment::open`] validates every field (magics, version, CRCs of header, mapping and footer,
//! runs increasing and inside the range and the file) before trusting any of them, and never
//! allocates from a count it has not bounded by the file's length; [`Segment::locate`] resolves a
//! global offset to a file position, or to [`StoreError::CollectedObject`] when it lies in the
//! segment's range but in no run.

use crate::error::{FileKind, Result, StoreError};
use crate::io::storage::Storage;
use larch_core::Hash;
use std::sync::Arc;

/// Magic of the segment header.
pub const SEGMENT_MAGIC: &[u8; 8] = b"LARCHSEG";
/// Magic closing the segment footer.
pub const SEGMENT_END_MAGIC: &[u8; 8] = b"LARCHSGE";
/// Version of the segment format (that of the chunked layout, format 3).
pub const SEGMENT_VERSION: u32 = 3;
/// Length of the header; the first run starts here.
pub const SEGMENT_HEADER_LEN: u64 = 96;
/// Length of the footer.
pub const SEGMENT_FOOTER_LEN: u64 = 32;
/// Bytes of one mapping entry: global start and file position of a run.
pub const MAPPING_ENTRY_LEN: u64 = 16;

/// The fields of a segment header (docs/gc-design.md §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// GC generation of the slice that wrote the segment.
    pub generation: u64,
    /// Global start of the range the segment replaces.
    pub range_start: u64,
    /// Global end (exclusive) of that range.
    pub range_end: u64,
    /// Record offset of the GC commit.
    pub keep_from: u64,
    /// Position of the GC commit's entry in `commits`.
    pub index_keep_from: u64,
    /// Hash of the GC commit.
    pub commit: Hash,
}

impl SegmentHeader {
    /// The 96 header bytes.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN as usize] {
        let mut out = [0u8; SEGMENT_HEADER_LEN as usize];
        out[..8].copy_from_slice(SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.generation.to_le_bytes());
        out[24..32].copy_from_slice(&self.range_start.to_le_bytes());
        out[32..40].copy_from_slice(&self.range_end.to_le_bytes());
        out[40..48].copy_from_slice(&self.keep_from.to_le_bytes());
        out[48..56].copy_from_slice(&self.index_keep_from.to_le_bytes());
        out[56..88].copy_from_slice(self.commit.as_bytes());
        let crc = crc32fast::hash(&out[..88]);
        out[88..92].copy_from_slice(&crc.to_le_bytes());
        out
    }
}

/// What a finished segment is, as the control slot names it (docs/gc-design.md §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The file's length.
    pub file_len: u64,
    /// The footer's own CRC (the field at `end − 12`), which the control slot repeats.
    pub footer_crc: u32,
    /// Number of runs.
    pub runs: u64,
    /// Bytes of records copied (the runs' total length).
    pub record_bytes: u64,
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut array = [0u8; 8];
    if let Some(slice) = bytes.get(at..at + 8) {
        array.copy_from_slice(slice);
    }
    u64::from_le_bytes(array)
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut array = [0u8; 4];
    if let Some(slice) = bytes.get(at..at + 4) {
        array.copy_from_slice(slice);
    }
    u32::from_le_bytes(array)
}

/// Writes a segment: [`SegmentWriter::push_run`] for each run of live records, in increasing
/// global order, then [`SegmentWriter::finish`]. Adjacent runs (one starting where the previous
/// ends) are merged into one mapping entry. Records are buffered and written in pieces of about
/// 1 MiB. Nothing is synced: the caller syncs the file (and its directory) before publishing it.
#[derive(Debug)]
pub struct SegmentWriter {
    storage: Arc<dyn Storage>,
    header: SegmentHeader,
    /// File position of the next byte to write.
    position: u64,
    /// Bytes not yet written, starting at `position - buffer.len()`.
    buffer: Vec<u8>,
    /// Mapping: (global start, file position) per run.
    mapping: Vec<(u64, u64)>,
    /// Global end of the last run pushed.
    global_end: u64,
}

/// Buffered bytes are written once they reach this size.
const WRITE_PIECE: usize = 1 << 20;

impl SegmentWriter {
    /// A writer of a segment with `header` into `storage` (an empty file); writes the header.
    pub fn new(storage: Arc<dyn Storage>, header: SegmentHeader) -> Result<SegmentWriter> {
        if header.range_start > header.range_end {
            return Err(StoreError::corrupt(FileKind::Segment, 24, "segment range ends before it starts"));
        }
        let mut buffer = Vec::with_capacity(WRITE_PIECE);
        buffer.extend_from_slice(&header.encode());
        Ok(SegmentWriter {
            storage,
            header,
            position: SEGMENT_HEADER_LEN,
            buffer,
            mapping: Vec::new(),
            global_end: header.range_start,
        })
    }

    /// Appends the records `bytes` that started at global offset `start` in the range: `start`
    /// must not be below the end of the previous run, and the run must end inside the range.
    pub fn push_run(&mut self, start: u64, bytes: &[u8]) -> Result<()> {
        let end = start.checked_add(bytes.len() as u64);
        if bytes.is_empty() || start < self.global_end || end.is_none_or(|end| end > self.header.range_end) {
            return Err(StoreError::corrupt(
                FileKind::Segment,
                self.position,
                format!(
                    "run [{start}, +{}) out of order or outside the range [{}, {})",
                    bytes.len(),
                    self.header.range_start,
                    self.header.range_end
                ),
            ));
        }
        if self.mapping.is_empty() || start != self.global_end {
            self.mapping.push((start, self.position));
        }
        self.global_end = start + bytes.len() as u64;
        self.position += bytes.len() as u64;
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= WRITE_PIECE {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let at = self.position - self.buffer.len() as u64;
        self.storage
            .write_at(at, &self.buffer)
            .map_err(|e| StoreError::io(FileKind::Segment, at, "write", e))?;
        self.buffer.clear();
        Ok(())
    }

    /// Writes the mapping and the footer; returns what the control slot needs.
    pub fn finish(mut self) -> Result<SegmentSummary> {
        let map_at = self.position;
        let record_bytes = map_at - SEGMENT_HEADER_LEN;
        let map_start = self.buffer.len();
        for (global, position) in &self.mapping {
            self.buffer.extend_from_slice(&global.to_le_bytes());
            self.buffer.extend_from_slice(&position.to_le_bytes());
        }
        let map_crc = crc32fast::hash(self.buffer.get(map_start..).unwrap_or_default());
        let footer_start = self.buffer.len();
        self.buffer.extend_from_slice(&map_at.to_le_bytes());
        self.buffer.extend_from_slice(&(self.mapping.len() as u64).to_le_bytes());
        self.buffer.extend_from_slice(&map_crc.to_le_bytes());
        let footer_crc = crc32fast::hash(self.buffer.get(footer_start..).unwrap_or_default());
        self.buffer.extend_from_slice(&footer_crc.to_le_bytes());
        self.buffer.extend_from_slice(SEGMENT_END_MAGIC);
        self.position += (self.buffer.len() - map_start) as u64;
        self.flush()?;
        Ok(SegmentSummary {
            file_len: self.position,
            footer_crc,
            runs: self.mapping.len() as u64,
            record_bytes,
        })
    }
}

/// Where a global offset lies in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentSlot {
    /// File position of the global offset.
    pub position: u64,
    /// Bytes from there to the end of its run: a record read there must fit in them.
    pub available: u64,
}

/// An opened and validated segment: its header and its mapping in memory (16 bytes per run).
#[derive(Debug)]
pub struct Segment {
    storage: Arc<dyn Storage>,
    header: SegmentHeader,
    /// (global start, file position) per run, both strictly increasing.
    mapping: Vec<(u64, u64)>,
    /// File position of the mapping: the end of the last run.
    map_at: u64,
    summary: SegmentSummary,
}

impl Segment {
    /// A chunk file kept in place by a GC, read as a segment of one run: global `[start, end)` at
    /// file position `data_at` on (docs/gc-design.md §13, *Chunks kept in place*). `generation` is
    /// its control entry's (with [`crate::format::control::KEPT_CHUNK_BIT`]). The file must hold the whole
    /// range.
    pub fn over_chunk(
        storage: Arc<dyn Storage>,
        generation: u64,
        (start, end): (u64, u64),
        data_at: u64,
    ) -> Result<Segment> {
        let file_len = storage.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?;
        let map_at = end.checked_sub(start).and_then(|len| len.checked_add(data_at));
        let Some(map_at) = map_at.filter(|map_at| *map_at <= file_len && start < end) else {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                0,
                format!(
                    "a chunk kept in place over [{start}, {end}) from position {data_at} is {file_len} bytes long"
                ),
            ));
        };
        let header = SegmentHeader {
            generation,
            range_start: start,
            range_end: end,
            keep_from: 0,
            index_keep_from: 0,
            commit: Hash([0; 32]),
        };
        let summary = SegmentSummary { file_len, footer_crc: 0, runs: 1, record_bytes: end - start };
        Ok(Segment { storage, header, mapping: vec![(start, data_at)], map_at, summary })
    }

    /// Opens the segment in `storage`, checking magics, version, the three CRCs, the mapping's
    /// order, and that every run lies inside the range and the file. Every failure is a
    /// [`StoreError::Corrupt`] of [`FileKind::Segment`] at the offending file position (or a
    /// read error); nothing is allocated beyond what the file's length bounds.
    pub fn open(storage: Arc<dyn Storage>) -> Result<Segment> {
        let corrupt = |at: u64, reason: String| StoreError::corrupt(FileKind::Segment, at, reason);
        let read = |at: u64, buf: &mut [u8]| {
            storage.read_at(at, buf).map_err(|e| StoreError::io(FileKind::Segment, at, "read", e))
        };
        let file_len = storage.len().map_err(|e| StoreError::io(FileKind::Segment, 0, "stat", e))?;
        if file_len < SEGMENT_HEADER_LEN + SEGMENT_FOOTER_LEN {
            return Err(corrupt(
                0,
                format!("segment of {file_len} bytes is shorter than its header and footer"),
            ));
        }
        let mut head = [0u8; SEGMENT_HEADER_LEN as usize];
        read(0, &mut head)?;
        if head.get(..8) != Some(&SEGMENT_MAGIC[..]) {
            return Err(corrupt(0, "bad segment magic".into()));
        }
        let version = le_u32(&head, 8);
        if version != SEGMENT_VERSION {
            return Err(StoreError::UnknownVersion {
                file: FileKind::Segment,
                found: version,
                supported: SEGMENT_VERSION,
            });
        }
        if le_u32(&head, 88) != crc32fast::hash(head.get(..88).unwrap_or_default()) {
            return Err(corrupt(88, "segment header checksum mismatch".into()));
        }
        if le_u32(&head, 12) != 0 || le_u32(&head, 92) != 0 {
            return Err(corrupt(12, "reserved header bytes are not zero".into()));
        }
        let header = SegmentHeader {
            generation: le_u64(&head, 16),
            range_start: le_u64(&head, 24),
            range_end: le_u64(&head, 32),
            keep_from: le_u64(&head, 40),
            index_keep_from: le_u64(&head, 48),
            commit: Hash::from_slice(head.get(56..88).unwrap_or_default())
                .map_err(|_| corrupt(56, "bad commit hash".into()))?,
        };
        if header.range_start > header.range_end {
            return Err(corrupt(24, "segment range ends before it starts".into()));
        }
        let footer_at = file_len - SEGMENT_FOOTER_LEN;
        let mut foot = [0u8; SEGMENT_FOOTER_LEN as usize];
        read(footer_at, &mut foot)?;
        if foot.get(24..32) != Some(&SEGMENT_END_MAGIC[..]) {
            return Err(corrupt(footer_at + 24, "bad segment end magic".into()));
        }
        let footer_crc = le_u32(&foot, 20);
        if footer_crc != crc32fast::hash(foot.get(..20).unwrap_or_default()) {
            return Err(corrupt(footer_at + 20, "segment footer checksum mismatch".into()));
        }
        let map_at = le_u64(&foot, 0);
        let count = le_u64(&foot, 8);
        let map_crc = le_u32(&foot, 16);
        // The mapping must fill exactly the bytes between `map_at` and the footer: this bounds
        // `count` by the file's length before anything is allocated from it.
        let map_len = footer_at.checked_sub(map_at).filter(|_| map_at >= SEGMENT_HEADER_LEN);
        if map_len.is_none_or(|len| count.checked_mul(MAPPING_ENTRY_LEN) != Some(len)) {
            return Err(corrupt(
                footer_at,
                format!("mapping of {count} runs at {map_at} does not fit before the footer at {footer_at}"),
            ));
        }
        let map_bytes_len = usize::try_from(footer_at - map_at)
            .map_err(|_| corrupt(map_at, "mapping too large for memory".into()))?;
        let mut map_bytes = vec![0u8; map_bytes_len];
        read(map_at, &mut map_bytes)?;
        if crc32fast::hash(&map_bytes) != map_crc {
            return Err(corrupt(map_at, "segment mapping checksum mismatch".into()));
        }
        let mapping: Vec<(u64, u64)> = map_bytes
            .chunks_exact(MAPPING_ENTRY_LEN as usize)
            .map(|entry| (le_u64(entry, 0), le_u64(entry, 8)))
            .collect();
        let mut previous: Option<(u64, u64)> = None;
        for (i, &(global, position)) in mapping.iter().enumerate() {
            let at = map_at + i as u64 * MAPPING_ENTRY_LEN;
            let next_position = mapping.get(i + 1).map_or(map_at, |next| next.1);
            let expected_first = previous.is_none() && position != SEGMENT_HEADER_LEN;
            let run_len = next_position.checked_sub(position).filter(|len| *len > 0);
            let Some(run_len) = run_len.filter(|_| !expected_first) else {
                return Err(corrupt(
                    at,
                    format!("run {i} at file position {position} is empty or out of order"),
                ));
            };
            let global_end = global.checked_add(run_len);
            let after_previous = previous.is_none_or(|(g, p)| g + (position - p) <= global);
            if global < header.range_start
                || global_end.is_none_or(|end| end > header.range_end)
                || !after_previous
            {
                return Err(corrupt(
                    at,
                    format!("run {i} at global offset {global} overlaps another or leaves the range"),
                ));
            }
            previous = Some((global, position));
        }
        if mapping.is_empty() && map_at != SEGMENT_HEADER_LEN {
            return Err(corrupt(footer_at, "bytes between the header and an empty mapping".into()));
        }
        let summary =
            SegmentSummary { file_len, footer_crc, runs: count, record_bytes: map_at - SEGMENT_HEADER_LEN };
        Ok(Segment { storage, header, mapping, map_at, summary })
    }

    /// The header.
    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    /// Length, footer CRC, runs and record bytes.
    pub fn summary(&self) -> SegmentSummary {
        self.summary
    }

    /// The runs: global start, file position and length of each, in increasing order.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.mapping.iter().enumerate().map(|(i, &(global, position))| {
            let next = self.mapping.get(i + 1).map_or(self.map_at, |next| next.1);
            (global, position, next - position)
        })
    }

    /// Whether `global` lies in the range this segment replaces.
    pub fn covers(&self, global: u64) -> bool {
        (self.header.range_start..self.header.range_end).contains(&global)
    }

    /// The file position of global offset `global`: [`StoreError::CollectedObject`] when it lies in
    /// the segment's range but in no run (the GC did not keep it); a corruption error when it is
    /// outside the range (the caller asked the wrong segment: a bad pointer).
    pub fn locate(&self, global: u64) -> Result<SegmentSlot> {
        if !self.covers(global) {
            return Err(StoreError::corrupt(
                FileKind::Segment,
                0,
                format!(
                    "offset {global} is outside the range [{}, {}) of segment {}",
                    self.header.range_start, self.header.range_end, self.header.generation
                ),
            ));
        }
        let index = self.mapping.partition_point(|&(start, _)| start <= global);
        let collected = StoreError::CollectedObject { offset: global, gc_generation: self.header.generation };
        let Some((&(start, position), next)) =
            index.checked_sub(1).and_then(|run| Some((self.mapping.get(run)?, self.mapping.get(run + 1))))
        else {
            return Err(collected);
        };
        let next = next.map_or(self.map_at, |next| next.1);
        let within = global - start;
        if within >= next - position {
            return Err(collected);
        }
        Ok(SegmentSlot { position: position + within, available: next - position - within })
    }

    /// The file the segment is read from.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The global start of the first run starting after `global`, if any.
    pub fn next_run_after(&self, global: u64) -> Option<u64> {
        let index = self.mapping.partition_point(|&(start, _)| start <= global);
        self.mapping.get(index).map(|&(start, _)| start)
    }

    /// Reads `buf.len()` bytes at global offset `global`, which must lie inside one run.
    #[allow(dead_code)] // tests and tools
    pub fn read_global(&self, global: u64, buf: &mut [u8]) -> Result<()> {
        let slot = self.locate(global)?;
        if buf.len() as u64 > slot.available {
            return Err(StoreError::corrupt(
                FileKind::Segment,
                slot.position,
                format!("a read of {} bytes at global offset {global} leaves its run", buf.len()),
            ));
        }
        self.storage
            .read_at(slot.position, buf)
            .map_err(|e| StoreError::io(FileKind::Segment, slot.position, "read", e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::io::storage::MemStorage;

    fn header() -> SegmentHeader {
        SegmentHeader {
            generation: 1,
            range_start: 16,
            range_end: 0x1000,
            keep_from: 0x2000,
            index_keep_from: 60,
            commit: Hash([0xab; 32]),
        }
    }

    #[test]
    fn adjacent_runs_merge_and_out_of_order_runs_are_refused() {
        let storage = Arc::new(MemStorage::new());
        let mut writer = SegmentWriter::new(storage.clone(), header()).unwrap();
        writer.push_run(100, &[1; 10]).unwrap();
        writer.push_run(110, &[2; 5]).unwrap();
        assert!(writer.push_run(112, &[3]).is_err());
        assert!(writer.push_run(0x0fff, &[3, 4]).is_err());
        writer.push_run(200, &[4; 3]).unwrap();
        let summary = writer.finish().unwrap();
        assert_eq!(summary.runs, 2);
        assert_eq!(summary.record_bytes, 18);
        let segment = Segment::open(storage).unwrap();
        assert_eq!(segment.runs().collect::<Vec<_>>(), vec![(100, 96, 15), (200, 111, 3)]);
    }
}
