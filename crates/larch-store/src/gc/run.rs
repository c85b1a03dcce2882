//! Garbage collection, the engine (docs/gc-design.md §4–§5, docs/store.md *Garbage collection*).
//!
//! [`Repo::gc_start`] takes the GC commit `K`, the published layout as a snapshot and the end of
//! the pack, and spawns a worker thread (`larch-gc`) that marks the records of the *region* (the
//! chunks wholly below the chunk holding `K`, plus the old segments the compaction policy chose to
//! mark, [`crate::gc::policy`]) that kept commits still need ([`crate::gc::mark`]), decides which of
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

use crate::error::{Result, StoreError};
use crate::gc::late_roots::LateRoots;
use crate::gc::policy::{GcOptions, GcPolicy};
use crate::gc::report::GcReport;
use crate::gc::roots::RootSpans;
use crate::gc::worker::{Counters, SliceCarry, WorkerOutput, lock_roots};
use crate::io::storage::Directory;
use larch_core::Hash;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A GC started and not yet switched.
#[derive(Debug)]
pub(crate) struct GcRun {
    pub(crate) commit: Hash,
    pub(crate) keep_from: u64,
    pub(crate) generation: u64,
    /// The lowest start the region may get (the first marked segment's, else the end of the
    /// segments): late roots below it are in segments kept whole.
    pub(crate) floor: u64,
    pub(crate) region_end: u64,
    /// Whether the mark goes through every segment.
    pub(crate) deep: bool,
    /// The chunk holding `K`: the first live chunk after the switch.
    pub(crate) first_chunk: u32,
    pub(crate) handle: Option<JoinHandle<Result<WorkerOutput>>>,
    /// The worker's result once joined ([`GcRun::join`]) before the switch took it.
    pub(crate) joined: Option<Result<WorkerOutput>>,
    pub(crate) counters: Arc<Counters>,
    /// Targets below `K` of the pointers the writer wrote to existing records since the start
    /// (late roots), not yet checked: the worker drains and checks them once its mark is done;
    /// the writer checks what is left at the switch.
    pub(crate) late_roots: Arc<Mutex<LateRoots>>,
    pub(crate) started: Instant,
    pub(crate) disk_before: u64,
    /// The pack's end when it started: what the writer appends meanwhile is measured from it.
    pub(crate) pack_end_at_start: u64,
    pub(crate) dir: Arc<dyn Directory>,
    /// The options, for the next slice.
    pub(crate) options: GcOptions,
    /// This slice's index within its GC.
    pub(crate) slice: u32,
}

impl GcRun {
    /// Offsets below which the writer's pointers are late roots.
    pub(crate) fn late_below(&self) -> u64 {
        self.keep_from
    }

    /// Adds the late roots of a commit written while the GC runs.
    pub(crate) fn add_late_roots(&mut self, mut roots: Vec<u64>) {
        // Sorted and deduplicated here, in place and outside the lock: the shared set's batch
        // stays small, and a large commit's roots are not copied.
        roots.retain(|root| *root >= self.floor);
        roots.sort_unstable();
        roots.dedup();
        // The set may keep this vector as its batch until its next merge: not with the room the
        // roots filtered or repeated here left.
        if roots.capacity() > 2 * roots.len() {
            roots.shrink_to_fit();
        }
        lock_roots(&self.late_roots).extend(roots);
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.joined.is_some() || self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the worker thread to end (blocking in `join`, not polling) and keeps its result.
    pub(crate) fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.joined = Some(join_worker(handle));
        }
    }

    /// The worker's result: kept by [`GcRun::join`], or joined now.
    pub(crate) fn take_result(&mut self) -> Result<WorkerOutput> {
        match (self.joined.take(), self.handle.take()) {
            (Some(result), _) => result,
            (None, Some(handle)) => join_worker(handle),
            (None, None) => Err(StoreError::GcAbandoned("the GC thread is gone".into())),
        }
    }
}

/// A finished GC ready to switch: its fields go into the slot being published.
#[derive(Debug)]
pub(crate) struct Switch {
    pub(crate) run: GcRun,
    pub(crate) output: WorkerOutput,
    pub(crate) checked: Instant,
    pub(crate) pause: Duration,
    pub(crate) branches_removed: Vec<String>,
}

/// Files retired by a switch, unlinked once a later publish made both slots post-GC.
#[derive(Debug)]
pub(crate) struct Retired {
    /// Control generation of the switch's publish.
    pub(crate) published_at: u64,
    pub(crate) files: Vec<String>,
}

/// The writer's GC state between runs.
#[derive(Debug, Default)]
pub(crate) struct GcAfter {
    /// The oldest kept commit (the last GC's), for [`StoreError::Collected`].
    pub oldest_kept: Option<Hash>,
    pub(crate) retired: Vec<Retired>,
    pub(crate) report: Option<GcReport>,
    pub(crate) failed: Option<StoreError>,
    /// Unlink retired files on the writer's thread (`gc_wait`), not on a background one.
    pub(crate) sync_delete: bool,
    /// The compaction policy.
    pub(crate) policy: GcPolicy,
    /// The deep-mark trigger's baseline: the segments' live bytes measured by the last deep mark
    /// (before any in this process: their record bytes after this handle's first GC).
    pub(crate) baseline: Option<u64>,
    /// A sliced GC's next slice.
    pub(crate) next_slice: Option<NextSlice>,
    /// Bytes the writer appended to the pack while the last GC (or slice) of this handle ran,
    /// from its start to its switch: the growth the next GC's copy budget leaves room for.
    pub(crate) appended_during_last: u64,
    /// The window's root summaries, from one GC's worker to the next ([`crate::gc::roots`]).
    pub(crate) root_spans: Arc<Mutex<RootSpans>>,
}

impl GcAfter {
    /// The state of a store opened with `oldest_kept` as its oldest kept commit.
    pub(crate) fn with_oldest_kept(oldest_kept: Option<Hash>) -> GcAfter {
        GcAfter { oldest_kept, ..GcAfter::default() }
    }
}

/// A sliced GC's next slice, due once the current one switched.
#[derive(Debug)]
pub(crate) struct NextSlice {
    /// The GC commit.
    pub(crate) commit: Hash,
    /// The GC's options.
    pub(crate) options: GcOptions,
    /// The slice's index within its GC.
    pub(crate) slice: u32,
    /// Bytes of the store's files when the GC started.
    pub(crate) disk_before: u64,
    /// The first slice's mark, for this slice and the later ones.
    pub(crate) carry: Box<SliceCarry>,
    /// The GC commit's record offset: pointers below it written before this slice starts are
    /// late roots too.
    pub(crate) keep_from: u64,
    /// Late roots of the commits written since the last slice switched, checked against `carry`
    /// when this slice starts (one that is not safe there makes it mark anew).
    pub(crate) late_roots: LateRoots,
}

/// Joins the GC worker thread: its result, or an abandoned GC if it panicked.
fn join_worker(handle: JoinHandle<Result<WorkerOutput>>) -> Result<WorkerOutput> {
    handle.join().unwrap_or_else(|_| Err(StoreError::GcAbandoned("the GC thread panicked".into())))
}
