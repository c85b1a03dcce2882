//! The live set of a GC's region (docs/gc-design.md §4): the live records as *runs* of
//! contiguous records, so that its memory follows the number of runs, not of records (after a big
//! setup almost the whole region is live and contiguous).
//!
//! A run holds its start, its length and its number of records; the records inside are found
//! again from their framing (a kind byte and a LEB128 body length, docs/format.md §3) when they
//! are copied or when a late root must be a record start. A run is extended only up to
//! [`RUN_CAP`] bytes (a larger record is a run of its own), so that such a framing walk reads at
//! most that much, and never across a *split point* (the starts and ends of the layout's chunks
//! and segments: records never span them), so that every range the GC asks about (segments,
//! chunks, slices, the region) holds whole runs.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec;

/// The largest run built by extending a run with an adjacent record (a single record may be
/// larger): what a late-root check reads at most to find a record start inside a run.
pub const RUN_CAP: u64 = 64 << 10;

/// Above this many runs, the run list grows by an eighth instead of doubling: its peak stays
/// near the set, not twice it.
const DOUBLING_LIMIT: usize = 1 << 16;

/// Bytes of the framing head read to learn a record's length (a kind byte and a LEB128 length).
const HEAD_LEN: u64 = 11;

/// Contiguous live records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Global offset of the first record.
    pub start: u64,
    /// Bytes of the records, framing included.
    pub len: u32,
    /// Number of records.
    pub records: u32,
}

impl Run {
    /// The end of the last record.
    pub fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

/// The live records of a region as runs of contiguous records, increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveRuns {
    runs: Vec<Run>,
    records: u64,
    bytes: u64,
}

/// Builds a [`LiveRuns`] from records pushed in decreasing offset order (the mark's traversal).
#[derive(Debug, Default)]
pub struct LiveRunsBuilder {
    /// Runs, decreasing.
    runs: Vec<Run>,
    records: u64,
    bytes: u64,
    /// Split points, increasing: a run never holds records on both sides of one.
    splits: Vec<u64>,
}

impl LiveRunsBuilder {
    /// A builder whose runs never extend across any of `splits` (any order).
    pub fn new(mut splits: Vec<u64>) -> LiveRunsBuilder {
        splits.sort_unstable();
        splits.dedup();
        LiveRunsBuilder { splits, ..LiveRunsBuilder::default() }
    }

    /// Adds the record `[offset, offset + len)`, below every record pushed before.
    pub fn push(&mut self, offset: u64, len: u32) -> Result<()> {
        if len == 0 || self.runs.last().is_some_and(|last| offset + u64::from(len) > last.start) {
            return Err(StoreError::corrupt(FileKind::Pack, offset, "live records out of order"));
        }
        self.records += 1;
        self.bytes += u64::from(len);
        if let Some(last) = self.runs.last_mut() {
            let joined = u64::from(last.len) + u64::from(len);
            if offset + u64::from(len) == last.start
                && joined <= RUN_CAP
                && self.splits.binary_search(&last.start).is_err()
            {
                last.start = offset;
                last.len = joined as u32; // ≤ RUN_CAP
                last.records += 1;
                return Ok(());
            }
        }
        if self.runs.len() == self.runs.capacity() && self.runs.capacity() >= DOUBLING_LIMIT {
            self.runs.reserve_exact(self.runs.capacity() / 8);
        }
        self.runs.push(Run { start: offset, len, records: 1 });
        Ok(())
    }

    /// The runs, increasing.
    pub fn finish(mut self) -> LiveRuns {
        self.runs.reverse();
        LiveRuns { runs: self.runs, records: self.records, bytes: self.bytes }
    }
}

/// Calls `f` on each record of `bytes` (whole records from global offset `start`) with its offset
/// and bytes; returns their number. The records must tile `bytes` exactly.
pub(crate) fn walk_records(
    start: u64,
    bytes: &[u8],
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<u64> {
    let mut at = 0usize;
    let mut count = 0;
    while at < bytes.len() {
        let offset = start + at as u64;
        let rest = bytes.get(at..).unwrap_or_default();
        let len = codec::record_len(rest, offset)?;
        let record = usize::try_from(len)
            .ok()
            .and_then(|len| rest.get(..len))
            .ok_or_else(|| StoreError::corrupt(FileKind::Pack, offset, "live record past its run"))?;
        f(offset, record)?;
        at += record.len();
        count += 1;
    }
    Ok(count)
}

// The counts and the listing serve diagnostics and tests.
#[cfg_attr(not(any(test, feature = "fault-injection")), allow(dead_code))]
impl LiveRuns {
    /// Number of live records.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Bytes of the live records.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of runs.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }

    /// The runs, increasing: (start, length, records).
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        self.runs.iter().map(|run| (run.start, u64::from(run.len), run.records))
    }
}

impl LiveRuns {
    /// The position of the first run ending after `offset`.
    fn first_after(&self, offset: u64) -> usize {
        self.runs.partition_point(|run| run.end() <= offset)
    }

    /// Live bytes in `[from, to)`: the records starting there when neither bound lies inside a
    /// run (split points, region bounds); the overlap otherwise.
    pub fn bytes_in(&self, from: u64, to: u64) -> u64 {
        self.runs
            .get(self.first_after(from)..)
            .unwrap_or_default()
            .iter()
            .take_while(|run| run.start < to)
            .map(|run| run.end().min(to).saturating_sub(run.start.max(from)))
            .sum()
    }

    /// The run holding `offset`, if any.
    fn holding(&self, offset: u64) -> Option<&Run> {
        self.runs.get(self.first_after(offset)).filter(|run| run.start <= offset)
    }

    /// An error unless `offset` is outside every run or a run's start.
    fn check_cut(&self, offset: u64) -> Result<()> {
        match self.holding(offset) {
            Some(run) if run.start != offset => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a GC boundary inside the live run [{}, {})", run.start, run.end()),
            )),
            _ => Ok(()),
        }
    }

    /// The runs wholly below `offset` (which must not lie inside a run), increasing.
    pub fn runs_below(&self, offset: u64) -> Result<&[Run]> {
        self.check_cut(offset)?;
        let end = self.runs.partition_point(|run| run.start < offset);
        Ok(self.runs.get(..end).unwrap_or_default())
    }

    /// Drops the records below `offset` (which must not lie inside a run) and frees the space.
    pub fn retain_from(&mut self, offset: u64) -> Result<()> {
        self.check_cut(offset)?;
        let first = self.runs.partition_point(|run| run.start < offset);
        for run in self.runs.drain(..first) {
            self.records -= u64::from(run.records);
            self.bytes -= u64::from(run.len);
        }
        self.runs.shrink_to_fit();
        Ok(())
    }

    /// Whether a live record starts at `offset`: a run's start, or a record boundary inside a run,
    /// found by walking the run's framing from its start through `read` (global offset, buffer;
    /// at most [`RUN_CAP`] bytes).
    pub fn contains_start(&self, offset: u64, read: &dyn Fn(u64, &mut [u8]) -> Result<()>) -> Result<bool> {
        let Some(run) = self.holding(offset) else { return Ok(false) };
        if run.start == offset {
            return Ok(true);
        }
        if run.records == 1 {
            return Ok(false);
        }
        let len = (offset + HEAD_LEN).min(run.end()) - run.start;
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        read(run.start, &mut buf)?;
        let mut at = run.start;
        while at < offset {
            let head = buf.get(usize::try_from(at - run.start).unwrap_or(usize::MAX)..).unwrap_or_default();
            let record = codec::record_len(head, at)?;
            at += record;
        }
        if at > run.end() {
            return Err(StoreError::corrupt(FileKind::Pack, run.start, "a live run's records pass its end"));
        }
        Ok(at == offset)
    }

    /// The live records, increasing, as (offset, length): each run read through `read` and its
    /// framing walked (a diagnostic: this is the list the runs avoid holding).
    #[cfg_attr(not(any(test, feature = "fault-injection")), allow(dead_code))]
    pub fn records(&self, read: &dyn Fn(u64, &mut [u8]) -> Result<()>) -> Result<Vec<(u64, u32)>> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for run in &self.runs {
            buf.resize(run.len as usize, 0);
            read(run.start, &mut buf)?;
            let count = walk_records(run.start, &buf, |offset, record| {
                out.push((offset, record.len() as u32));
                Ok(())
            })?;
            if count != u64::from(run.records) {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    run.start,
                    "a live run's record count differs",
                ));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
