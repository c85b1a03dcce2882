//! `Repo::scan`: statistics of a store from one sequential pass over the framing of its published
//! pack, without decoding directories, hashing or walking what commits reach (that is `fsck`). It
//! reads the pack in 1 MiB pieces, so it costs one pass of sequential I/O and constant memory.

use crate::check::fsck::KindStats;
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{Cursor, PACK_HEADER_LEN, RecordKind};
use crate::format::control::ControlState;
use crate::pack::reader::PackReader;
use larch_core::Hash;
use std::collections::BTreeMap;

/// Size of one sequential read.
const READ_PIECE: usize = 1 << 20;
/// Bytes after a piece that the pass asks the pack's files to read ahead
/// ([`crate::pack::layout::Layout::will_need`]).
const READ_AHEAD: u64 = 8 << 20;
/// The longest framing prefix: a kind byte and a 10-byte uleb.
const MAX_PREFIX: usize = 11;
/// The longest prefix of a patch body that holds its `chain` byte: a 32-byte hash, a 10-byte uleb.
const MAX_PATCH_PREFIX: usize = 43;

/// What one sequential pass over a store's pack found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Published length of the pack.
    pub pack_bytes: u64,
    /// Published length of the commit index.
    pub index_bytes: u64,
    /// Commits in the index.
    pub commits: u64,
    /// Branches and the commits they point to, sorted by name.
    pub branches: Vec<(String, Hash)>,
    /// Records by kind, reachable or not.
    pub by_kind: BTreeMap<RecordKind, KindStats>,
    /// Patch records by chain length (1 = a patch of a full record).
    pub patch_chains: BTreeMap<u8, u64>,
    /// The largest record, in bytes with its framing, and its offset.
    pub largest_record: Option<(u64, u64)>,
}

impl ScanReport {
    /// Records of every kind.
    pub fn records(&self) -> u64 {
        self.by_kind.values().map(|kind| kind.count).sum()
    }

    /// Mean patch chain length, over patch records (0 when there are none).
    pub fn mean_chain(&self) -> f64 {
        let (count, total) = self
            .patch_chains
            .iter()
            .fold((0u64, 0u64), |(count, total), (&chain, &n)| (count + n, total + u64::from(chain) * n));
        if count == 0 { 0.0 } else { total as f64 / count as f64 }
    }
}

/// A window of the pack read in pieces: `bytes` holds the pack from `start`.
struct Window<'a> {
    reader: &'a PackReader,
    end: u64,
    start: u64,
    bytes: Vec<u8>,
}

impl Window<'_> {
    /// The bytes `[offset, offset + want)`, or fewer at the published end; refills when `offset`
    /// is past the window or too close to its end.
    fn at(&mut self, offset: u64, want: usize) -> Result<&[u8]> {
        let have_end = self.start + self.bytes.len() as u64;
        let need_end = offset.saturating_add(want as u64).min(self.end);
        if offset < self.start || need_end > have_end {
            let len = usize::try_from((self.end - offset).min(READ_PIECE as u64)).unwrap_or(READ_PIECE);
            self.bytes.resize(len, 0);
            self.reader.read_raw(offset, &mut self.bytes)?;
            // The kernel reads nothing ahead of the pack's files: the next pieces are asked for
            // now, so that the disk reads them while this one is counted.
            self.reader.layout().will_need(offset + len as u64, READ_AHEAD);
            self.start = offset;
        }
        let from = usize::try_from(offset - self.start).unwrap_or(usize::MAX);
        let to = usize::try_from(need_end - self.start).unwrap_or(usize::MAX);
        self.bytes
            .get(from..to)
            .ok_or_else(|| StoreError::corrupt(FileKind::Pack, offset, "record past the end"))
    }
}

/// Counts the records of the pack published by `state` by kind, with their bytes and patch chain
/// lengths, in one sequential pass over the record framing (`crate::Repo::scan`).
pub(crate) fn scan(
    reader: &PackReader,
    state: &ControlState,
    commits: u64,
    branches: Vec<(String, larch_core::Hash)>,
) -> Result<ScanReport> {
    let end = state.pack_end;
    let mut report = ScanReport {
        pack_bytes: end,
        index_bytes: state.index_end,
        commits,
        branches,
        ..ScanReport::default()
    };
    // The live ranges: the runs of the GC segments (collected space is skipped), then the
    // chunks from the first one on.
    let layout = reader.layout().clone();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for segment in layout.segments() {
        ranges.extend(segment.segment.runs().map(|(global, _, len)| (global, global + len)));
    }
    ranges.push((layout.first_chunk_start().max(PACK_HEADER_LEN), end));
    for (start, range_end) in ranges {
        scan_range(reader, &mut report, start, range_end.min(end))?;
    }
    Ok(report)
}

/// Counts the records of `[start, end)`, a range of back-to-back records.
fn scan_range(reader: &PackReader, report: &mut ScanReport, start: u64, end: u64) -> Result<()> {
    let mut window = Window { reader, end, start: 0, bytes: Vec::new() };
    let mut offset = start;
    while offset < end {
        let prefix = window.at(offset, MAX_PREFIX)?;
        let mut cursor = Cursor::new(prefix, FileKind::Pack, offset);
        let kind_byte = cursor.u8()?;
        let kind = RecordKind::from_byte(kind_byte).ok_or_else(|| {
            StoreError::corrupt(FileKind::Pack, offset, format!("unknown record kind {kind_byte}"))
        })?;
        let body_len = cursor.leb()?;
        let header = cursor.position() as u64;
        let total = header
            .checked_add(body_len)
            .and_then(|n| n.checked_add(4))
            .filter(|&n| offset.checked_add(n).is_some_and(|record_end| record_end <= end))
            .ok_or_else(|| {
                StoreError::corrupt(FileKind::Pack, offset, "record runs past the published end")
            })?;
        if matches!(kind, RecordKind::PatchEntries | RecordKind::PatchTree) {
            let body = window
                .at(offset + header, MAX_PATCH_PREFIX.min(usize::try_from(body_len).unwrap_or(usize::MAX)))?;
            // Pointers count `back` from the record's first byte.
            let mut cursor = Cursor::new(body, FileKind::Pack, offset);
            cursor.pointer()?;
            *report.patch_chains.entry(cursor.u8()?).or_default() += 1;
        }
        let stats = report.by_kind.entry(kind).or_default();
        stats.count += 1;
        stats.bytes += total;
        if report.largest_record.is_none_or(|(bytes, _)| total > bytes) {
            report.largest_record = Some((total, offset));
        }
        offset += total;
    }
    Ok(())
}
