//! The GC worker thread (docs/gc-design.md §4–§6): marks the region's live records over a
//! snapshot of the layout (through the old segments the compaction plan names), chooses the old
//! segments to merge from their live bytes ([`crate::gc::policy::choose`]), finds the GC commit's
//! entry in `commits`, and copies the live records in increasing order into the new segment,
//! synced with the directory. It writes nothing the writer
//! or the readers use; the switch is the writer's (`gc.rs`).

use crate::error::{FileKind, Result, StoreError};
use crate::format::control::{MAX_SEGMENTS, SegmentRef};
use crate::format::index;
use crate::format::names::segment_name;
use crate::gc::late_roots::LateRoots;
use crate::gc::live::{LiveRuns, Run, walk_records};
use crate::gc::mark::{self, MarkBounds};
use crate::gc::policy::{Compaction, SegmentStat};
use crate::gc::report::GcPhase;
use crate::gc::roots::RootSpans;
use crate::io::priority::lower_priority;
use crate::io::storage::Storage;
use crate::io::storage::dir_bytes;
use crate::pack::layout::{Layout, SegmentExtent, entries_of};
use crate::pack::reader::PackReader;
use crate::pack::segment::{Segment, SegmentHeader, SegmentWriter};
use larch_core::Hash;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) phase: AtomicU8,
    pub(crate) done: AtomicU64,
    pub(crate) total: AtomicU64,
}

impl Counters {
    pub(crate) fn set_phase(&self, phase: GcPhase, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Release);
    }
}

/// What the worker hands back.
#[derive(Debug)]
pub(crate) struct WorkerOutput {
    /// Start of the region collected: the first merged segment's range start, else the end of
    /// the segments.
    pub(crate) region_start: u64,
    /// The region's oldest chunks, kept in place (each read as a segment, all under one entry of
    /// the slot) instead of copied; the region then starts at the last one's end.
    pub(crate) kept_chunks: Vec<SegmentExtent>,
    /// The old segments marked, with their live bytes.
    pub(crate) candidates: Vec<(SegmentStat, u64)>,
    /// Live records of the region, increasing.
    pub(crate) live: LiveRuns,
    /// Of these, the base-only ones, increasing.
    pub(crate) base_only: Vec<u64>,
    /// Records of `[region_end, K)` traversed as full, increasing.
    pub(crate) boundary_full: Vec<u64>,
    pub(crate) segment: Option<SegmentExtent>,
    pub(crate) index_keep_from: u64,
    pub(crate) copied_bytes: u64,
    pub(crate) mark_time: Duration,
    /// The window's bytes, and those whose roots came from an earlier GC's summary.
    pub(crate) window: (u64, u64),
    /// Bytes of the root summaries kept for the next GC.
    pub(crate) summary_bytes: u64,
    pub(crate) copy_time: Duration,
    /// Disk bytes once the segment was written.
    pub(crate) disk_after_copy: u64,
    /// The first chunk after the switch when the slice ended before the region's end.
    pub(crate) first_chunk: Option<u32>,
    /// Live records copied.
    pub(crate) copied_records: u64,
    /// The ends of the slices after this one, increasing (the last is the region end), planned
    /// by the first slice; empty when this slice ends the GC.
    pub(crate) later_ends: Vec<u64>,
    /// Whether this slice ran a mark (the first slice of a GC does; later ones take its result).
    pub(crate) marked: bool,
    /// Records the mark's traversal visited, and records it read (visits and patch decoding).
    pub(crate) mark_records: (u64, u64),
}

/// A sliced GC's mark, handed from its first slice to the next ones (docs/gc-design.md §6): the
/// live records of the chunks not copied yet, and where each later slice ends. Later slices of
/// the same commit need no mark of their own: the live set of the region does not change (the
/// commit is the same), and every pointer the writer wrote below the commit meanwhile was checked
/// against this set by the slice it was written during (late roots).
#[derive(Debug, Default)]
pub(crate) struct SliceCarry {
    /// Live records of the rest of the region, increasing.
    pub(crate) live: LiveRuns,
    /// Of these, the base-only ones, increasing.
    pub(crate) base_only: Vec<u64>,
    /// Records of `[region_end, K)` traversed as full, increasing.
    pub(crate) boundary_full: Vec<u64>,
    /// The ends of the remaining slices, increasing; the first is the next slice's.
    pub(crate) ends: Vec<u64>,
}

/// The position in `commits` of the entry of the commit at `keep_from`, searched in `[from, to)`
/// (entries are in increasing offset order).
fn index_position(index: &dyn Storage, (from, to): (u64, u64), keep_from: u64) -> Result<u64> {
    let entry_len = index::ENTRY_LEN as u64;
    let (mut low, mut high) = (0u64, (to.saturating_sub(from)) / entry_len);
    let mut buf = [0u8; index::ENTRY_LEN];
    while low < high {
        let middle = low + (high - low) / 2;
        let at = from + middle * entry_len;
        index.read_at(at, &mut buf).map_err(|e| StoreError::io(FileKind::Index, at, "read", e))?;
        let entries = index::decode_entries(&buf, at)?;
        let offset = entries.first().map_or(u64::MAX, |(_, offset)| *offset);
        if offset == keep_from {
            return Ok(at);
        }
        if offset < keep_from {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    Err(StoreError::corrupt(FileKind::Index, from, format!("no entry for the commit at {keep_from}")))
}

/// Everything the worker needs.
pub(crate) struct Job {
    pub(crate) layout: Arc<Layout>,
    pub(crate) index: Arc<dyn Storage>,
    pub(crate) index_range: (u64, u64),
    pub(crate) bounds: MarkBounds,
    /// The end of the old segments: the region starts here unless segments are merged.
    pub(crate) region_start: u64,
    pub(crate) generation: u64,
    pub(crate) commit: Hash,
    pub(crate) counters: Arc<Counters>,
    /// The writer's late roots, appended per commit; drained and checked as the copy goes and
    /// once it is done.
    pub(crate) late_roots: Arc<Mutex<LateRoots>>,
    /// The old segments to mark, and how to choose those merged.
    pub(crate) compaction: Compaction,
    /// The worker's nice value (Linux; [`crate::GcPolicy::worker_nice`]).
    pub(crate) nice: i32,
    /// The window's root summaries kept between GCs ([`crate::gc::roots`]): the worker takes
    /// them, uses and extends them, drops those below its commit and puts them back.
    pub(crate) root_spans: Arc<Mutex<RootSpans>>,
    /// [`crate::GcPolicy::root_span_bytes`].
    pub(crate) span_bytes: u64,
    /// A later slice's mark, from the first slice: no mark is run.
    pub(crate) carry: Option<Box<SliceCarry>>,
}

/// The late roots' lock; a poisoned lock (a thread panicked while appending) still holds valid
/// offsets.
pub(crate) fn lock_roots(roots: &Mutex<LateRoots>) -> MutexGuard<'_, LateRoots> {
    roots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Copy reads of at most this many bytes.
const COPY_PIECE: u64 = 1 << 20;

/// The copy asks the system for the live runs starting less than this many bytes past the piece
/// it reads (`POSIX_FADV_WILLNEED`): the pack's files are read without the kernel's own
/// read-ahead (`docs/store.md` *Reads and the cache*).
const COPY_AHEAD: u64 = 8 << 20;

/// Live runs at most this far apart are asked for as one range, gap included.
const COPY_AHEAD_GAP: u64 = 32 << 10;

/// Calls `ask` (`Layout::will_need`) for the runs of `runs` from index `*asked` on that start
/// below `until`, close ones as one range; advances `*asked` past them.
fn ask_ahead(runs: &[Run], asked: &mut usize, until: u64, mut ask: impl FnMut(u64, u64)) {
    let mut range: Option<(u64, u64)> = None;
    while let Some(run) = runs.get(*asked).filter(|run| run.start < until) {
        range = match range {
            Some((start, end)) if run.start.saturating_sub(end) <= COPY_AHEAD_GAP => {
                Some((start, end.max(run.end())))
            }
            Some((start, end)) => {
                ask(start, end - start);
                Some((run.start, run.end()))
            }
            None => Some((run.start, run.end())),
        };
        *asked += 1;
    }
    if let Some((start, end)) = range {
        ask(start, end - start);
    }
}

/// The copy checks the late roots written so far each time it has copied this many bytes more
/// (first before its first piece, the mark being done; with nothing to copy, only at the end).
const LATE_CHECK_BYTES: u64 = 64 << 20;

pub(crate) fn work(job: Job) -> Result<WorkerOutput> {
    lower_priority(job.nice);
    let Job {
        layout,
        index,
        index_range,
        bounds,
        region_start,
        generation,
        commit,
        counters,
        late_roots,
        compaction,
        nice: _,
        root_spans,
        span_bytes,
        carry,
    } = job;
    let dir = layout.directory().clone();
    let floor = compaction.floor(region_start);
    counters.set_phase(GcPhase::Mark, bounds.scan_end - floor);
    let started = Instant::now();
    let marked = carry.is_none();
    let (mut mark, summary_bytes, planned_ends) = match carry {
        Some(carry) => {
            let SliceCarry { live, base_only, boundary_full, ends } = *carry;
            (
                mark::GcMark {
                    bounds: Some(bounds),
                    runs: live,
                    base_only,
                    boundary_full,
                    ..Default::default()
                },
                0,
                Some(ends),
            )
        }
        None => {
            let reader = PackReader::new(layout.clone(), bounds.scan_end, 0);
            // A panicked earlier worker leaves its spans poisoned: they are only summaries, start
            // anew.
            let mut spans =
                std::mem::take(&mut *root_spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            if spans.span_bytes() != span_bytes {
                spans = RootSpans::new(span_bytes);
            }
            // Runs of live records never span a chunk or segment bound (nor do records): every
            // range this GC sums or cuts holds whole runs.
            let splits: Vec<u64> = layout
                .segments()
                .iter()
                .flat_map(|segment| [segment.reference.range_start, segment.reference.range_end])
                .chain(layout.chunk_files(bounds.scan_end).iter().flat_map(|(_, start, end)| [*start, *end]))
                .chain([bounds.region_end])
                .collect();
            let mark = mark::mark_above(&reader, bounds, floor, splits, Some(&mut spans))?;
            spans.prune(bounds.keep_from);
            let summary_bytes = spans.heap_bytes() as u64;
            *root_spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = spans;
            (mark, summary_bytes, None)
        }
    };
    let index_keep_from = index_position(&*index, index_range, bounds.keep_from)?;
    let mark_time = started.elapsed();
    counters.done.store(bounds.scan_end - floor, Ordering::Relaxed);
    // The marked segments' live bytes, then the merge (docs/gc-design.md §6).
    let live_bytes = |from: u64, to: u64| -> u64 { mark.runs.bytes_in(from, to) };
    let live: Vec<u64> = compaction
        .candidates
        .iter()
        .map(|segment| live_bytes(segment.range_start, segment.range_end))
        .collect();
    // The store's first chunks stay in place while most of each is live (docs/gc-design.md §13,
    // *Chunks kept in place*): copying them would cost more extra disk than it frees. They are
    // the region's start only while nothing was collected (no segment to merge).
    let kept_chunks = match marked {
        true => keep_in_place(&layout, &compaction, region_start, bounds, &live_bytes)?,
        false => Vec::new(),
    };
    let region_start = kept_chunks.last().map_or(region_start, |kept| kept.reference.range_end);
    let mandatory = live_bytes(region_start, bounds.region_end);
    let mandatory_start = region_start;
    let merged = crate::gc::policy::choose(&compaction, &live, mandatory);
    let region_start = match merged {
        0 => region_start,
        merged => compaction
            .candidates
            .get(compaction.candidates.len().saturating_sub(merged))
            .map_or(region_start, |segment| segment.range_start),
    };
    // A slice: the chunks whose live records fit in the slice budget with the merged segments'
    // (docs/gc-design.md §6); the rest stays in its chunks for the next slice.
    let chunks_start = mandatory_start;
    let merged_live: u64 = live.iter().rev().take(merged).sum();
    let boundaries: Vec<u64> = layout
        .chunk_files(bounds.scan_end)
        .iter()
        .map(|(_, start, _)| *start)
        .filter(|start| *start > chunks_start && *start < bounds.region_end)
        .chain(std::iter::once(bounds.region_end))
        .collect();
    // The segments after this slice: each later slice adds one, and none may merge (they have no
    // mark of the old segments), so the slices are planned here, at most one per free slot of
    // the segment list, the last free slot taking the rest of the region.
    let segments_after = entries_of(&layout.segments()).len().saturating_sub(merged)
        + usize::from(!kept_chunks.is_empty())
        + 1;
    let free_slots = MAX_SEGMENTS.saturating_sub(segments_after);
    let (slice_end, later_ends) = match planned_ends {
        Some(ends) => {
            let mut ends = ends.into_iter();
            (ends.next().unwrap_or(bounds.region_end).min(bounds.region_end), ends.collect())
        }
        None => plan_slices(
            chunks_start,
            &boundaries,
            compaction.slice_bytes,
            merged_live,
            free_slots,
            &live_bytes,
        ),
    };
    let first_chunk = match slice_end < bounds.region_end {
        true => match layout.chunk_holding(slice_end) {
            Some((seq, start)) if start == slice_end => Some(seq),
            _ => {
                return Err(StoreError::corrupt(FileKind::Pack, slice_end, "a GC slice ends inside a chunk"));
            }
        },
        false => None,
    };
    let candidates: Vec<(SegmentStat, u64)> = compaction.candidates.iter().copied().zip(live).collect();
    let started = Instant::now();
    // Filtered in place: no second copy of the live set at the GC's memory peak.
    mark.runs.retain_from(region_start)?;
    mark.base_only.retain(|offset| *offset >= region_start);
    let live = std::mem::take(&mut mark.runs);
    let base_only = std::mem::take(&mut mark.base_only);
    // Only the slice is copied; the live records above it stay listed for the late-root check.
    let to_copy = live.runs_below(slice_end)?;
    let copied_count: u64 = to_copy.iter().map(|run| u64::from(run.records)).sum();
    let total: u64 = to_copy.iter().map(|run| u64::from(run.len)).sum();
    counters.set_phase(GcPhase::Copy, total);
    let mut segment = None;
    let mut copied_bytes = 0;
    if region_start < slice_end {
        let name = segment_name(generation);
        let file = dir.create(&name).map_err(|e| StoreError::io(FileKind::Segment, 0, "create", e))?;
        let header = SegmentHeader {
            generation,
            range_start: region_start,
            range_end: slice_end,
            keep_from: bounds.keep_from,
            index_keep_from,
            commit,
        };
        let mut writer = SegmentWriter::new(file.clone(), header)?;
        let mut buffer = Vec::new();
        let mut i = 0;
        let mut next_check = 0;
        let mut asked = 0;
        while let Some(&Run { start, .. }) = to_copy.get(i) {
            if copied_bytes >= next_check {
                let sets =
                    LiveSets { live: &live, base_only: &base_only, boundary_full: &mark.boundary_full };
                check_late_roots(&late_roots, &sets, region_start, &bounds, &layout, &commit)?;
                next_check = copied_bytes + LATE_CHECK_BYTES;
            }
            // Adjacent live runs, at most COPY_PIECE bytes (a larger run alone).
            let mut end = start;
            let mut j = i;
            while let Some(run) = to_copy.get(j) {
                if run.start != end || (j > i && run.end() - start > COPY_PIECE) {
                    break;
                }
                end = run.end();
                j += 1;
            }
            let len = usize::try_from(end - start)
                .map_err(|_| StoreError::corrupt(FileKind::Pack, start, "huge run"))?;
            // The piece itself is read now: what follows it is asked for.
            asked = asked.max(j);
            let until = end.saturating_add(COPY_AHEAD);
            ask_ahead(to_copy, &mut asked, until, |at, len| layout.will_need(at, len));
            buffer.resize(len, 0);
            layout.read(start, &mut buffer)?;
            // Every record is checked again (framing and checksum) before it is copied: each run's
            // records, found from their framing, tile it exactly and are as many as the mark saw.
            for &Run { start: offset, len, records } in to_copy.get(i..j).unwrap_or_default() {
                let at = usize::try_from(offset - start).unwrap_or(usize::MAX);
                let run = buffer
                    .get(at..at.saturating_add(len as usize))
                    .ok_or_else(|| StoreError::corrupt(FileKind::Pack, offset, "live run past its piece"))?;
                let found = walk_records(offset, run, |offset, record| {
                    let (data, crc) = record.split_at(record.len().saturating_sub(4));
                    if crc32fast::hash(data) != u32::from_le_bytes(crc.try_into().unwrap_or_default()) {
                        return Err(StoreError::corrupt(FileKind::Pack, offset, "record checksum mismatch"));
                    }
                    Ok(())
                })?;
                if found != u64::from(records) {
                    return Err(StoreError::corrupt(
                        FileKind::Pack,
                        offset,
                        format!("a live run of {records} records holds {found}"),
                    ));
                }
            }
            writer.push_run(start, &buffer)?;
            copied_bytes += end - start;
            counters.done.store(copied_bytes, Ordering::Relaxed);
            i = j;
        }
        writer.finish()?;
        file.sync().map_err(|e| StoreError::io(FileKind::Segment, 0, "sync", e))?;
        dir.sync().map_err(|e| StoreError::io(FileKind::Segment, 0, "sync directory", e))?;
        let opened = dir.open(&name, false).map_err(|e| StoreError::io(FileKind::Segment, 0, "open", e))?;
        let opened = Segment::open(opened)?;
        let summary = opened.summary();
        let reference = SegmentRef {
            generation,
            range_start: region_start,
            range_end: slice_end,
            file_len: summary.file_len,
            footer_crc: summary.footer_crc,
        };
        segment = Some(SegmentExtent::whole(reference, opened));
    }
    let copy_time = started.elapsed();
    let disk_after_copy = dir_bytes(&*dir)?;
    let output = WorkerOutput {
        region_start,
        kept_chunks,
        candidates,
        live,
        base_only,
        boundary_full: mark.boundary_full,
        segment,
        index_keep_from,
        copied_bytes,
        mark_time,
        window: (mark.window_bytes, mark.window_summarised_bytes),
        summary_bytes,
        copy_time,
        disk_after_copy,
        first_chunk,
        copied_records: copied_count,
        later_ends,
        marked,
        mark_records: (mark.records_visited, mark.records_read),
    };
    // The late roots written since the last check are checked here, off the writer's thread;
    // the writer checks the few written after this drain at the switch.
    let sets =
        LiveSets { live: &output.live, base_only: &output.base_only, boundary_full: &output.boundary_full };
    check_late_roots(&late_roots, &sets, region_start, &bounds, &layout, &commit)?;
    counters.set_phase(GcPhase::WaitingForSwitch, 0);
    Ok(output)
}

/// The ends of a GC's slices: the first slice's and the later ones' (docs/gc-design.md §6). Each
/// slice copies at most `slice_bytes` (the first one with the merged segments' `merged_live`),
/// or, when the segment list has too few free slots for slices that small, an even share of
/// the rest over the slots left; the slice taking the last of the `free_slots` segment slots
/// left after the first slice takes the whole rest (with no free slot, the first slice does).
fn plan_slices(
    chunks_start: u64,
    boundaries: &[u64],
    slice_bytes: u64,
    merged_live: u64,
    free_slots: usize,
    live_bytes: &impl Fn(u64, u64) -> u64,
) -> (u64, Vec<u64>) {
    let region_end = boundaries.last().copied().unwrap_or(chunks_start);
    // The budget of a slice from `from` when `slices` slices (this one included) are left.
    let budget = |from: u64, slices: usize| -> u64 {
        let share = live_bytes(from, region_end).div_ceil(slices.max(1) as u64);
        slice_bytes.max(share)
    };
    let first = match free_slots {
        0 => region_end,
        _ => {
            let budget = budget(chunks_start, free_slots + 1).saturating_add(merged_live).max(slice_bytes);
            crate::gc::policy::slice_end(chunks_start, boundaries, budget, merged_live, live_bytes)
                .min(region_end)
        }
    };
    let mut later = Vec::new();
    let mut end = first;
    while end < region_end {
        let slots = free_slots.saturating_sub(later.len());
        end = match slots {
            0 | 1 => region_end,
            _ => crate::gc::policy::slice_end(end, boundaries, budget(end, slots), 0, live_bytes)
                .min(region_end),
        };
        later.push(end);
    }
    (first, later)
}

/// The store's first chunks, as segment views to keep in place under one entry of the slot,
/// when the policy's threshold says so: nothing was collected yet (the region starts at 16, so
/// there is no segment to merge), and from the first chunk on, each chunk lies wholly in the
/// region, is a format-3 chunk file, and has at least `keep_in_place_percent` of its bytes live.
/// The first chunk that does not stops them (it and those after it are copied).
fn keep_in_place(
    layout: &Layout,
    compaction: &Compaction,
    region_start: u64,
    bounds: MarkBounds,
    live_bytes: &impl Fn(u64, u64) -> u64,
) -> Result<Vec<SegmentExtent>> {
    let percent = compaction.keep_in_place_percent;
    if percent == 0 || percent > 100 || region_start != crate::format::codec::PACK_HEADER_LEN {
        return Ok(Vec::new());
    }
    let mut kept = Vec::new();
    let mut next_start = region_start;
    for (seq, (_, start, end)) in (layout.first_seq()..).zip(layout.chunk_files(bounds.scan_end)) {
        let Some(chunk) = layout.chunk_extent(seq) else { break };
        let mostly_live =
            u128::from(live_bytes(start, end)) * 100 >= u128::from(end - start) * u128::from(percent);
        if chunk.legacy
            || chunk.start != start
            || start != next_start
            || end > bounds.region_end
            || !mostly_live
        {
            break;
        }
        let file_len = chunk.file.len().map_err(|e| StoreError::io(FileKind::Pack, start, "stat", e))?;
        let reference = SegmentRef::kept_chunk_entry(seq, start, end, file_len);
        let segment =
            Segment::over_chunk(chunk.file.clone(), reference.generation, (start, end), chunk.data_at)?;
        kept.push(SegmentExtent::whole(reference, segment));
        next_start = end;
    }
    // One entry of the slot for them all: the first one's number, their count, their range, the
    // last one's length.
    let (Some(first), Some(last)) = (kept.first(), kept.last()) else { return Ok(kept) };
    let entry = u32::try_from(kept.len()).ok().and_then(|count| {
        let seq = first.reference.kept_chunk()?;
        SegmentRef::kept_chunks_entry(
            seq,
            count,
            first.reference.range_start,
            last.reference.range_end,
            last.reference.file_len,
        )
    });
    let Some(entry) = entry else { return Ok(Vec::new()) };
    for segment in &mut kept {
        segment.entry = entry;
    }
    Ok(kept)
}

/// The first of `roots` (sorted, deduplicated) that the GC would not keep as a full record: below
/// `region_end` it must be live and not base-only; in `[region_end, keep_from)` (the boundary
/// chunk) it must have been traversed as a full record. `read` reads the pack (a root inside a
/// live run is a record start only if the run's framing says so; a failed read makes the root
/// unsafe).
pub(crate) fn first_unsafe_root(
    roots: impl IntoIterator<Item = u64>,
    output: &WorkerOutput,
    region_end: u64,
    keep_from: u64,
    read: &dyn Fn(u64, &mut [u8]) -> Result<()>,
) -> Option<u64> {
    let sets =
        LiveSets { live: &output.live, base_only: &output.base_only, boundary_full: &output.boundary_full };
    sets.first_unsafe(roots, region_end, keep_from, read)
}

/// Drains the late roots written so far and checks them against the mark's `sets` (those below
/// `region_start` are in old segments kept whole): an abandoned GC if one is not safe. The worker
/// checks them as its copy goes, so that they do not accumulate while a large GC runs through
/// hundreds of blocks, and once it is done.
fn check_late_roots(
    late_roots: &Mutex<LateRoots>,
    sets: &LiveSets<'_>,
    region_start: u64,
    bounds: &MarkBounds,
    layout: &Layout,
    commit: &Hash,
) -> Result<()> {
    let drained = std::mem::take(&mut *lock_roots(late_roots));
    if drained.is_empty() {
        return Ok(());
    }
    let read = |offset: u64, buf: &mut [u8]| layout.read(offset, buf);
    match sets.first_unsafe(drained.sorted_from(region_start), bounds.region_end, bounds.keep_from, &read) {
        Some(root) => Err(StoreError::GcAbandoned(format!(
            "a commit written during the GC points to the record at {root}, which the GC of commit {commit} \
             would remove; run the GC again"
        ))),
        None => Ok(()),
    }
}

/// A mark's result as the late-root check reads it.
pub(crate) struct LiveSets<'a> {
    /// Live records of the region.
    pub(crate) live: &'a LiveRuns,
    /// Of these, the base-only ones, increasing.
    pub(crate) base_only: &'a [u64],
    /// Records of `[region_end, K)` traversed as full, increasing.
    pub(crate) boundary_full: &'a [u64],
}

impl LiveSets<'_> {
    /// [`first_unsafe_root`] against these sets.
    pub(crate) fn first_unsafe(
        &self,
        roots: impl IntoIterator<Item = u64>,
        region_end: u64,
        keep_from: u64,
        read: &dyn Fn(u64, &mut [u8]) -> Result<()>,
    ) -> Option<u64> {
        let output = self;
        let (mut base_at, mut boundary_at) = (0, 0);
        roots.into_iter().find(|&root| {
            let safe = if root < region_end {
                while output.base_only.get(base_at).is_some_and(|offset| *offset < root) {
                    base_at += 1;
                }
                output.base_only.get(base_at) != Some(&root)
                    && output.live.contains_start(root, read).unwrap_or(false)
            } else {
                while output.boundary_full.get(boundary_at).is_some_and(|offset| *offset < root) {
                    boundary_at += 1;
                }
                root >= keep_from || output.boundary_full.get(boundary_at) == Some(&root)
            };
            !safe
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, len: u32) -> Run {
        Run { start, len, records: 1 }
    }

    #[test]
    fn the_copy_asks_for_the_runs_ahead_of_it_once_close_ones_together() {
        // Two close runs, one past the gap, one past the horizon.
        let gap = COPY_AHEAD_GAP;
        let runs = [run(100, 50), run(150 + gap, 10), run(160 + 2 * gap + 1, 20), run(10_000_000, 5)];
        let mut asked = 0;
        let mut calls = Vec::new();
        ask_ahead(&runs, &mut asked, 1_000_000, |at, len| calls.push((at, len)));
        assert_eq!(calls, vec![(100, 60 + gap), (160 + 2 * gap + 1, 20)]);
        assert_eq!(asked, 3);
        // Asked for once: the next call goes on from the fourth run.
        calls.clear();
        ask_ahead(&runs, &mut asked, 1_000_000, |at, len| calls.push((at, len)));
        assert!(calls.is_empty());
        ask_ahead(&runs, &mut asked, u64::MAX, |at, len| calls.push((at, len)));
        assert_eq!(calls, vec![(10_000_000, 5)]);
        assert_eq!(asked, 4);
    }
}
