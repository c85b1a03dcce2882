//! The mark traversal's reading ahead: the pending offsets it will read next, handed to the
//! system in batches.

use super::{Mark, RecordSource};
use std::collections::BTreeMap;

/// Pending offsets the traversal asks the system for at once, ahead of reading them (see
/// [`ReadAhead`]; 2,048, 4,096 and 16,384 were no faster on a cold store).
const READ_AHEAD_RECORDS: usize = 256;
/// Bytes asked for from each pending offset (records are mostly far shorter; a longer one is read
/// on without advice).
const READ_AHEAD_RECORD_BYTES: u64 = 4096;
/// Pending offsets closer than this are asked for as one range, gap included.
const READ_AHEAD_GAP: u64 = 32 << 10;

/// The traversal's reading ahead. Its reads depend on one another only through the pending set,
/// which holds the offsets it will read next, in decreasing order: on a store larger than the
/// page cache, reading them one at a time waits for the disk at each (the pack's files are read
/// without the kernel's own read-ahead: `docs/store.md` *Reads and the cache*). So the next
/// [`READ_AHEAD_RECORDS`] pending offsets are handed to the system together
/// ([`RecordSource::will_need`]: `POSIX_FADV_WILLNEED`, which starts reading them all), and the
/// next batch once the traversal is halfway through one. Not asked for: children pushed above
/// the last batch's lowest offset (they lie among records just asked for), and the bases a
/// patch's decoding reads down its chain, one after the other.
#[derive(Debug)]
pub(super) struct ReadAhead {
    /// Every pending offset at or above this was asked for.
    asked_down_to: u64,
    /// The next batch is asked for once the traversal reads below this.
    refill_below: u64,
}

impl ReadAhead {
    pub(super) fn new() -> ReadAhead {
        ReadAhead { asked_down_to: u64::MAX, refill_below: u64::MAX }
    }

    /// Called with the offset about to be read (above every pending one): asks for the next
    /// batch if it is time.
    pub(super) fn advance<S: RecordSource>(
        &mut self,
        source: &S,
        pending: &BTreeMap<u64, Mark>,
        reading: u64,
    ) {
        if reading >= self.refill_below {
            return;
        }
        let mut range: Option<(u64, u64)> = None; // [low, high), gathered downwards.
        let mut count = 0usize;
        let below = self.asked_down_to.min(reading);
        for &offset in pending.range(..below).rev().map(|(offset, _)| offset).take(READ_AHEAD_RECORDS) {
            count += 1;
            if count == READ_AHEAD_RECORDS / 2 {
                self.refill_below = offset;
            }
            self.asked_down_to = offset;
            range = match range {
                Some((low, high)) if low - offset <= READ_AHEAD_GAP => Some((offset, high)),
                Some((low, high)) => {
                    source.will_need(low, high - low);
                    Some((offset, offset + READ_AHEAD_RECORD_BYTES))
                }
                None => Some((offset, offset + READ_AHEAD_RECORD_BYTES)),
            };
        }
        if let Some((low, high)) = range {
            source.will_need(low, high - low);
        }
        if count < READ_AHEAD_RECORDS / 2 {
            // Nearly all pending offsets are asked for: the next batch at the first read below
            // them (children pushed since may lie there).
            self.refill_below = self.asked_down_to;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Result, StoreError};
    use crate::format::codec::RecordKind;
    use std::cell::RefCell;

    /// A source that only records what it is told will be needed.
    #[derive(Default)]
    struct Advised(RefCell<Vec<(u64, u64)>>);

    impl RecordSource for Advised {
        fn end(&self) -> u64 {
            u64::MAX
        }
        fn read_raw(&self, offset: u64, _: &mut [u8]) -> Result<()> {
            Err(StoreError::Unmapped { offset })
        }
        fn with_record<T>(
            &self,
            offset: u64,
            _: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
        ) -> Result<(T, u64)> {
            Err(StoreError::Unmapped { offset })
        }
        fn will_need(&self, offset: u64, len: u64) {
            self.0.borrow_mut().push((offset, len));
        }
    }

    fn pending(offsets: impl IntoIterator<Item = u64>) -> BTreeMap<u64, Mark> {
        offsets.into_iter().map(|offset| (offset, Mark::Full)).collect()
    }

    #[test]
    fn the_next_pending_offsets_are_asked_for_in_batches_from_the_top() {
        // 1,000 records 1 MiB apart: one range each, the largest first.
        let mut set = pending((0..1000u64).map(|i| 16 + (i << 20)));
        let source = Advised::default();
        let mut ahead = ReadAhead::new();
        let mut read = 0;
        while let Some((offset, _)) = set.pop_last() {
            ahead.advance(&source, &set, offset);
            let asked = source.0.borrow().len();
            // Whatever is read next was asked for (all but the very first read).
            if let Some((next, _)) = set.last_key_value() {
                assert!(
                    source.0.borrow().iter().any(|&(at, len)| at <= *next && *next < at + len),
                    "offset {next} (read {read}) not asked for; {asked} ranges asked"
                );
            }
            read += 1;
        }
        let asked = source.0.borrow();
        assert_eq!(asked.len(), 999, "each offset below the first asked for once");
        assert!(asked.iter().all(|&(_, len)| len == READ_AHEAD_RECORD_BYTES));
        assert!(asked.windows(2).all(|pair| pair[1].0 < pair[0].0), "asked for in decreasing order");
        // The first batch: the READ_AHEAD_RECORDS offsets below the first one read.
        let first_batch: Vec<u64> = asked.iter().take(READ_AHEAD_RECORDS).map(|&(at, _)| at).collect();
        assert_eq!(first_batch.first(), Some(&(16 + (998 << 20))));
        assert_eq!(first_batch.last(), Some(&(16 + ((998 - READ_AHEAD_RECORDS as u64 + 1) << 20))));
    }

    #[test]
    fn close_offsets_are_asked_for_as_one_range() {
        // 256 records 100 bytes apart below the one being read: one range from the lowest to
        // the highest's page.
        let set = pending((0..256u64).map(|i| 1_000 + 100 * i));
        let source = Advised::default();
        ReadAhead::new().advance(&source, &set, 1 << 30);
        assert_eq!(*source.0.borrow(), vec![(1_000, 25_500 + READ_AHEAD_RECORD_BYTES)]);
        // A gap wider than READ_AHEAD_GAP splits them.
        let set = pending([100, 200, 200 + READ_AHEAD_GAP + 1]);
        let source = Advised::default();
        ReadAhead::new().advance(&source, &set, 1 << 30);
        assert_eq!(
            *source.0.borrow(),
            vec![(200 + READ_AHEAD_GAP + 1, READ_AHEAD_RECORD_BYTES), (100, 100 + READ_AHEAD_RECORD_BYTES)]
        );
    }
}
