//! Segment compaction (docs/gc-design.md §6): which old segments a GC marks (its *floor*) and,
//! once the mark has measured their live bytes, which newest ones it merges into its output.
//!
//! Every GC copies the live records of the newly old chunks (the *mandatory* part of its region)
//! into a new segment. Records in older segments die later too (state rewritten by later blocks);
//! a GC reclaims them only by marking through those segments and merging them into its output.
//! Marking reads every live record of the marked segments (the cold state), so a *deep* mark (all
//! segments) is done only now and then; a *shallow* GC marks only the newest segments whose files
//! together are no larger than its newly old chunks (cheap: at most the region's own size again).
//!
//! After the mark, the merged segments are the suffix (newest first, ranges stay contiguous) that
//! reclaims the most garbage among those whose garbage is at least `min_garbage_percent` of their
//! record bytes and whose live bytes, with the mandatory copy, stay within the copy budget (the
//! extra disk of the GC: the new segment exists beside the old files until the switch).

use crate::format::control::MAX_SEGMENTS;

/// Tuning of segment compaction (defaults: [`GcPolicy::default`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcPolicy {
    /// A GC merges old segments only while everything it copies, plus what the writer appended
    /// during the handle's previous GC (the growth to expect while this one runs, which stays
    /// beside the old files until the switch as well), stays within this percentage of the
    /// store's disk at its start: the budget of the GC's extra disk (the newly old chunks' live
    /// records are always copied).
    pub copy_budget_percent: u64,
    /// A suffix of segments is merged only if at least this percentage of its record bytes is
    /// garbage (each byte copied then reclaims at least a quarter of a byte).
    pub min_garbage_percent: u64,
    /// A deep mark happens when the segments' record bytes exceed their live bytes measured at the
    /// last deep mark (or, before any in this process, their bytes after the first GC) by this
    /// percentage.
    pub deep_growth_percent: u64,
    /// A deep mark happens at every GC whose generation is a multiple of this (0: never); unlike
    /// the growth rule it survives reopening the store.
    pub deep_every: u64,
    /// The copy budget of a GC asked to compact ([`GcOptions::compact`]), in percent of the disk.
    pub compact_budget_percent: u64,
    /// A GC whose newly old chunks hold more live bytes than this percentage of the store's disk
    /// at its start copies them in *slices* (docs/gc-design.md §6): each slice copies the live
    /// records of the first chunks that fit, switches, and its chunks are deleted before the next
    /// slice (a GC on the same commit) starts. 0: no slicing.
    pub slice_percent: u64,
    /// Slices are never smaller than this many bytes of copy (small stores are not sliced).
    pub slice_min_bytes: u64,
    /// The GC worker thread's nice value on Linux (default 10: it yields the CPU to the writer and
    /// readers). On a machine whose cores the writer and readers fill, 0 makes each GC about 2.5×
    /// shorter (less disk appended meanwhile: a lower disk peak) at the price of the writer's tail
    /// latency while it runs (docs/benchmarks.md at c117370, "Fourth round"). Values below the process's
    /// own need privileges (`RLIMIT_NICE`); a refused value leaves the priority as it is.
    pub worker_nice: i32,
    /// The first GC of a store keeps its first chunks in place (read as segments from then on,
    /// named by one entry of the control slot) instead of copying their live records, from the
    /// first chunk on while at least this percentage of each is live: copying them would take
    /// more extra disk than it frees (a chain's initial state, the setup blocks, an imported
    /// snapshot). A later deep mark merges them, together, like any old segment once they hold
    /// enough garbage. 0: always copy.
    pub keep_in_place_percent: u64,
    /// While a GC runs, the writer's cache gives up this many bytes of its capacity, plus the
    /// root summaries kept from earlier GCs (at most half of it in all), so that the worker's memory (its live set, pending offsets and buffers: 10–25 MiB
    /// on the default trace) comes out of the store's memory budget instead of adding to it.
    pub cache_reserve_bytes: u64,
    /// When not 0, the mark summarises what each span of the window (records between multiples
    /// of this many bytes; 8 MiB is a good value) points to below it, and the next GC of the
    /// handle takes those roots from the summaries instead of reading the span's records again
    /// (docs/gc-design.md §4, *Roots*): consecutive GCs of a rolling node share most of their
    /// windows. The summaries stay in memory between GCs (at most 8 MiB; about 2 bytes per
    /// offset). Off by default (0: every GC reads its whole window): on the default trace's
    /// 133 MiB window they saved 6% of a GC's CPU but raised the replay's peak RSS by 7–10 MiB,
    /// which its 300 MB budget has no room for; the read they save grows with the window.
    pub root_span_bytes: u64,
}

impl Default for GcPolicy {
    fn default() -> GcPolicy {
        GcPolicy {
            copy_budget_percent: 20,
            min_garbage_percent: 20,
            deep_growth_percent: 25,
            deep_every: 8,
            compact_budget_percent: 25,
            slice_percent: 10,
            slice_min_bytes: 8 << 20,
            worker_nice: 10,
            keep_in_place_percent: 50,
            cache_reserve_bytes: 24 << 20,
            root_span_bytes: 0,
        }
    }
}

/// Options of one garbage collection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Compact the old segments now: mark through all of them and merge the suffix holding the
    /// most garbage (any amount of it) that fits in the policy's `compact_budget_percent`.
    pub compact: bool,
}

/// One old segment as the policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SegmentStat {
    /// Its global range.
    pub(crate) range_start: u64,
    /// End of its range.
    pub(crate) range_end: u64,
    /// Bytes of records it holds.
    pub(crate) record_bytes: u64,
    /// Bytes of its file.
    pub(crate) file_len: u64,
}

/// What the worker decides after the mark, fixed at the GC's start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Compaction {
    /// The segments marked (the newest ones, by increasing range): records below the first's
    /// start are not traversed.
    pub(crate) candidates: Vec<SegmentStat>,
    /// Whether every segment is marked.
    pub(crate) deep: bool,
    /// Most bytes the GC may copy (mandatory part included) when it merges segments.
    pub(crate) budget_bytes: u64,
    /// Minimum garbage of a merged suffix, percent of its record bytes.
    pub(crate) min_garbage_percent: u64,
    /// The segment list is full: at least the newest segment must be merged.
    pub(crate) must_merge: bool,
    /// Most bytes one slice copies from the newly old chunks, with the merged segments' live
    /// bytes (`u64::MAX`: no slicing); at least one chunk is taken when nothing is merged.
    pub(crate) slice_bytes: u64,
    /// [`GcPolicy::keep_in_place_percent`].
    pub(crate) keep_in_place_percent: u64,
}

impl Compaction {
    /// Leaves room in the copy budget for `appended` bytes, what the writer appended during the
    /// previous GC: the writer's growth while this GC runs stays on disk beside the old files
    /// until the switch, like the copy ([`GcPolicy::copy_budget_percent`]). The newly old chunks'
    /// live records are still copied whatever the budget; fewer old segments are merged.
    pub(crate) fn leave_room_for(&mut self, appended: u64) {
        self.budget_bytes = self.budget_bytes.saturating_sub(appended);
    }

    /// Offsets below this are not traversed by the mark.
    pub(crate) fn floor(&self, region_start: u64) -> u64 {
        self.candidates.first().map_or(region_start, |segment| segment.range_start)
    }
}

/// Plans the compaction of a GC whose newly old chunks span `newly_old` bytes, over the store's
/// segments `segments` (increasing ranges), for GC generation `generation`.
pub(crate) fn plan(
    policy: &GcPolicy,
    options: GcOptions,
    segments: &[SegmentStat],
    newly_old: u64,
    generation: u64,
    baseline: Option<u64>,
    disk_before: u64,
) -> Compaction {
    let must_merge = segments.len() >= MAX_SEGMENTS;
    let record_bytes: u64 = segments.iter().map(|segment| segment.record_bytes).sum();
    let grown = baseline.is_some_and(|baseline| {
        u128::from(record_bytes) * 100
            > u128::from(baseline).saturating_mul(100 + u128::from(policy.deep_growth_percent))
    });
    let every = policy.deep_every > 0 && generation.is_multiple_of(policy.deep_every);
    let deep = !segments.is_empty() && (options.compact || grown || every);
    let candidates = if deep {
        segments.to_vec()
    } else {
        // The newest segments whose files together are no larger than the newly old chunks; at
        // least the newest one when the list is full.
        let mut taken = 0;
        let mut bytes = 0u64;
        for segment in segments.iter().rev() {
            bytes = bytes.saturating_add(segment.file_len);
            if bytes > newly_old {
                break;
            }
            taken += 1;
        }
        if must_merge {
            taken = taken.max(1);
        }
        segments.get(segments.len() - taken..).unwrap_or_default().to_vec()
    };
    let percent = if options.compact { policy.compact_budget_percent } else { policy.copy_budget_percent };
    let budget_bytes = u64::try_from(u128::from(disk_before) * u128::from(percent) / 100).unwrap_or(u64::MAX);
    Compaction {
        candidates,
        deep,
        budget_bytes,
        min_garbage_percent: if options.compact { 0 } else { policy.min_garbage_percent },
        must_merge,
        slice_bytes: slice_bytes(policy, disk_before),
        keep_in_place_percent: policy.keep_in_place_percent,
    }
}

/// The slice budget of a GC starting with `disk_before` bytes on disk.
fn slice_bytes(policy: &GcPolicy, disk_before: u64) -> u64 {
    if policy.slice_percent == 0 {
        return u64::MAX;
    }
    let percent = u128::from(disk_before) * u128::from(policy.slice_percent) / 100;
    u64::try_from(percent).unwrap_or(u64::MAX).max(policy.slice_min_bytes)
}

/// Where a slice of the newly old chunks ends: `boundaries` are the chunk starts after
/// `chunks_start` and the region end, increasing; `live_between(a, b)` the live bytes of `[a, b)`;
/// `merged_live` what the merged segments copy. Takes chunks while the copy stays within
/// `slice_bytes`, at least one when nothing is merged (a slice always makes progress), and the
/// whole rest when its live bytes are below half a slice: a slice costs a full mark, which a
/// small rest is not worth (the extra disk grows by less than half a slice).
pub(crate) fn slice_end(
    chunks_start: u64,
    boundaries: &[u64],
    slice_bytes: u64,
    merged_live: u64,
    live_between: impl Fn(u64, u64) -> u64,
) -> u64 {
    let region_end = boundaries.last().copied().unwrap_or(chunks_start);
    let mut end = chunks_start;
    let mut copy = merged_live;
    for &boundary in boundaries {
        if boundary <= end {
            continue;
        }
        let add = live_between(end, boundary);
        let progress = end > chunks_start || merged_live > 0;
        if progress && copy.saturating_add(add) > slice_bytes {
            if live_between(end, region_end) < slice_bytes / 2 {
                return region_end;
            }
            break;
        }
        copy = copy.saturating_add(add);
        end = boundary;
    }
    end
}

/// How many of the newest candidates to merge, given each candidate's live bytes (`live`, same
/// order as `compaction.candidates`) and the live bytes of the newly old chunks (`mandatory`).
pub(crate) fn choose(compaction: &Compaction, live: &[u64], mandatory: u64) -> usize {
    let mut best = 0;
    let mut best_garbage = 0;
    let (mut bytes, mut copied) = (0u64, mandatory);
    for (k, (segment, live)) in compaction.candidates.iter().zip(live).rev().enumerate() {
        bytes += segment.record_bytes;
        copied += live;
        if copied > compaction.budget_bytes {
            // Longer suffixes copy more still.
            break;
        }
        let garbage = bytes.saturating_sub(copied - mandatory);
        if garbage > best_garbage
            && u128::from(garbage) * 100 >= u128::from(bytes) * u128::from(compaction.min_garbage_percent)
        {
            best = k + 1;
            best_garbage = garbage;
        }
    }
    if compaction.must_merge && !compaction.candidates.is_empty() {
        best = best.max(1);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(sizes: &[u64]) -> Vec<SegmentStat> {
        let mut start = 16;
        sizes
            .iter()
            .map(|&size| {
                let segment = SegmentStat {
                    range_start: start,
                    range_end: start + 4 * size,
                    record_bytes: size,
                    file_len: size,
                };
                start += 4 * size;
                segment
            })
            .collect()
    }

    #[test]
    fn shallow_marks_the_small_newest_segments_only() {
        let policy = GcPolicy { deep_every: 0, ..GcPolicy::default() };
        let list = segments(&[1000, 50, 30]);
        let plan = plan(&policy, GcOptions::default(), &list, 100, 3, None, 10_000);
        assert!(!plan.deep);
        assert_eq!(plan.candidates, list[1..].to_vec());
        assert_eq!(plan.floor(99), list[1].range_start);
        let none = super::plan(&policy, GcOptions::default(), &list, 10, 3, None, 10_000);
        assert!(none.candidates.is_empty());
        assert_eq!(none.floor(99), 99);
    }

    #[test]
    fn deep_on_request_growth_generation_or_full_list() {
        let policy = GcPolicy::default();
        let list = segments(&[1000, 50, 30]);
        let compact = plan(&policy, GcOptions { compact: true }, &list, 0, 3, None, 10_000);
        assert!(compact.deep && compact.candidates.len() == 3 && compact.min_garbage_percent == 0);
        assert_eq!(compact.budget_bytes, 2_500);
        assert!(plan(&policy, GcOptions::default(), &list, 0, 3, Some(800), 10_000).deep);
        assert!(!plan(&policy, GcOptions::default(), &list, 0, 3, Some(900), 10_000).deep);
        assert!(plan(&policy, GcOptions::default(), &list, 0, 8, Some(900), 10_000).deep);
        let full = segments(&[10; MAX_SEGMENTS]);
        let forced = plan(&policy, GcOptions::default(), &full, 0, 3, None, 10_000);
        assert!(forced.must_merge && !forced.deep && forced.candidates.len() == 1);
    }

    #[test]
    fn slices_take_the_chunks_that_fit_and_always_progress() {
        // Chunks [0, 10), [10, 20), [20, 30), [30, 40) with 6, 5, 1 and 9 live bytes.
        let live = |from: u64, to: u64| -> u64 {
            [(0, 6), (10, 5), (20, 1), (30, 9)]
                .iter()
                .filter(|(at, _)| (from..to).contains(at))
                .map(|(_, n)| n)
                .sum()
        };
        let bounds = [10, 20, 30, 40];
        assert_eq!(slice_end(0, &bounds, u64::MAX, 0, live), 40);
        // 6 + 5 + 1 fit in 12; the rest (9) is not below half a slice.
        assert_eq!(slice_end(0, &bounds, 12, 0, live), 30);
        assert_eq!(slice_end(0, &bounds, 11, 0, live), 20);
        // A rest below half a slice is taken with it: 6 + 5 + 1 fit in 16 or 20, the rest (9) is
        // not below 16 / 2, it is below 20 / 2.
        assert_eq!(slice_end(0, &bounds, 16, 0, live), 30);
        assert_eq!(slice_end(0, &bounds, 20, 0, live), 40);
        // A first chunk larger than the budget is still taken alone.
        assert_eq!(slice_end(0, &bounds, 3, 0, live), 10);
        // Merged segments count in the budget, and are progress enough.
        assert_eq!(slice_end(0, &bounds, 8, 4, live), 0);
        assert_eq!(slice_end(0, &bounds, 10, 4, live), 10);
        assert_eq!(slice_bytes(&GcPolicy::default(), 1_000), 8 << 20);
        assert_eq!(slice_bytes(&GcPolicy::default(), 1_000 << 20), 100 << 20);
        assert_eq!(slice_bytes(&GcPolicy { slice_percent: 0, ..GcPolicy::default() }, 1 << 40), u64::MAX);
    }

    #[test]
    fn choice_takes_the_most_garbage_within_the_budget_and_ratio() {
        let list = segments(&[1000, 90, 60]);
        let base = Compaction {
            candidates: list.clone(),
            deep: true,
            budget_bytes: 300,
            min_garbage_percent: 33,
            must_merge: false,
            slice_bytes: u64::MAX,
            keep_in_place_percent: 0,
        };
        // Newest: 30 garbage of 60 (50%); with the middle one: 80 of 150; the oldest does not fit.
        assert_eq!(choose(&base, &[900, 40, 30], 100), 2);
        // The middle one adds no garbage: the shorter suffix wins.
        assert_eq!(choose(&base, &[900, 90, 30], 100), 1);
        // Too little garbage anywhere.
        assert_eq!(choose(&base, &[990, 85, 55], 100), 0);
        // The mandatory copy alone exhausts the budget.
        assert_eq!(choose(&base, &[900, 40, 30], 290), 0);
        // A full list merges the newest regardless.
        assert_eq!(choose(&Compaction { must_merge: true, ..base.clone() }, &[900, 85, 60], 290), 1);
        // Compaction: any garbage, the whole list when the budget allows.
        let compact = Compaction { budget_bytes: 2_000, min_garbage_percent: 0, ..base };
        assert_eq!(choose(&compact, &[999, 90, 60], 0), 3);
        assert_eq!(choose(&compact, &[1000, 90, 60], 0), 0);
    }

    #[test]
    fn the_growth_seen_during_the_last_gc_leaves_room_in_the_copy_budget() {
        let list = segments(&[1000, 90, 60]);
        let mut plan = Compaction {
            candidates: list,
            deep: true,
            budget_bytes: 300,
            min_garbage_percent: 33,
            must_merge: false,
            slice_bytes: u64::MAX,
            keep_in_place_percent: 0,
        };
        // 100 mandatory + 70 live of the two newest fit in 300, and in 300 - 120 = 180, not in
        // 300 - 140 = 160, where the newest alone (100 + 30) still fits; 300 - 300 merges none.
        assert_eq!(choose(&plan, &[900, 40, 30], 100), 2);
        let mut less = plan.clone();
        less.leave_room_for(120);
        assert_eq!(choose(&less, &[900, 40, 30], 100), 2);
        let mut less = plan.clone();
        less.leave_room_for(140);
        assert_eq!(less.budget_bytes, 160);
        assert_eq!(choose(&less, &[900, 40, 30], 100), 1);
        plan.leave_room_for(u64::MAX);
        assert_eq!(plan.budget_bytes, 0);
        assert_eq!(choose(&plan, &[900, 40, 30], 100), 0);
    }
}
