//! Reading ahead for a sweep that reads records from the pack's end down (the GC's mark): the
//! pending offsets it will read next, handed to the system in batches.

/// Pending offsets asked for at once, ahead of reading them (see [`ReadAhead`]; 2,048, 4,096 and
/// 16,384 marked a cold store no faster).
const READ_AHEAD_RECORDS: usize = 256;
/// Bytes asked for from each pending offset (records are mostly far shorter; a longer one is read
/// on without advice).
const READ_AHEAD_RECORD_BYTES: u64 = 4096;
/// Offsets at most this far apart are asked for as one range, gap included.
const READ_AHEAD_GAP: u64 = 32 << 10;

/// A descending sweep's reading ahead. The GC's mark reads records from a set of pending offsets,
/// the highest first, and pushes the ones they point to (always lower): its reads depend on one
/// another only through that set, which holds the offsets it will read next. On a store larger
/// than the page cache, reading them one at a time waits for the disk at each (the pack's files
/// are read without the kernel's own read-ahead: `docs/store.md` *Reads and the cache*). So the
/// next [`READ_AHEAD_RECORDS`] pending offsets are handed to the system together
/// (`Layout::will_need`: `POSIX_FADV_WILLNEED`, which starts reading them all), and the next batch
/// once the sweep is halfway through one. Not asked for: offsets pushed above the last batch's
/// lowest one (they lie among records just asked for), and what the sweep reads besides its
/// pending records (the bases down a patch's chain; the mark stages those of the window's patches
/// level by level with [`ask_for_all`]). fsck sweeps the same way, but a cold fsck of
/// the 10x rung spends its time on the CPU: reading ahead there measured no faster (24.4–29.3 s
/// against 24.8–25.7 s).
#[derive(Debug)]
pub(crate) struct ReadAhead {
    /// Every pending offset at or above this was asked for.
    asked_down_to: u64,
    /// The next batch is asked for once the traversal reads below this.
    refill_below: u64,
}

impl ReadAhead {
    /// Nothing asked for yet.
    pub(crate) fn new() -> ReadAhead {
        ReadAhead { asked_down_to: u64::MAX, refill_below: u64::MAX }
    }

    /// Called with the offset about to be read (above every pending one): when it is time, asks
    /// (`ask(offset, len)`) for the next batch of `pending_below(bound)`, the pending offsets
    /// below `bound` in decreasing order.
    pub(crate) fn advance<I: Iterator<Item = u64>>(
        &mut self,
        reading: u64,
        pending_below: impl FnOnce(u64) -> I,
        mut ask: impl FnMut(u64, u64),
    ) {
        if reading >= self.refill_below {
            return;
        }
        let below = self.asked_down_to.min(reading);
        let mut count = 0usize;
        let (asked_down_to, refill_below) = (&mut self.asked_down_to, &mut self.refill_below);
        let batch = pending_below(below).take(READ_AHEAD_RECORDS).inspect(|&offset| {
            count += 1;
            if count == READ_AHEAD_RECORDS / 2 {
                *refill_below = offset;
            }
            *asked_down_to = offset;
        });
        ask_for_all(batch, &mut ask);
        if count < READ_AHEAD_RECORDS / 2 {
            // Nearly all pending offsets are asked for: the next batch at the first read below
            // them (children pushed since may lie there).
            self.refill_below = self.asked_down_to;
        }
    }
}

/// Asks (`ask(offset, len)`) for the records at `offsets`, in decreasing order: the first
/// [`READ_AHEAD_RECORD_BYTES`] of each, offsets at most [`READ_AHEAD_GAP`] apart as one range.
pub(crate) fn ask_for_all(offsets: impl Iterator<Item = u64>, mut ask: impl FnMut(u64, u64)) {
    let mut range: Option<(u64, u64)> = None; // [low, high), gathered downwards.
    for offset in offsets {
        range = match range {
            Some((low, high)) if low.saturating_sub(offset) <= READ_AHEAD_GAP => {
                Some((offset.min(low), high))
            }
            Some((low, high)) => {
                ask(low, high - low);
                Some((offset, offset.saturating_add(READ_AHEAD_RECORD_BYTES)))
            }
            None => Some((offset, offset.saturating_add(READ_AHEAD_RECORD_BYTES))),
        };
    }
    if let Some((low, high)) = range {
        ask(low, high - low);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Runs `advance` over `pending` as a sweep about to read `reading`; returns what it asked for.
    fn advance(ahead: &mut ReadAhead, pending: &BTreeSet<u64>, reading: u64) -> Vec<(u64, u64)> {
        let mut asked = Vec::new();
        ahead.advance(
            reading,
            |below| pending.range(..below).rev().copied(),
            |at, len| asked.push((at, len)),
        );
        asked
    }

    #[test]
    fn the_next_pending_offsets_are_asked_for_in_batches_from_the_top() {
        // 1,000 records 1 MiB apart: one range each, the largest first.
        let mut pending: BTreeSet<u64> = (0..1000u64).map(|i| 16 + (i << 20)).collect();
        let mut ahead = ReadAhead::new();
        let mut asked: Vec<(u64, u64)> = Vec::new();
        let mut read = 0;
        while let Some(offset) = pending.pop_last() {
            asked.extend(advance(&mut ahead, &pending, offset));
            // Whatever is read next was asked for.
            if let Some(next) = pending.last() {
                assert!(
                    asked.iter().any(|&(at, len)| at <= *next && *next < at + len),
                    "offset {next} (read {read}) not asked for; {} ranges asked",
                    asked.len()
                );
            }
            read += 1;
        }
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
        let pending: BTreeSet<u64> = (0..256u64).map(|i| 1_000 + 100 * i).collect();
        let asked = advance(&mut ReadAhead::new(), &pending, 1 << 30);
        assert_eq!(asked, vec![(1_000, 25_500 + READ_AHEAD_RECORD_BYTES)]);
        // A gap wider than READ_AHEAD_GAP splits them.
        let pending: BTreeSet<u64> = [100, 200, 200 + READ_AHEAD_GAP + 1].into();
        let asked = advance(&mut ReadAhead::new(), &pending, 1 << 30);
        assert_eq!(
            asked,
            vec![(200 + READ_AHEAD_GAP + 1, READ_AHEAD_RECORD_BYTES), (100, 100 + READ_AHEAD_RECORD_BYTES)]
        );
    }
}
