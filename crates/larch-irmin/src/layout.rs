//! The files holding the pack and how a global offset resolves to one of them (spec §4.3, §4.5,
//! §4.6, §4.13): suffix chunks, the prefix and its mapping after a GC, and lower volumes.

use crate::control::{Control, Status, VolumeControl};
use crate::error::{IrminError, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Mapping files hold little-endian (global offset, file offset, length) triples.
const MAPPING_ENTRY: usize = 24;

/// Small reads are served from cached blocks of this size (one `pread` per block, not per entry:
/// an import reads an entry's header and body, and each child's header, close together). A page,
/// not more: on a large store most entries an import reads are far from the last ones, and a
/// miss reads a whole block (64 KiB blocks passed 30-50x the bytes needed to `pread`, 868 GB for
/// the mainnet rung's 12 GB store; docs/benchmarks.md).
const BLOCK: u64 = 4 << 10;
/// Blocks cached per file (direct-mapped by block number): 1 MiB.
const BLOCK_SLOTS: usize = 256;
/// Reads up to this size go through the block cache.
const CACHED_READ_MAX: usize = 4096;

/// A cached block: its number and bytes.
type CachedBlock = (u64, Vec<u8>);

/// An open file of the store with its size at open time.
#[derive(Debug)]
pub(crate) struct DataFile {
    pub(crate) path: PathBuf,
    file: File,
    pub(crate) len: u64,
    blocks: std::sync::Mutex<Vec<Option<CachedBlock>>>,
}

impl DataFile {
    pub(crate) fn open(path: PathBuf) -> Result<DataFile> {
        let file = File::open(&path).map_err(|source| IrminError::Io {
            file: path.clone(),
            offset: 0,
            op: "open",
            source,
        })?;
        let len = file
            .metadata()
            .map_err(|source| IrminError::Io { file: path.clone(), offset: 0, op: "metadata", source })?
            .len();
        Ok(DataFile { path, file, len, blocks: std::sync::Mutex::new(vec![None; BLOCK_SLOTS]) })
    }

    /// Reads exactly `len` bytes at `offset`, which the caller checked lie inside the file.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if offset.checked_add(len as u64).is_none_or(|end| end > self.len) {
            return Err(IrminError::corrupt(
                &self.path,
                offset,
                format!("read of {len} bytes past the end ({})", self.len),
            ));
        }
        let within = offset % BLOCK;
        if len <= CACHED_READ_MAX && within + len as u64 <= BLOCK {
            return self.read_cached(offset / BLOCK, within as usize, len);
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset).map_err(|source| IrminError::Io {
            file: self.path.clone(),
            offset,
            op: "read",
            source,
        })?;
        Ok(buf)
    }

    /// `len` bytes at `within` of block `block`, read whole into its slot on a miss.
    fn read_cached(&self, block: u64, within: usize, len: usize) -> Result<Vec<u8>> {
        let mut slots = self.blocks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = slots.get_mut((block % BLOCK_SLOTS as u64) as usize);
        let Some(slot) = slot else {
            return Err(IrminError::corrupt(&self.path, block * BLOCK, "block slot"));
        };
        if slot.as_ref().is_none_or(|(held, _)| *held != block) {
            let start = block * BLOCK;
            let size = (self.len - start).min(BLOCK) as usize;
            let mut data = slot.take().map(|(_, data)| data).unwrap_or_default();
            data.resize(size, 0);
            self.file.read_exact_at(&mut data, start).map_err(|source| IrminError::Io {
                file: self.path.clone(),
                offset: start,
                op: "read",
                source,
            })?;
            *slot = Some((block, data));
        }
        match slot.as_ref().and_then(|(_, data)| data.get(within..within + len)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(IrminError::corrupt(&self.path, block * BLOCK + within as u64, "read past a block")),
        }
    }

    /// Reads the whole file (callers bound its size first).
    pub(crate) fn read_all(&self) -> Result<Vec<u8>> {
        let len =
            usize::try_from(self.len).map_err(|_| IrminError::corrupt(&self.path, 0, "file too large"))?;
        self.read(0, len)
    }
}

/// A run of global offsets `[start, end)` stored contiguously in `file` from `file_offset`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: u64,
    end: u64,
    file: usize,
    file_offset: u64,
}

/// A non-empty lower volume: the range of global offsets routed to it, and its runs.
#[derive(Debug)]
struct Volume {
    start: u64,
    end: u64,
    /// Sorted, disjoint runs of `volume.data`.
    segments: Vec<Segment>,
}

/// Bytes of the pack read from one segment.
pub(crate) struct Span {
    /// The bytes (at most what was asked, cut at the segment's end).
    pub(crate) bytes: Vec<u8>,
    /// How many bytes the segment holds from the asked offset on.
    pub(crate) available: u64,
    /// Index of the file (for [`Layout::file_path`]).
    pub(crate) file: usize,
    /// Offset in that file.
    pub(crate) file_offset: u64,
}

/// Where every readable global offset lives.
#[derive(Debug)]
pub(crate) struct Layout {
    files: Vec<DataFile>,
    suffix_start: u64,
    /// Sorted, disjoint runs: the suffix chunks.
    suffix: Vec<Segment>,
    /// Sorted, disjoint runs of the prefix (after a GC).
    prefix: Vec<Segment>,
    /// Lower volumes (non-empty ones), in volume order.
    volumes: Vec<Volume>,
    pub(crate) bytes_read: AtomicU64,
}

fn read_mapping(
    file: &DataFile,
    valid: Option<u64>,
    data_index: usize,
    data_len: u64,
) -> Result<Vec<Segment>> {
    let len = valid.unwrap_or(file.len);
    if len > file.len {
        return Err(IrminError::corrupt(
            &file.path,
            0,
            format!("mapping end {len} past the file's size {}", file.len),
        ));
    }
    if !len.is_multiple_of(MAPPING_ENTRY as u64) {
        return Err(IrminError::corrupt(
            &file.path,
            0,
            format!("mapping size {len} is not a multiple of 24"),
        ));
    }
    let bytes = file.read(
        0,
        usize::try_from(len).map_err(|_| IrminError::corrupt(&file.path, 0, "mapping too large"))?,
    )?;
    let mut segments: Vec<Segment> = Vec::with_capacity(bytes.len() / MAPPING_ENTRY);
    for (i, triple) in bytes.chunks_exact(MAPPING_ENTRY).enumerate() {
        let at = (i * MAPPING_ENTRY) as u64;
        let field = |k: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(triple.get(k * 8..k * 8 + 8).unwrap_or(&[0; 8]));
            u64::from_le_bytes(raw)
        };
        let (start, file_offset, length) = (field(0), field(1), field(2));
        let end = start
            .checked_add(length)
            .ok_or_else(|| IrminError::corrupt(&file.path, at, "range overflows"))?;
        if file_offset.checked_add(length).is_none_or(|e| e > data_len) {
            return Err(IrminError::corrupt(
                &file.path,
                at,
                format!("range ({start}, {file_offset}, {length}) past the data file's end {data_len}"),
            ));
        }
        if let Some(last) = segments.last()
            && last.end > start
        {
            return Err(IrminError::corrupt(&file.path, at, "mapping ranges not sorted or overlapping"));
        }
        segments.push(Segment { start, end, file: data_index, file_offset });
    }
    Ok(segments)
}

fn find(segments: &[Segment], offset: u64) -> Option<&Segment> {
    let index = segments.partition_point(|segment| segment.end <= offset);
    segments.get(index).filter(|segment| segment.start <= offset)
}

impl Layout {
    /// Opens the pack files the control file names; `lower_root` holds the volumes, if any.
    pub(crate) fn open(dir: &Path, control: &Control, lower_root: &Path) -> Result<Layout> {
        let mut files = Vec::new();
        let (suffix_start, dead_bytes) = control.suffix_start();
        let mut suffix = Vec::new();
        let mut global = suffix_start.checked_sub(dead_bytes).ok_or_else(|| {
            IrminError::corrupt(dir.join("store.control"), 0, "suffix dead bytes exceed its start offset")
        })?;
        let last = control.chunk_start_idx.saturating_add(control.chunk_num.saturating_sub(1));
        if control.chunk_num > 1 << 20 {
            return Err(IrminError::corrupt(
                dir.join("store.control"),
                0,
                format!("{} suffix chunks", control.chunk_num),
            ));
        }
        for index in control.chunk_start_idx..=last {
            let data = DataFile::open(dir.join(format!("store.{index}.suffix")))?;
            let header = if index == 0 && control.legacy_headers() { 16 } else { 0 };
            let length = if index == last {
                if header + control.appendable_chunk_poff > data.len {
                    return Err(IrminError::corrupt(
                        &data.path,
                        data.len,
                        format!(
                            "appendable_chunk_poff {} past the chunk's size {}",
                            control.appendable_chunk_poff, data.len
                        ),
                    ));
                }
                control.appendable_chunk_poff
            } else {
                data.len.saturating_sub(header)
            };
            let end = global + length;
            // The first `dead_bytes` of the suffix are not readable.
            let skip = suffix_start.saturating_sub(global).min(length);
            if global + skip < end {
                suffix.push(Segment {
                    start: global + skip,
                    end,
                    file: files.len(),
                    file_offset: header + skip,
                });
            }
            files.push(data);
            global = end;
        }
        let mut prefix = Vec::new();
        if let Status::Gced { generation, mapping_end_poff, .. } = control.status {
            let data = DataFile::open(dir.join(format!("store.{generation}.prefix")))?;
            let mapping = DataFile::open(dir.join(format!("store.{generation}.mapping")))?;
            prefix = read_mapping(&mapping, mapping_end_poff, files.len(), data.len)?;
            if prefix.last().is_some_and(|segment| segment.end > suffix_start) {
                return Err(IrminError::corrupt(&mapping.path, 0, "prefix ranges overlap the suffix"));
            }
            files.push(data);
            files.push(mapping);
        }
        let mut volumes = Vec::new();
        if control.volume_num > 1 << 16 {
            return Err(IrminError::corrupt(
                dir.join("store.control"),
                0,
                format!("{} volumes", control.volume_num),
            ));
        }
        for n in 0..control.volume_num {
            let volume = lower_root.join(format!("volume.{n}"));
            if !volume.is_dir() {
                return Err(IrminError::corrupt(&volume, 0, "lower volume missing"));
            }
            // A volume without a control file is empty (added, nothing archived in it yet).
            if !volume.join("volume.control").exists() {
                continue;
            }
            let control_file = DataFile::open(volume.join("volume.control"))?;
            if control_file.len > crate::control::MAX_CONTROL_BYTES {
                return Err(IrminError::corrupt(
                    &control_file.path,
                    0,
                    "volume control file larger than 4096 bytes",
                ));
            }
            let vc = VolumeControl::decode(&control_file.read_all()?, &control_file.path)?;
            let data = DataFile::open(volume.join("volume.data"))?;
            let mapping = DataFile::open(volume.join("volume.mapping"))?;
            // The mapping may also cover offsets below `start_offset`: a volume other than the
            // first begins with a copy of the upper prefix of its time.
            let segments = read_mapping(&mapping, Some(vc.mapping_end_poff), files.len(), data.len)?;
            files.push(data);
            files.push(mapping);
            volumes.push(Volume { start: vc.start_offset, end: vc.end_offset, segments });
        }
        Ok(Layout { files, suffix_start, suffix, prefix, volumes, bytes_read: AtomicU64::new(0) })
    }

    /// End of the readable pack (the suffix's end).
    pub(crate) fn end(&self) -> u64 {
        self.suffix.last().map_or(self.suffix_start, |segment| segment.end)
    }

    /// The path of file `index` (for error messages).
    pub(crate) fn file_path(&self, index: usize) -> &Path {
        self.files.get(index).map_or(Path::new("?"), |file| file.path.as_path())
    }

    /// The segment holding `offset`: suffix above the suffix start, else the prefix, else the
    /// volumes.
    fn locate(&self, offset: u64) -> Result<Segment> {
        let found = if offset >= self.suffix_start {
            find(&self.suffix, offset)
        } else {
            find(&self.prefix, offset).or_else(|| self.lower(offset))
        };
        found.copied().ok_or(IrminError::Unreadable {
            offset,
            reason: if offset >= self.end() {
                "past the end of the pack"
            } else {
                "collected by GC and not in a lower volume"
            },
        })
    }

    /// The lower run holding `offset`: in the volume whose `[start, end)` contains it (Irmin's
    /// routing, `lower.ml` `find_volume`), else in any volume whose mapping covers it (a later
    /// volume's copy of an old prefix; Irmin reaches those through the volume a key came from).
    fn lower(&self, offset: u64) -> Option<&Segment> {
        let routed = self.volumes.iter().find(|volume| volume.start <= offset && offset < volume.end);
        routed
            .and_then(|volume| find(&volume.segments, offset))
            .or_else(|| self.volumes.iter().find_map(|volume| find(&volume.segments, offset)))
    }

    /// Reads up to `max` bytes of the pack at global `offset`, stopping at the end of the run
    /// that holds it.
    pub(crate) fn read_upto(&self, offset: u64, max: usize) -> Result<Span> {
        self.read_in(offset, max, false)
    }

    /// As [`Layout::read_upto`]; with `lower_only`, only from the lower volumes (which archive the
    /// original of a commit the prefix keeps as a dangling parent).
    pub(crate) fn read_in(&self, offset: u64, max: usize, lower_only: bool) -> Result<Span> {
        let segment = if lower_only {
            self.lower(offset)
                .copied()
                .ok_or(IrminError::Unreadable { offset, reason: "not in a lower volume" })?
        } else {
            self.locate(offset)?
        };
        let available = segment.end - offset;
        let len = usize::try_from(available.min(max as u64)).unwrap_or(max);
        let file_offset = segment.file_offset + (offset - segment.start);
        let file =
            self.files.get(segment.file).ok_or(IrminError::Unreadable { offset, reason: "no file" })?;
        let bytes = file.read(file_offset, len)?;
        self.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
        Ok(Span { bytes, available, file: segment.file, file_offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use std::io::Write;

    /// Reads of every size at random offsets (within a block, across block boundaries, larger
    /// than the cached reads, at the end) return the file's bytes; a read past the end fails.
    #[test]
    fn block_reads_return_the_file_bytes() {
        let (mut rng, _seed) = larch_testkit::seed::seeded_rng("block_reads_return_the_file_bytes", 40);
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("data");
        let len = 40 * BLOCK as usize + 123;
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        File::create(&path).and_then(|mut f| f.write_all(&bytes)).expect("write the file");
        let file = DataFile::open(path).expect("open");
        for _ in 0..20_000 {
            let size = match rng.random_range(0..4) {
                0 => rng.random_range(0..=16),
                1 => rng.random_range(0..=CACHED_READ_MAX),
                2 => rng.random_range(CACHED_READ_MAX..3 * BLOCK as usize),
                _ => rng.random_range(0..=64),
            };
            let offset = match rng.random_range(0..3) {
                // Just before a block boundary, so that the read may straddle it.
                0 => (rng.random_range(1..40) * BLOCK as usize)
                    .saturating_sub(rng.random_range(0..=size.max(1))),
                _ => rng.random_range(0..=len - size),
            };
            let offset = offset.min(len - size);
            let read = file.read(offset as u64, size).expect("read inside the file");
            assert_eq!(read.as_slice(), &bytes[offset..offset + size], "offset {offset}, {size} bytes");
        }
        assert!(file.read(len as u64 - 10, 11).is_err(), "a read past the end must fail");
    }
}
