//! The traversal's reads of dense pending records in blocks ([`Block`]).

use super::{Mark, RecordSource};
use std::collections::BTreeMap;

/// The traversal reads the pending records below one in blocks of at most this many bytes...
const BLOCK_SPAN: u64 = 64 << 10;
/// ... when at least this many of them lie within it (fewer: each record is read alone) ...
const BLOCK_MIN_RECORDS: usize = 4;
/// ... and at most this many (a block ends at the last of them) ...
const BLOCK_MAX_RECORDS: usize = 64;
/// ... plus this many bytes from the start of the record being read (a longer record is read
/// again, alone).
const BLOCK_TAIL: u64 = 4096;

/// The pack's bytes `[start, start + bytes.len())`, read at once for the dense pending records
/// among them: one read call for up to [`BLOCK_MAX_RECORDS`] records instead of one each (the
/// records are checked as when read alone, `PackReader::with_record_from`).
#[derive(Debug, Default)]
pub(super) struct Block {
    start: u64,
    bytes: Vec<u8>,
    /// A block read that failed reached down to here: the records above it are read alone.
    failed_down_to: Option<u64>,
}

impl Block {
    /// The bytes from `offset` on, if the block holds `offset`.
    pub(super) fn bytes_at(&self, offset: u64) -> Option<&[u8]> {
        let at = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(at..).filter(|rest| !rest.is_empty())
    }

    /// Reads the block for the record at `offset` (above every pending one), or empties it when
    /// too few pending records lie below within [`BLOCK_SPAN`] (or the read fails: each record
    /// is then read, and any problem reported, alone).
    pub(super) fn fill<S: RecordSource>(&mut self, source: &S, pending: &BTreeMap<u64, Mark>, offset: u64) {
        self.bytes.clear();
        if self.failed_down_to.is_some_and(|low| offset >= low) {
            return;
        }
        let below = pending.range(offset.saturating_sub(BLOCK_SPAN)..offset).rev().take(BLOCK_MAX_RECORDS);
        let (count, lowest) = below.fold((0, offset), |(count, _), (at, _)| (count + 1, *at));
        if count < BLOCK_MIN_RECORDS {
            return;
        }
        let end = offset.saturating_add(BLOCK_TAIL).min(source.end());
        let Ok(len) = usize::try_from(end.saturating_sub(lowest)) else { return };
        self.bytes.resize(len, 0);
        if source.read_raw(lowest, &mut self.bytes).is_err() {
            self.bytes.clear();
            self.failed_down_to = Some(lowest);
            return;
        }
        self.start = lowest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Result, StoreError};
    use crate::format::codec::RecordKind;

    /// A pack of `len` bytes, each the low byte of its offset, that fails reads past `fail_from`.
    struct Bytes {
        len: u64,
        fail_from: u64,
    }

    impl RecordSource for Bytes {
        fn end(&self) -> u64 {
            self.len
        }
        fn read_raw(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            if offset + buf.len() as u64 > self.fail_from.min(self.len) {
                return Err(StoreError::Unmapped { offset });
            }
            for (i, byte) in buf.iter_mut().enumerate() {
                *byte = (offset + i as u64) as u8;
            }
            Ok(())
        }
        fn with_record<T>(
            &self,
            offset: u64,
            _: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
        ) -> Result<(T, u64)> {
            Err(StoreError::Unmapped { offset })
        }
    }

    fn pending(offsets: impl IntoIterator<Item = u64>) -> BTreeMap<u64, Mark> {
        offsets.into_iter().map(|offset| (offset, Mark::Full)).collect()
    }

    #[test]
    fn dense_pending_records_are_read_in_one_block_sparse_ones_alone() {
        let source = Bytes { len: 1 << 20, fail_from: u64::MAX };
        let mut block = Block::default();
        // 100 records 200 bytes apart below 100,000: the block reaches down to the 64th.
        let dense = pending((1..=100u64).map(|i| 100_000 - 200 * i));
        block.fill(&source, &dense, 100_000);
        let lowest = 100_000 - 200 * BLOCK_MAX_RECORDS as u64;
        assert_eq!(block.start, lowest);
        assert_eq!(block.bytes.len() as u64, 100_000 + BLOCK_TAIL - lowest);
        let at = block.bytes_at(100_000 - 200).expect("a pending record in the block");
        assert_eq!(at.first(), Some(&((100_000u64 - 200) as u8)), "the pack's bytes at that offset");
        assert!(block.bytes_at(lowest - 1).is_none() && block.bytes_at(100_000 + BLOCK_TAIL).is_none());
        // Three records below within the span: each is read alone; four (the lowest exactly
        // BLOCK_SPAN below): one block.
        let span_low = 100_000 - BLOCK_SPAN;
        block.fill(&source, &pending([99_000, 98_000, 97_000, span_low - 1]), 100_000);
        assert!(block.bytes_at(99_000).is_none());
        block.fill(&source, &pending([99_000, 98_000, 97_000, span_low]), 100_000);
        assert_eq!(block.start, span_low);
        assert!(block.bytes_at(99_000).is_some());
        // A read that fails leaves the block empty (the records are then read alone), and is not
        // tried again above where it reached down to.
        let failing = Bytes { len: 1 << 20, fail_from: 100_000 };
        block.fill(&failing, &dense, 100_000);
        assert!(block.bytes_at(100_000 - 200).is_none());
        block.fill(&source, &dense, 100_000 - 200);
        assert!(block.bytes_at(100_000 - 400).is_none(), "tried again inside the failed block");
        let mut block = Block::default();
        // Near the published end, the block stops there.
        let short = Bytes { len: 100_100, fail_from: u64::MAX };
        block.fill(&short, &dense, 100_000);
        assert_eq!(block.start + block.bytes.len() as u64, 100_100);
    }
}
