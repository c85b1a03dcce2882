//! What a garbage collection reports: its result ([`GcReport`]) and its progress while it runs
//! ([`GcProgress`], [`GcPhase`]).

use larch_core::Hash;
use std::time::Duration;

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
    /// The region's oldest chunks when they were kept in place instead of copied (each mostly
    /// live: [`crate::GcPolicy::keep_in_place_percent`]), in words (`chunk.000000`, or
    /// `chunk.000000 to chunk.000009 (10 chunks)`), with their bytes.
    pub kept_in_place: Option<(String, u64)>,
    /// Whether the mark went through every old segment (a deep mark, docs/gc-design.md §6).
    pub deep_mark: bool,
    /// Old segments marked (their live bytes measured).
    pub segments_marked: usize,
    /// Old segments merged into the new one (retired by the switch), one per entry of the segment
    /// list as `segments_marked` counts them (chunks kept in place under one entry: as in
    /// [`GcReport::kept_in_place`]).
    pub merged_segments: Vec<String>,
    /// Garbage found in the marked old segments (their record bytes minus their live bytes).
    pub segments_garbage: u64,
    /// Whether the GC is complete: `false` for a slice that left newly old chunks for the next
    /// slice (docs/gc-design.md §6), which [`crate::Repo::gc_finish`] starts at once and
    /// [`crate::Repo::gc_wait`] runs to the end. The commit's collection is published by the first
    /// slice; later slices only return disk.
    pub complete: bool,
    /// The slice's index within its GC (0: the first); in the report of [`crate::Repo::gc_wait`] (all the
    /// slices together), the last slice's.
    pub slice: u32,
    /// Marks run: 1 for a GC, however many slices it took (later slices take the first one's
    /// live set); 0 in the report of a later slice alone.
    pub marks: u32,
    /// Records the mark's traversal visited: each record below the GC commit that the kept
    /// commits reach (from the first marked segment up) exactly once.
    pub mark_records: u64,
    /// Records the mark read: those it visited, plus those read to decode the patches whose
    /// children it needs (the window's patches, and a patch's base once more when the small
    /// cache of decoded bases no longer holds it).
    pub mark_reads: u64,
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
