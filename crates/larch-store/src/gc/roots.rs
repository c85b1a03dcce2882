//! Root summaries of the window, kept from one GC to the next (docs/gc-design.md §4, *Roots*).
//!
//! A GC keeping the commit at `K` takes its roots from every record of the window `[K, scan_end)`:
//! their pointers below `K`, and for a patch whose base lies below `K` its base (as base-only) and
//! its decoded children (as full). Consecutive GCs of a rolling node read mostly the same records
//! (a GC every 256 blocks keeping 1,280 rereads four fifths of the previous window), so the mark
//! keeps, for each span of records it read, what the span contributes to the roots of *any* GC
//! whose commit lies at or below the span's start: the records' own pointers below the start, and
//! the patches whose base lies below the start, with that base. A later GC with `K' ≤ start`
//! pushes the pointers through its own filter (below `K'`, at or above its floor) and decodes the
//! listed patches whose base lies below `K'`: the same pending set a read of the span's records
//! gives. Records are immutable and never move, so a span stays true for as long as its records
//! exist, that is until a GC's commit passes its start (it is then dropped).

use std::collections::BTreeMap;
use std::sync::Arc;

/// The span size the window is read in when no summaries are kept, and a good
/// [`crate::GcPolicy::root_span_bytes`]. Spans end at the first record boundary at or after a
/// multiple of the span size (or at the scanned end), so that the spans of consecutive GCs line
/// up.
pub(crate) const SPAN_BYTES: u64 = 8 << 20;

/// At most this many bytes of packed offsets are kept over all spans: beyond it the oldest spans
/// are dropped (a later GC reads their records again).
pub(crate) const MAX_KEPT_BYTES: usize = 8 << 20;

/// What the records of `[start, end)` contribute to the roots of a GC whose commit offset is at
/// or below `start`.
#[derive(Debug, Default)]
pub(crate) struct RootSpan {
    /// The end of the span's last record.
    pub(crate) end: u64,
    /// The records' own pointers below the start (patches' included: their changes).
    pub(crate) pointers: PackedOffsets,
    /// The patches whose base lies below the start, with their base: a GC whose commit is above
    /// the base pushes the base as base-only and the patch's decoded children as full.
    pub(crate) patches: PackedPairs,
    /// Records in the span.
    pub(crate) records: u64,
}

impl RootSpan {
    fn heap_bytes(&self) -> usize {
        self.pointers.bytes.len() + self.patches.bytes.len()
    }
}

/// Appends `value` as LEB128.
fn put_leb(bytes: &mut Vec<u8>, value: u64) {
    larch_varint::encode(bytes, value);
}

/// The LEB128 value at `*at`, advancing it; `None` at the end or on bytes that are not one (the
/// bytes were written by [`put_leb`]).
fn get_leb(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let (value, len) = larch_varint::decode(bytes.get(*at..)?).ok()?;
    *at += len;
    Some(value)
}

/// Calls `f` with the delta of each offset from the one before (the first from 0), `offsets` given
/// in non-decreasing order, repetitions skipped.
fn for_each_delta(offsets: impl Iterator<Item = u64>, mut f: impl FnMut(u64)) {
    let mut previous = None;
    for offset in offsets {
        if previous == Some(offset) {
            continue;
        }
        debug_assert!(previous.is_none_or(|previous| offset > previous), "offsets out of order");
        f(offset.wrapping_sub(previous.unwrap_or(0)));
        previous = Some(offset);
    }
}

/// Distinct offsets, increasing, stored as LEB128 deltas (about 2 bytes each in a window's
/// spans, against 8).
#[derive(Debug, Default)]
pub(crate) struct PackedOffsets {
    bytes: Vec<u8>,
}

impl PackedOffsets {
    /// Packs `offsets` (sorted and deduplicated here).
    pub(crate) fn new(offsets: &mut [u64]) -> PackedOffsets {
        offsets.sort_unstable();
        PackedOffsets::from_sorted_exact(|| offsets.iter().copied()).0
    }

    /// Packs the offsets `offsets()` yields (non-decreasing, repetitions dropped) into one
    /// allocation of the exact size, counted by a first pass: a growing vector would hold up to
    /// three times the set while it doubles, then copy it again to shrink (a GC's late roots,
    /// merged while the writer runs, reach tens of megabytes). Returns the set and its count.
    pub(crate) fn from_sorted_exact<I: Iterator<Item = u64>>(
        offsets: impl Fn() -> I,
    ) -> (PackedOffsets, usize) {
        let (mut len, mut count) = (0, 0);
        for_each_delta(offsets(), |delta| {
            len += larch_varint::encoded_len(delta);
            count += 1;
        });
        let mut bytes = Vec::with_capacity(len);
        for_each_delta(offsets(), |delta| put_leb(&mut bytes, delta));
        debug_assert_eq!(bytes.len(), len, "offsets() yielded another sequence the second time");
        (PackedOffsets { bytes }, count)
    }

    /// The delta stored at byte `at` and the byte after it; `None` at the end.
    pub(crate) fn delta_at(&self, at: usize) -> Option<(u64, usize)> {
        let mut at = at;
        let delta = get_leb(&self.bytes, &mut at)?;
        Some((delta, at))
    }

    /// The bytes of the packed offsets.
    pub(crate) fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes the packed offsets take.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// The offsets, increasing.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (mut at, mut current) = (0, 0u64);
        std::iter::from_fn(move || {
            current = current.wrapping_add(get_leb(&self.bytes, &mut at)?);
            Some(current)
        })
    }
}

/// Pairs `(patch, base)` with `base < patch`, pushed in increasing `patch` order, stored as
/// LEB128 deltas (the patch from the previous one, the base back from its patch).
#[derive(Debug, Default)]
pub(crate) struct PackedPairs {
    bytes: Vec<u8>,
    last: u64,
}

impl PackedPairs {
    /// Adds a pair (`patch` above the previous one's, `base` below `patch`: else ignored).
    pub(crate) fn push(&mut self, patch: u64, base: u64) {
        if patch < self.last || base >= patch {
            return;
        }
        put_leb(&mut self.bytes, patch - self.last);
        put_leb(&mut self.bytes, patch - base);
        self.last = patch;
    }

    /// The pairs, in the order pushed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let (mut at, mut patch) = (0, 0u64);
        std::iter::from_fn(move || {
            patch = patch.wrapping_add(get_leb(&self.bytes, &mut at)?);
            let back = get_leb(&self.bytes, &mut at)?;
            Some((patch, patch.wrapping_sub(back)))
        })
    }

    /// Frees the spare capacity once complete.
    pub(crate) fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
    }
}

/// The spans of earlier scans, by start offset; disjoint.
#[derive(Debug)]
pub(crate) struct RootSpans {
    spans: BTreeMap<u64, Arc<RootSpan>>,
    /// Spans end at the first record boundary at or after a multiple of this (0: no summaries).
    span_bytes: u64,
}

impl Default for RootSpans {
    fn default() -> RootSpans {
        RootSpans::new(SPAN_BYTES)
    }
}

impl RootSpans {
    /// No spans yet; later spans aligned on multiples of `span_bytes` (0: none kept).
    pub(crate) fn new(span_bytes: u64) -> RootSpans {
        RootSpans { spans: BTreeMap::new(), span_bytes }
    }

    /// The span size these spans were made with.
    pub(crate) fn span_bytes(&self) -> u64 {
        self.span_bytes
    }

    /// The span starting exactly at `start` and ending at or before `end`, if kept.
    pub(crate) fn at(&self, start: u64, end: u64) -> Option<Arc<RootSpan>> {
        self.spans.get(&start).filter(|span| span.end <= end).cloned()
    }

    /// The start of the first kept span after `offset`, if any.
    pub(crate) fn next_start(&self, offset: u64) -> Option<u64> {
        self.spans.range(offset.saturating_add(1)..).next().map(|(start, _)| *start)
    }

    /// Keeps `span` (replacing any span it overlaps: they were scanned from the same records).
    pub(crate) fn insert(&mut self, start: u64, span: Arc<RootSpan>) {
        let overlapping: Vec<u64> = self
            .spans
            .range(..span.end)
            .filter(|(other_start, other)| other.end > start && **other_start < span.end)
            .map(|(other_start, _)| *other_start)
            .collect();
        for other in overlapping {
            self.spans.remove(&other);
        }
        self.spans.insert(start, span);
    }

    /// Drops the spans no later GC can use (starting below `keep_from`, the newest GC's commit:
    /// later GCs keep from there or above), then the oldest ones beyond [`MAX_KEPT_BYTES`].
    pub(crate) fn prune(&mut self, keep_from: u64) {
        self.spans = self.spans.split_off(&keep_from);
        let mut total = self.heap_bytes();
        while total > MAX_KEPT_BYTES {
            let Some((_, oldest)) = self.spans.pop_first() else { break };
            total -= oldest.heap_bytes();
        }
    }

    /// Bytes of packed offsets kept over all spans.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.spans.values().map(|span| span.heap_bytes()).sum()
    }

    /// The spans kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Offsets and pairs kept over all spans.
    #[cfg(test)]
    pub(crate) fn kept_offsets(&self) -> usize {
        self.spans.values().map(|span| span.pointers.iter().count() + span.patches.iter().count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(end: u64, pointers: &[u64]) -> Arc<RootSpan> {
        let pointers = PackedOffsets::new(&mut pointers.to_vec());
        Arc::new(RootSpan { end, pointers, patches: PackedPairs::default(), records: 1 })
    }

    #[test]
    fn spans_are_found_by_start_replaced_when_overlapping_and_pruned_below_keep_from() {
        let mut spans = RootSpans::default();
        spans.insert(100, span(200, &[1, 2]));
        spans.insert(200, span(300, &[3]));
        spans.insert(300, span(400, &[4]));
        assert!(spans.at(100, 200).is_some());
        assert!(spans.at(100, 199).is_none(), "a span past the scanned end is not used");
        assert!(spans.at(150, 400).is_none());
        assert_eq!(spans.next_start(100), Some(200));
        assert_eq!(spans.next_start(300), None);
        // A rescan of [150, 250) replaces both spans it overlaps.
        spans.insert(150, span(250, &[5]));
        assert_eq!(spans.len(), 2);
        assert!(spans.at(100, 400).is_none() && spans.at(200, 400).is_none());
        assert!(spans.at(150, 400).is_some() && spans.at(300, 400).is_some());
        spans.prune(200);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans.kept_offsets(), 1);
    }

    #[test]
    fn packed_offsets_come_back_sorted_and_distinct() {
        let mut offsets = vec![5, 1, 5, 3, u64::MAX, 1 << 40, 0, 1 << 40];
        let packed = PackedOffsets::new(&mut offsets);
        assert_eq!(packed.iter().collect::<Vec<_>>(), vec![0, 1, 3, 5, 1 << 40, u64::MAX]);
        assert_eq!(PackedOffsets::new(&mut []).iter().count(), 0);
    }

    #[test]
    fn an_exact_packing_takes_one_allocation_of_its_size() {
        let mut offsets: Vec<u64> = (0..10_000u64).map(|i| i * i % 7_919 * 1_000 + i).collect();
        offsets.extend([0, u64::MAX, 1 << 40]);
        offsets.sort_unstable();
        // The same bytes as packing each delta into a growing vector.
        let mut grown = Vec::new();
        let mut previous = None;
        for &offset in &offsets {
            if previous != Some(offset) {
                put_leb(&mut grown, offset - previous.unwrap_or(0));
                previous = Some(offset);
            }
        }
        let (exact, count) = PackedOffsets::from_sorted_exact(|| offsets.iter().copied());
        assert_eq!(exact.bytes, grown);
        assert_eq!(exact.bytes.capacity(), exact.bytes.len());
        offsets.dedup();
        assert_eq!(count, offsets.len());
        assert_eq!(exact.iter().collect::<Vec<_>>(), offsets);
        let (empty, none) = PackedOffsets::from_sorted_exact(std::iter::empty);
        assert_eq!((empty.len_bytes(), none), (0, 0));
    }

    #[test]
    fn packed_pairs_come_back_in_order() {
        let mut pairs = PackedPairs::default();
        for (patch, base) in [(10, 3), (11, 0), (1 << 40, 5), (u64::MAX, 1 << 40)] {
            pairs.push(patch, base);
        }
        pairs.push(20, 1); // below the last patch: ignored
        pairs.push(u64::MAX, u64::MAX); // a base not below its patch: ignored
        assert_eq!(
            pairs.iter().collect::<Vec<_>>(),
            vec![(10, 3), (11, 0), (1 << 40, 5), (u64::MAX, 1 << 40)]
        );
    }
}
