//! The writer's side of garbage collection: starting a GC, its slices, waiting for it, and (in
//! `switch`) adopting its result with a publish. The engine it drives is in [`crate::gc`].

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::gc::mark::MarkBounds;
#[cfg(feature = "fault-injection")]
use crate::gc::mark::{GcMark, mark};
use crate::gc::policy::{Compaction, GcOptions, GcPolicy, SegmentStat};
use crate::gc::report::{GcPhase, GcProgress, GcReport};
use crate::gc::run::GcRun;
use crate::gc::worker::{Counters, Job, LiveSets, SliceCarry, work};
use crate::repo::Repo;
use larch_core::Hash;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

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
        let Some(next) = self.gc_after.next_slice.take() else {
            return Ok(false);
        };
        self.gc_start_slice(
            &next.commit,
            next.options,
            next.slice,
            Some((next.disk_before, next.carry, next.late_roots)),
        )?;
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

    /// Starts a GC's slice; a later slice counts its disk peak from the GC's start and takes the
    /// first slice's mark instead of marking again.
    fn gc_start_slice(
        &mut self,
        commit: &Hash,
        options: GcOptions,
        slice: u32,
        later: Option<(u64, Box<SliceCarry>, crate::gc::late_roots::LateRoots)>,
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
        // One per entry of the slot (chunks kept in place under one entry are merged together).
        let segments: Vec<SegmentStat> = crate::pack::layout::entries_of(&layout.segments())
            .into_iter()
            .map(|(entry, record_bytes, file_len)| SegmentStat {
                range_start: entry.range_start,
                range_end: entry.range_end,
                record_bytes,
                file_len,
            })
            .collect();
        // One new segment per GC for the newly old chunks (the mandatory part of the region,
        // from the end of the segments); the policy chooses the old segments to mark, and the
        // worker, once it knows their live bytes, those to merge (docs/gc-design.md §6).
        let newly_old = holding_start.saturating_sub(layout.first_chunk_start());
        let region_start = segments.last().map_or(PACK_HEADER_LEN, |last| last.range_end);
        let region_end = holding_start.max(region_start);
        let (disk_before, carry) = match later {
            Some((bytes, carry, late_roots)) => {
                // The commits written since the last slice switched point below the GC commit
                // only to records the carried mark keeps in full; else this slice marks anew
                // (the old segments below `region_start` are kept whole).
                let sets = LiveSets {
                    live: &carry.live,
                    base_only: &carry.base_only,
                    boundary_full: &carry.boundary_full,
                };
                let layout = self.source.reader.layout().clone();
                let read = |offset: u64, buf: &mut [u8]| layout.read(offset, buf);
                let safe = sets
                    .first_unsafe(late_roots.sorted_from(region_start), region_end, keep_from, &read)
                    .is_none();
                (bytes, safe.then_some(carry))
            }
            None => (self.disk_bytes()?, None),
        };
        // Planned never to happen; were the list full, the slice marks and merges as a first one.
        let carry = carry.filter(|_| segments.len() < crate::format::control::MAX_SEGMENTS);
        // A later slice marks nothing and merges nothing: the first slice planned the slices so
        // that the segment list never fills ([`crate::gc::worker::SliceCarry`]).
        let compaction = match carry {
            Some(_) => Compaction { slice_bytes: u64::MAX, ..Compaction::default() },
            None => crate::gc::policy::plan(
                &self.gc_after.policy,
                options,
                &segments,
                newly_old,
                state.gc_generation + 1,
                self.gc_after.baseline,
                disk_before,
            ),
        };
        // A compaction asked for has its own budget; an automatic GC's leaves room for the growth
        // its last run saw.
        let mut compaction = compaction;
        if !options.compact {
            compaction.leave_room_for(self.gc_after.appended_during_last);
        }
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
        let late_roots = Arc::new(Mutex::new(crate::gc::late_roots::LateRoots::default()));
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
            carry,
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
            joined: None,
            counters,
            late_roots,
            started: Instant::now(),
            disk_before,
            pack_end_at_start: state.pack_end,
            dir,
            options,
            slice,
        }));
        // The worker's memory (and the root summaries it keeps) comes out of the cache's budget
        // while it runs.
        // (At most half of the budget, or of the limit below it: `PackReader::set_cache_reserve`.)
        self.source
            .reader
            .set_cache_reserve(self.gc_after.policy.cache_reserve_bytes.saturating_add(summaries));
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

    /// The sum of the sizes of the store's files: one listing of the directory, and a length
    /// lookup for each file but the sealed chunk files, whose lengths are remembered.
    pub fn disk_bytes(&self) -> Result<u64> {
        self.source.reader.layout().disk_bytes()
    }

    /// Waits for the running GC's worker (if any) without switching.
    pub(crate) fn gc_join(&mut self) {
        if let Some(run) = self.gc.as_mut() {
            run.join();
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
        marks: so_far.marks + next.marks,
        mark_records: so_far.mark_records + next.mark_records,
        mark_reads: so_far.mark_reads + next.mark_reads,
        ..next
    }
}

impl Repo {
    /// The mark phase of a garbage collection keeping `commit` and every commit written after it
    /// (docs/gc-design.md §4), without collecting anything: the live records below `region_end`
    /// (which must not exceed the commit's record offset). The roots are taken from every record
    /// from the commit to the published end, or, with `until`, to the end of that later commit's
    /// record (the store as it was when `until` was the head: what a GC started then would see).
    /// A dry run of what a GC would copy.
    #[cfg(feature = "fault-injection")]
    pub fn gc_mark(&self, commit: &Hash, region_end: u64, until: Option<&Hash>) -> Result<GcMark> {
        let offset_of = |hash: &Hash| {
            self.commit_offset_of(hash)
                .ok_or_else(|| StoreError::GcRefused(format!("commit {hash} is not in the store")))
        };
        let keep_from = offset_of(commit)?;
        let scan_end = match until {
            None => self.control_state().pack_end,
            Some(until) => {
                let at = offset_of(until)?;
                let (_, total) = self.reader().with_record(at, |_, _| Ok(()))?;
                at + total
            }
        };
        let mut result = mark(self.reader(), MarkBounds { keep_from, region_end, scan_end })?;
        let reader = self.reader();
        result.live = result.runs.records(&|offset, buf| reader.read_raw(offset, buf))?;
        Ok(result)
    }
}

mod switch;

#[cfg(test)]
mod tests;
