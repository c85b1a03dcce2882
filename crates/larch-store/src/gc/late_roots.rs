//! The late roots of a running GC (docs/gc-design.md §4, *Roots*): the targets below its commit
//! of the pointers the writer writes to existing records while it runs, each to be checked
//! against the mark before the switch.
//!
//! A regular block rewrites a few paths, and each rewritten directory points again to its
//! unchanged entries: on a large store whose GC runs through hundreds of blocks, tens of millions
//! of such pointers accumulate, most of them to the same records. So the set keeps them sorted,
//! deduplicated and packed as LEB128 deltas ([`PackedOffsets`], 1–3 bytes a root instead of 8 a
//! pointer), merging the batch appended since once it grows past a share of the packed set.

use crate::gc::roots::PackedOffsets;

/// The batch is merged into the packed set once its offsets take this many bytes, or as many as
/// the packed set if more (so that it never outweighs the set by much, and each offset is
/// re-packed a bounded number of times). Small in unit tests, so that they merge often.
const MIN_BATCH_BYTES: usize = if cfg!(test) { 1 << 10 } else { 1 << 19 };

/// Distinct offsets, appended in any order, read back increasing.
#[derive(Debug, Default)]
pub(crate) struct LateRoots {
    /// Every offset merged so far, increasing and distinct.
    packed: PackedOffsets,
    /// How many offsets `packed` holds.
    packed_count: usize,
    /// Offsets appended since the last merge, in any order.
    batch: Vec<u64>,
}

impl LateRoots {
    /// Adds `roots` (any order, repetitions allowed: a commit's are best sorted and deduplicated
    /// by the caller, outside the lock this set is shared under). The vector is taken, not copied,
    /// when it is larger than the batch: a commit that rewrites a large directory while a GC runs
    /// (a burst of 16,000 accounts in a 10 M-entry directory) hands over hundreds of thousands of
    /// roots, which would otherwise be held twice.
    pub(crate) fn extend(&mut self, mut roots: Vec<u64>) {
        if roots.len() > self.batch.len() {
            std::mem::swap(&mut self.batch, &mut roots);
        }
        self.batch.append(&mut roots);
        drop(roots);
        if self.batch.len() * std::mem::size_of::<u64>() >= MIN_BATCH_BYTES.max(self.packed.len_bytes()) {
            self.merge();
        }
    }

    /// Merges the batch into the packed set. The batch is cleared only once the new set is
    /// built: a panic meanwhile (under the lock) leaves both as they were.
    fn merge(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.batch.sort_unstable();
        self.batch.dedup();
        let (merged, count) = PackedOffsets::from_sorted_exact(|| MergeSorted {
            a: self.packed.iter().peekable(),
            b: self.batch.iter().copied().peekable(),
        });
        self.packed = merged;
        self.packed_count = count;
        self.batch = Vec::new();
    }

    /// The distinct roots, increasing, without those below `floor`.
    pub(crate) fn sorted_from(mut self, floor: u64) -> impl Iterator<Item = u64> {
        self.merge();
        OwnedIter { packed: self.packed, at: 0, current: 0 }.filter(move |root| *root >= floor)
    }

    /// Whether no root was added since the set was created or drained.
    pub(crate) fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.packed_count == 0
    }

    /// The heap bytes the set takes (packed set and batch).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.packed.heap_bytes() + self.batch.capacity() * std::mem::size_of::<u64>()
    }
}

/// Two increasing, distinct sequences merged into one (a value in both yielded once).
struct MergeSorted<A: Iterator<Item = u64>, B: Iterator<Item = u64>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = u64>, B: Iterator<Item = u64>> Iterator for MergeSorted<A, B> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match (self.a.peek().copied(), self.b.peek().copied()) {
            (Some(a), Some(b)) if a == b => {
                self.b.next();
                self.a.next()
            }
            (Some(a), Some(b)) if a < b => self.a.next(),
            (Some(_), Some(_)) | (None, _) => self.b.next(),
            (Some(_), None) => self.a.next(),
        }
    }
}

/// [`PackedOffsets::iter`] owning its set.
struct OwnedIter {
    packed: PackedOffsets,
    at: usize,
    current: u64,
}

impl Iterator for OwnedIter {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let (value, at) = self.packed.delta_at(self.at)?;
        self.at = at;
        self.current = self.current.wrapping_add(value);
        Some(self.current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larch_testkit::seeded_rng;
    use rand::Rng;

    #[test]
    fn roots_come_back_sorted_distinct_and_from_the_floor() {
        let (mut rng, seed) = seeded_rng("late_roots", 0);
        let mut roots = LateRoots::default();
        let mut expected = std::collections::BTreeSet::new();
        // Enough batches to merge many times, with repetitions across batches.
        for _ in 0..40 {
            let batch: Vec<u64> = (0..10_000).map(|_| rng.random_range(0..300_000u64) * 7).collect();
            expected.extend(batch.iter().copied());
            roots.extend(batch);
        }
        assert!(!roots.is_empty());
        // Packed, the set takes far less than 8 bytes a pointer appended (400,000 of them).
        assert!(roots.heap_bytes() < 400_000 * 8 / 3, "seed {seed}: {} bytes", roots.heap_bytes());
        let floor = 700_000;
        let got: Vec<u64> = roots.sorted_from(floor).collect();
        let want: Vec<u64> = expected.range(floor..).copied().collect();
        assert_eq!(got, want, "seed {seed}");
    }

    #[test]
    fn an_empty_set_and_a_set_of_one_batch() {
        assert!(LateRoots::default().is_empty());
        assert_eq!(LateRoots::default().sorted_from(0).count(), 0);
        let mut roots = LateRoots::default();
        roots.extend(vec![9, 3, 9, u64::MAX, 0]);
        assert_eq!(roots.sorted_from(1).collect::<Vec<_>>(), vec![3, 9, u64::MAX]);
    }

    #[test]
    fn a_vector_larger_than_the_batch_becomes_the_batch_without_a_copy() {
        let mut roots = LateRoots::default();
        roots.extend(vec![5, 1]);
        // Below the merge threshold, with room for the batch it takes in.
        let count = MIN_BATCH_BYTES / std::mem::size_of::<u64>() / 2;
        let mut large = Vec::with_capacity(count * 2);
        large.extend((0..count as u64).map(|i| i * 3));
        let buffer = large.as_ptr();
        roots.extend(large);
        assert_eq!(roots.batch.as_ptr(), buffer, "the larger vector was copied");
        assert_eq!(roots.batch.len(), count + 2);
        // A smaller one is appended to it.
        roots.extend(vec![4]);
        assert_eq!(roots.batch.as_ptr(), buffer);
        let mut want: Vec<u64> = (0..count as u64).map(|i| i * 3).chain([5, 1, 4]).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(roots.sorted_from(0).collect::<Vec<_>>(), want);
    }
}
