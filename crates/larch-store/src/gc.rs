//! Garbage collection, the engine (docs/gc-design.md §4–§5, docs/store.md *Garbage collection*).
//!
//! [`Repo::gc_start`] takes the GC commit `K`, the published layout as a snapshot and the end of
//! the pack, and spawns a worker thread (`larch-gc`) that marks the records of the *region* (the
//! chunks wholly below the chunk holding `K`, plus the old segments the compaction policy chose to
//! mark, [`crate::gc_policy`]) that kept commits still need ([`crate::gc_mark`]), decides which of
//! the marked segments to merge, copies the live records of the merged segments and the chunks in
//! increasing order into a new segment `seg.<generation>`, and syncs it and the directory. Nothing
//! the writer or the readers use is touched meanwhile.
//!
//! The **switch** rides on the writer's next publish (a commit, [`Repo::gc_finish`],
//! [`Repo::gc_wait`], [`Repo::flush`], [`Repo::close`]): once the worker is done, the slot written
//! gets the GC fields (`gc_generation`, `keep_from`, `index_keep_from`, `first_chunk`, the new
//! segment list) and loses the branches naming commits below `K`; the in-memory layout and commit
//! map change after the slot is durable. Before it, the *late roots* (targets below `K` of the
//! pointers the writer wrote to existing records while the GC ran) are checked against the live
//! set: one that is not live means the GC would lose an object a kept commit needs, and the GC is
//! abandoned (its segment removed, the error returned by `gc_finish`/`gc_wait`, the store as
//! before).
//!
//! **Deletion**: the files the switch retired (region chunks, merged segments) are unlinked once
//! both control slots are post-GC, i.e. after one more publish (which `gc_finish`/`gc_wait` do at
//! once). A crash anywhere leaves the store before the switch (the new segment is an orphan the
//! next writer removes) or after it (retired files not yet unlinked are removed by the next
//! writer's open).

use crate::codec::PACK_HEADER_LEN;
use crate::error::{FileKind, Result, StoreError};
use crate::gc_mark::MarkBounds;
use crate::gc_policy::{GcOptions, GcPolicy, SegmentStat};
use crate::gc_roots::RootSpans;
use crate::gc_worker::{Counters, Job, WorkerOutput, work};
use crate::repo::Repo;
use crate::storage::Directory;
use larch_core::Hash;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one garbage collection did (returned once it has switched).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The GC commit (kept, with every later commit).
    pub commit: Hash,
    /// `gc_generation` after it.
    pub generation: u64,
    /// Bytes of the store's files when it started.
    pub disk_before: u64,
    /// Bytes of the store's files after the switch and the deletions done so far.
    pub disk_after: u64,
    /// The largest sum of file sizes observed during it (sampled at its start, after the segment
    /// was written, at the switch and after the deletions).
    pub disk_peak: u64,
    /// Bytes of the files it collected (region chunks, merged segments).
    pub region_bytes: u64,
    /// Live records copied into the new segment.
    pub live_records: u64,
    /// Bytes copied into the new segment.
    pub copied_bytes: u64,
    /// Of the live records, those kept only as patch bases.
    pub base_only_records: u64,
    /// Chunk files unlinked so far.
    pub chunks_removed: usize,
    /// Branches removed because they named a collected commit.
    pub branches_removed: Vec<String>,
    /// Time of the mark (window scan and traversal).
    pub mark_time: Duration,
    /// Bytes of the window, the records from the GC commit to the published end, whose pointers
    /// are the mark's roots.
    pub window_bytes: u64,
    /// Of these, the bytes whose roots came from an earlier GC's summary of them (not read
    /// again: `docs/gc-design.md` §4, *Roots*).
    pub window_summarised_bytes: u64,
    /// Bytes of the root summaries the handle keeps for its next GC (held in memory).
    pub root_summary_bytes: u64,
    /// Time of the copy (segment written and synced).
    pub copy_time: Duration,
    /// Time the writer spent in the switch (late-root check, slot fields, layout swap).
    pub switch_pause: Duration,
    /// From the start to the switch.
    pub total_time: Duration,
    /// Bytes of retired files still waiting to be unlinked (0 once deleted).
    pub bytes_waiting: u64,
    /// The segment written (`None` when the region was empty).
    pub segment: Option<String>,
    /// The region's oldest chunk when it was kept in place instead of copied (mostly live:
    /// [`crate::GcPolicy::keep_in_place_percent`]), with its bytes.
    pub kept_in_place: Option<(String, u64)>,
    /// Whether the mark went through every old segment (a deep mark, docs/gc-design.md §6).
    pub deep_mark: bool,
    /// Old segments marked (their live bytes measured).
    pub segments_marked: usize,
    /// Old segments merged into the new one (retired by the switch).
    pub merged_segments: Vec<String>,
    /// Garbage found in the marked old segments (their record bytes minus their live bytes).
    pub segments_garbage: u64,
    /// Whether the GC is complete: `false` for a slice that left newly old chunks for the next
    /// slice (docs/gc-design.md §6), which [`Repo::gc_finish`] starts at once and
    /// [`Repo::gc_wait`] runs to the end. The commit's collection is published by the first
    /// slice; later slices only return disk.
    pub complete: bool,
    /// The slice's index within its GC (0: the first); in the report of [`Repo::gc_wait`] (all the
    /// slices together), the last slice's.
    pub slice: u32,
}

/// The phase of a running GC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcPhase {
    /// Scanning the window for roots and traversing.
    Mark,
    /// Copying live records into the new segment.
    Copy,
    /// The worker is done (its thread has ended); the writer's next publish switches.
    WaitingForSwitch,
}

/// Phase and progress of a running GC (read by a progress bar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcProgress {
    /// The phase.
    pub phase: GcPhase,
    /// Bytes done in this phase.
    pub done_bytes: u64,
    /// Bytes this phase will do (an estimate for the mark: the window and the region).
    pub total_bytes: u64,
}

/// The late roots' lock; a poisoned lock (a thread panicked while appending) still holds valid
/// offsets.
pub(crate) fn lock_roots(roots: &Mutex<Vec<u64>>) -> MutexGuard<'_, Vec<u64>> {
    roots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A GC started and not yet switched.
#[derive(Debug)]
pub(crate) struct GcRun {
    commit: Hash,
    keep_from: u64,
    generation: u64,
    /// The lowest start the region may get (the first marked segment's, else the end of the
    /// segments): late roots below it are in segments kept whole.
    floor: u64,
    region_end: u64,
    /// Whether the mark goes through every segment.
    deep: bool,
    /// The chunk holding `K`: the first live chunk after the switch.
    first_chunk: u32,
    handle: Option<JoinHandle<Result<WorkerOutput>>>,
    counters: Arc<Counters>,
    /// Targets below `K` of the pointers the writer wrote to existing records since the start
    /// (late roots), not yet checked: the worker drains and checks them once its mark is done;
    /// the writer checks what is left at the switch.
    late_roots: Arc<Mutex<Vec<u64>>>,
    started: Instant,
    disk_before: u64,
    dir: Arc<dyn Directory>,
    /// The options, for the next slice.
    options: GcOptions,
    /// This slice's index within its GC.
    slice: u32,
}

impl GcRun {
    /// Offsets below which the writer's pointers are late roots.
    pub(crate) fn late_below(&self) -> u64 {
        self.keep_from
    }

    /// Adds the late roots of a commit written while the GC runs.
    pub(crate) fn add_late_roots(&mut self, roots: &[u64]) {
        let mut batch: Vec<u64> = roots.iter().copied().filter(|root| *root >= self.floor).collect();
        batch.sort_unstable();
        batch.dedup();
        lock_roots(&self.late_roots).extend(batch);
    }

    fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

/// A finished GC ready to switch: its fields go into the slot being published.
#[derive(Debug)]
pub(crate) struct Switch {
    run: GcRun,
    output: WorkerOutput,
    checked: Instant,
    pause: Duration,
    branches_removed: Vec<String>,
}

/// Files retired by a switch, unlinked once a later publish made both slots post-GC.
#[derive(Debug)]
struct Retired {
    /// Control generation of the switch's publish.
    published_at: u64,
    files: Vec<String>,
}

/// The writer's GC state between runs.
#[derive(Debug, Default)]
pub(crate) struct GcAfter {
    /// The oldest kept commit (the last GC's), for [`StoreError::Collected`].
    pub oldest_kept: Option<Hash>,
    retired: Vec<Retired>,
    report: Option<GcReport>,
    failed: Option<StoreError>,
    /// Unlink retired files on the writer's thread (`gc_wait`), not on a background one.
    sync_delete: bool,
    /// The compaction policy.
    pub(crate) policy: GcPolicy,
    /// The deep-mark trigger's baseline: the segments' live bytes measured by the last deep mark
    /// (before any in this process: their record bytes after this handle's first GC).
    baseline: Option<u64>,
    /// A sliced GC's next slice: its commit, options, index and the disk at the GC's start.
    next_slice: Option<(Hash, GcOptions, u32, u64)>,
    /// The window's root summaries, from one GC's worker to the next ([`crate::gc_roots`]).
    root_spans: Arc<Mutex<RootSpans>>,
}

impl GcAfter {
    /// The state of a store opened with `oldest_kept` as its oldest kept commit.
    pub(crate) fn with_oldest_kept(oldest_kept: Option<Hash>) -> GcAfter {
        GcAfter { oldest_kept, ..GcAfter::default() }
    }
}

/// Sum of the lengths of every file in `dir`.
pub(crate) fn dir_bytes(dir: &dyn Directory) -> Result<u64> {
    let names = dir.list().map_err(|e| StoreError::io(FileKind::Pack, 0, "list", e))?;
    let mut total = 0;
    for name in names {
        match dir.open(&name, false) {
            Ok(file) => total += file.len().unwrap_or(0),
            // Unlinked between the listing and the open.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(FileKind::Pack, 0, "open", e)),
        }
    }
    Ok(total)
}

impl Repo {
    /// Collects garbage: keeps `commit` and every commit written after it, with everything they
    /// reach, and returns the rest of the disk (docs/store.md, *Garbage collection*). Blocks until
    /// the GC has switched and its files are deleted ([`Repo::gc_start`] + [`Repo::gc_wait`]).
    pub fn gc(&mut self, commit: &Hash) -> Result<GcReport> {
        self.gc_with(commit, GcOptions::default())
    }

    /// [`Repo::gc`] with options (e.g. [`GcOptions::compact`]).
    pub fn gc_with(&mut self, commit: &Hash, options: GcOptions) -> Result<GcReport> {
        self.gc_start_with(commit, options)?;
        self.gc_wait()?.ok_or_else(|| StoreError::GcAbandoned("the GC produced no report".into()))
    }

    /// Starts the next slice of a sliced GC, if one is due.
    fn gc_next_slice(&mut self) -> Result<bool> {
        let Some((commit, options, slice, disk_before)) = self.gc_after.next_slice.take() else {
            return Ok(false);
        };
        self.gc_start_slice(&commit, options, slice, Some(disk_before))?;
        Ok(true)
    }

    /// The segment compaction policy of this handle's GCs.
    pub fn gc_policy(&self) -> GcPolicy {
        self.gc_after.policy
    }

    /// Sets the segment compaction policy of the next GCs (docs/gc-design.md §6).
    pub fn set_gc_policy(&mut self, policy: GcPolicy) {
        self.gc_after.policy = policy;
    }

    /// Starts a garbage collection keeping `commit` and every later commit, on a worker thread;
    /// the writer keeps committing. Refused ([`StoreError::GcRefused`]) on a read-only handle,
    /// while another GC runs, for a commit not in the store, not yet published, or older than the
    /// last GC's commit.
    pub fn gc_start(&mut self, commit: &Hash) -> Result<()> {
        self.gc_start_with(commit, GcOptions::default())
    }

    /// [`Repo::gc_start`] with options (e.g. [`GcOptions::compact`]: mark every old segment and
    /// merge the garbage-holding ones into the new segment).
    pub fn gc_start_with(&mut self, commit: &Hash, options: GcOptions) -> Result<()> {
        self.gc_after.next_slice = None;
        self.gc_start_slice(commit, options, 0, None)
    }

    /// Starts a GC's slice; a later slice counts its disk peak from the GC's start.
    fn gc_start_slice(
        &mut self,
        commit: &Hash,
        options: GcOptions,
        slice: u32,
        gc_disk_before: Option<u64>,
    ) -> Result<()> {
        if !self.writable {
            return Err(StoreError::GcRefused("a read-only handle cannot collect garbage".into()));
        }
        self.check_writable()?;
        if self.gc.is_some() {
            return Err(StoreError::GcRefused("a garbage collection is already running".into()));
        }
        // A GC starts from a durable commit: the publish in flight first.
        self.settle_publish()?;
        let keep_from = match self.commit_offset_of(commit) {
            Some(offset) => offset,
            None if self.is_collected(commit)? => {
                return Err(StoreError::GcRefused(format!(
                    "commit {commit} is older than the last garbage collection's commit (it was collected)"
                )));
            }
            None => return Err(StoreError::GcRefused(format!("commit {commit} is not in the store"))),
        };
        if keep_from >= self.synced_pack_end {
            return Err(StoreError::GcRefused(format!("commit {commit} is not published yet (flush first)")));
        }
        let state = self.state.clone();
        if keep_from < state.keep_from {
            return Err(StoreError::GcRefused(format!(
                "commit {commit} is older than the last garbage collection's commit"
            )));
        }
        let layout = self.source.reader.layout().clone();
        let Some((first_chunk, holding_start)) = layout.chunk_holding(keep_from) else {
            return Err(StoreError::GcRefused(format!("commit {commit} lies in no chunk of the store")));
        };
        let segments: Vec<SegmentStat> = layout
            .segments()
            .iter()
            .map(|segment| SegmentStat {
                range_start: segment.reference.range_start,
                range_end: segment.reference.range_end,
                record_bytes: segment.segment.summary().record_bytes,
                file_len: segment.reference.file_len,
            })
            .collect();
        // One new segment per GC for the newly old chunks (the mandatory part of the region,
        // from the end of the segments); the policy chooses the old segments to mark, and the
        // worker, once it knows their live bytes, those to merge (docs/gc-design.md §6).
        let newly_old = holding_start.saturating_sub(layout.first_chunk_start());
        let region_start = segments.last().map_or(PACK_HEADER_LEN, |last| last.range_end);
        let region_end = holding_start.max(region_start);
        let disk_before = match gc_disk_before {
            Some(bytes) => bytes,
            None => self.disk_bytes()?,
        };
        let compaction = crate::gc_policy::plan(
            &self.gc_after.policy,
            options,
            &segments,
            newly_old,
            state.gc_generation + 1,
            self.gc_after.baseline,
            disk_before,
        );
        let floor = compaction.floor(region_start);
        let deep = compaction.deep;
        if state.keep_from == 0 && keep_from > 0 {
            // The commit index must hold an entry before the GC commit's (a slot with `keep_from`
            // names an entry past the header).
            let first_entry = self.commits.values().copied().min();
            if first_entry == Some(keep_from) {
                return Err(StoreError::GcRefused(format!(
                    "commit {commit} is the oldest commit of the store: there is nothing to collect"
                )));
            }
        }

        let dir = layout.directory().clone();
        let counters = Arc::new(Counters::default());
        let late_roots = Arc::new(Mutex::new(Vec::new()));
        // The root summaries the worker will extend count in its memory, with its reserve.
        let summaries =
            self.gc_after.root_spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).heap_bytes()
                as u64;
        let job = Job {
            late_roots: late_roots.clone(),
            layout: Arc::new(layout.snapshot()),
            index: self.files.index.clone(),
            index_range: (state.index_keep_from, state.index_end),
            bounds: MarkBounds { keep_from, region_end, scan_end: state.pack_end },
            region_start,
            generation: state.gc_generation + 1,
            commit: *commit,
            counters: counters.clone(),
            compaction,
            nice: self.gc_after.policy.worker_nice,
            root_spans: self.gc_after.root_spans.clone(),
            span_bytes: self.gc_after.policy.root_span_bytes,
        };
        let handle = std::thread::Builder::new()
            .name("larch-gc".into())
            .spawn(move || work(job))
            .map_err(|e| StoreError::io(FileKind::Pack, 0, "spawn the GC thread", e))?;
        self.gc = Some(Box::new(GcRun {
            commit: *commit,
            keep_from,
            generation: state.gc_generation + 1,
            floor,
            region_end,
            deep,
            first_chunk,
            handle: Some(handle),
            counters,
            late_roots,
            started: Instant::now(),
            disk_before,
            dir,
            options,
            slice,
        }));
        // The worker's memory (and the root summaries it keeps) comes out of the cache's budget
        // while it runs.
        let cache = self.source.reader.cache_capacity();
        let reserve = self.gc_after.policy.cache_reserve_bytes.saturating_add(summaries).min(cache / 2);
        self.source.reader.set_cache_weight(cache - reserve);
        Ok(())
    }

    /// Whether a GC started and has not switched (or been abandoned) yet.
    pub fn gc_running(&self) -> bool {
        self.gc.is_some()
    }

    /// Phase and progress of the running GC, if any.
    pub fn gc_progress(&self) -> Option<GcProgress> {
        let run = self.gc.as_ref()?;
        // Waiting for the switch only once the worker thread has ended: the next commit switches
        // then. (The worker's last phase is set before it returns and its thread ends: reported
        // as waiting then, a commit could still find the worker running and not switch, which
        // made the number of writes of a script depend on timing.)
        let phase = if run.is_finished() {
            GcPhase::WaitingForSwitch
        } else if run.counters.phase.load(Ordering::Acquire) == 0 {
            GcPhase::Mark
        } else {
            GcPhase::Copy
        };
        Some(GcProgress {
            phase,
            done_bytes: run.counters.done.load(Ordering::Relaxed),
            total_bytes: run.counters.total.load(Ordering::Relaxed),
        })
    }

    /// Switches a GC whose worker is done (if no commit did already) and returns its report,
    /// once; `None` while it still runs or when none ran. Never blocks on the worker. The retired
    /// files are unlinked, on a background thread, by the next publish (`bytes_waiting` until
    /// then). A GC that had to be abandoned returns its error here, once.
    pub fn gc_finish(&mut self) -> Result<Option<GcReport>> {
        if self.gc.as_ref().is_some_and(|run| run.is_finished()) {
            self.publish_switch()?;
        }
        let report = self.gc_result(false)?;
        if report.is_some()
            && let Err(e) = self.gc_next_slice()
        {
            // The slice's report is returned now, the next slice's refusal by the next call.
            self.gc_after.failed = Some(e);
        }
        Ok(report)
    }

    /// Blocks until the running GC's worker is done, switches, publishes once more so that both
    /// control slots are post-GC, and unlinks the retired files before returning the report (the
    /// report's `disk_after` is the disk returned).
    pub fn gc_wait(&mut self) -> Result<Option<GcReport>> {
        let mut total: Option<GcReport> = None;
        loop {
            self.gc_join();
            if self.gc.as_ref().is_some_and(|run| run.is_finished()) {
                self.publish_switch()?;
            }
            let Some(report) = self.gc_result(true)? else { return Ok(total) };
            total = Some(match total {
                None => report,
                Some(so_far) => merge_slices(so_far, report),
            });
            match self.gc_next_slice() {
                Ok(true) => {}
                Ok(false) => return Ok(total),
                Err(e) => {
                    // The slices done are published; the rest stays for the next GC.
                    self.gc_after.failed = Some(e);
                    return Ok(total);
                }
            }
        }
    }

    /// The GC segments of this handle's state: name, global range start and end, bytes of records
    /// kept.
    pub fn segment_files(&self) -> Vec<(String, u64, u64, u64)> {
        self.source.reader.layout().segment_files()
    }

    /// The GC generation of this handle's state (0: never collected).
    pub fn gc_generation(&self) -> u64 {
        self.state.gc_generation
    }

    /// The sum of the sizes of the store's files.
    pub fn disk_bytes(&self) -> Result<u64> {
        dir_bytes(&**self.source.reader.layout().directory())
    }

    /// Waits for the running GC's worker (if any) without switching.
    pub(crate) fn gc_join(&mut self) {
        if let Some(run) = self.gc.as_mut()
            && let Some(handle) = run.handle.as_ref()
        {
            while !handle.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Publishes the current state so that a finished GC switches.
    fn publish_switch(&mut self) -> Result<()> {
        let state = self.state.clone();
        self.publish(state, 0, 0)
    }

    /// After a switch: the report (or the abandoned GC's error), once; with `delete_now`, first a
    /// second publish so that both slots are post-GC and the deletions, done at once.
    fn gc_result(&mut self, delete_now: bool) -> Result<Option<GcReport>> {
        if let Some(e) = self.gc_after.failed.take() {
            return Err(e);
        }
        if self.gc_after.report.is_none() {
            return Ok(None);
        }
        // The disk at the switch, before anything is unlinked (part of the peak).
        let at_switch = self.disk_bytes()?;
        if let Some(report) = self.gc_after.report.as_mut() {
            report.disk_peak = report.disk_peak.max(at_switch);
        }
        if delete_now {
            self.gc_delete_retired_now()?;
        }
        let disk_after = if delete_now { self.disk_bytes()? } else { at_switch };
        let waiting = self.gc_waiting_bytes();
        let Some(mut report) = self.gc_after.report.take() else { return Ok(None) };
        report.disk_after = disk_after;
        report.disk_peak = report.disk_peak.max(disk_after);
        report.bytes_waiting = waiting;
        Ok(Some(report))
    }

    /// Unlinks the retired files now, on this thread: one more publish makes both slots post-GC.
    /// Nothing to do without retired files.
    pub(crate) fn gc_delete_retired_now(&mut self) -> Result<()> {
        if self.gc_after.retired.is_empty() || !self.writable || self.poisoned {
            return Ok(());
        }
        let mut state = self.state.clone();
        let sync_delete = std::mem::replace(&mut self.gc_after.sync_delete, true);
        let outcome = (|| {
            self.files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
            state.index_synced = state.index_end;
            self.write_switch(&mut state)
        })();
        self.gc_after.sync_delete = sync_delete;
        if outcome.is_err() {
            self.poisoned = true;
        }
        outcome?;
        self.state = state;
        Ok(())
    }

    /// At close: deletions happen on this thread (a background unlink would not outlive the
    /// process).
    pub(crate) fn gc_delete_synchronously(&mut self) {
        self.gc_after.sync_delete = true;
    }

    fn gc_waiting_bytes(&self) -> u64 {
        let dir = self.source.reader.layout().directory().clone();
        self.gc_after
            .retired
            .iter()
            .flat_map(|retired| retired.files.iter())
            .map(|name| dir.open(name, false).and_then(|file| file.len()).unwrap_or(0))
            .sum()
    }

    /// Whether a GC's worker is done and waits for the switch.
    pub(crate) fn gc_ready(&self) -> bool {
        self.gc.as_ref().is_some_and(|run| run.is_finished())
    }
}

/// The report of a sliced GC so far, with its next slice's.
fn merge_slices(so_far: GcReport, next: GcReport) -> GcReport {
    let mut merged_segments = so_far.merged_segments;
    merged_segments.extend(next.merged_segments);
    let mut branches_removed = so_far.branches_removed;
    branches_removed.extend(next.branches_removed);
    GcReport {
        disk_before: so_far.disk_before,
        disk_peak: so_far.disk_peak.max(next.disk_peak),
        region_bytes: so_far.region_bytes + next.region_bytes,
        live_records: so_far.live_records + next.live_records,
        copied_bytes: so_far.copied_bytes + next.copied_bytes,
        base_only_records: so_far.base_only_records + next.base_only_records,
        chunks_removed: so_far.chunks_removed + next.chunks_removed,
        branches_removed,
        mark_time: so_far.mark_time + next.mark_time,
        window_bytes: so_far.window_bytes + next.window_bytes,
        window_summarised_bytes: so_far.window_summarised_bytes + next.window_summarised_bytes,
        copy_time: so_far.copy_time + next.copy_time,
        switch_pause: so_far.switch_pause.max(next.switch_pause),
        total_time: so_far.total_time + next.total_time,
        deep_mark: so_far.deep_mark || next.deep_mark,
        segments_marked: so_far.segments_marked.max(next.segments_marked),
        merged_segments,
        segments_garbage: so_far.segments_garbage.max(next.segments_garbage),
        kept_in_place: so_far.kept_in_place.or(next.kept_in_place),
        ..next
    }
}

#[path = "gc_switch.rs"]
mod switch;

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
