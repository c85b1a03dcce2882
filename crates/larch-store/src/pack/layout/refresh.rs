//! A read-only layout that follows a writer's GC by itself (issue 39: read-only handles beside a
//! GC). A reader's layout names the files of the state it loaded; a GC in the writer's process may
//! retire (unlink) chunks of that state since. A file the layout still holds open stays readable,
//! but one whose descriptor the pool had closed ([`crate::pack::handles`]) is gone when it is
//! opened again: [`StoreError::MissingFile`]. The global offsets of the records a GC keeps do not
//! change (they are copied into a segment that maps them), so the read is answered by the layout of
//! the newer published state.
//!
//! [`Layout::read`] therefore, on a `MissingFile`, asks the layout's *refresh hook* (set by the
//! handle that owns it, [`Layout::set_refresh`]: it reads the control file and opens the layout of
//! the published state, if that state names other files than this layout's) for a newer layout,
//! swaps it in place ([`Layout::replace_with`], so every tree checked out through the handle
//! follows), and reads again: at most [`MAX_REFRESHES`] times per read. Refreshes are serialized,
//! and a read that failed on a layout another thread has since replaced reads again without a
//! refresh of its own. After a refresh, an offset below every file of the new layout is a
//! collected object ([`StoreError::CollectedObject`]), never `MissingFile`.

use super::Layout;
use crate::error::{Result, StoreError};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Refreshes of one read at most: each follows a GC that switched while the read went on.
pub const MAX_REFRESHES: u32 = 4;

/// A layout's refresh hook: given the layout as it is, the layout of the newer published state,
/// or `None` when the published state names the same files (the missing file is then damage, and
/// the read fails with it).
pub type RefreshHook = dyn Fn(&Layout) -> Result<Option<Layout>> + Send + Sync;

/// What a layout knows of its refreshes (see the module documentation).
#[derive(Default)]
pub(crate) struct Refresher {
    hook: OnceLock<Arc<RefreshHook>>,
    /// Held while a refresh runs.
    lock: Mutex<()>,
    /// Bumped by every [`Layout::replace_with`]: a read that failed on an older epoch retries.
    epoch: AtomicU64,
    /// Refreshes done (a read that found a file gone and swapped in a newer layout).
    count: AtomicU64,
    /// The GC generation of the state whose files the layout holds.
    gc_generation: AtomicU64,
    /// That state's oldest kept record (`ControlState::keep_from`): the records below it were
    /// collected, even those a segment's run still happens to hold.
    keep_from: AtomicU64,
}

impl fmt::Debug for Refresher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refresher")
            .field("hook", &self.hook.get().is_some())
            .field("epoch", &self.epoch.load(Ordering::Relaxed))
            .field("count", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl Refresher {
    /// A refresher for a layout of a state of GC generation `gc_generation` whose oldest kept
    /// record is at `keep_from`.
    pub(crate) fn at(gc_generation: u64, keep_from: u64) -> Refresher {
        Refresher {
            gc_generation: AtomicU64::new(gc_generation),
            keep_from: AtomicU64::new(keep_from),
            ..Refresher::default()
        }
    }
}

impl Layout {
    /// Sets the hook that gives this (read-only) layout a newer one when a file it names is gone;
    /// only the first call sets it.
    pub fn set_refresh(&self, hook: Arc<RefreshHook>) {
        let _ = self.refresher.hook.set(hook);
    }

    /// The GC generation of the published state whose files this layout holds.
    pub fn gc_generation(&self) -> u64 {
        self.refresher.gc_generation.load(Ordering::Relaxed)
    }

    /// The oldest kept record of the published state whose files this layout holds (0 before
    /// any GC): a commit below it was collected.
    pub fn keep_from(&self) -> u64 {
        self.refresher.keep_from.load(Ordering::Relaxed)
    }

    /// Records that the layout holds the files of a state of GC generation `gc_generation` whose
    /// oldest kept record is at `keep_from`.
    pub(crate) fn set_published(&self, gc_generation: u64, keep_from: u64) {
        self.refresher.gc_generation.store(gc_generation, Ordering::Relaxed);
        self.refresher.keep_from.store(keep_from, Ordering::Relaxed);
    }

    /// How many times this layout was replaced (a reload or a refresh): changes when it does.
    pub fn epoch(&self) -> u64 {
        self.refresher.epoch.load(Ordering::Acquire)
    }

    /// Reads that found a chunk file gone and were answered through a newer layout
    /// ([`Layout::read`]).
    pub fn refreshes(&self) -> u64 {
        self.refresher.count.load(Ordering::Relaxed)
    }

    /// Takes the extents of `other` (a reader's reload across a GC: the same global offsets, new
    /// files). Descriptors of files no longer named are closed when their last user drops them.
    pub fn replace_with(&self, other: Layout) {
        let (gc_generation, keep_from) = (other.gc_generation(), other.keep_from());
        let new = other.extents.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut extents = self.extents.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        *extents = new;
        self.set_published(gc_generation, keep_from);
        self.refresher.epoch.fetch_add(1, Ordering::Release);
    }

    /// Reads `buf.len()` bytes at global offset `global`, across extents if needed. An offset
    /// below the first extent is [`StoreError::Unmapped`]. A chunk file gone since this layout was
    /// opened is looked for in the newer published state (see the module documentation).
    pub fn read(&self, global: u64, buf: &mut [u8]) -> Result<()> {
        let mut refreshed = 0;
        loop {
            let epoch = self.epoch();
            let error = match self.read_once(global, buf) {
                Err(error @ StoreError::MissingFile { .. }) if refreshed < MAX_REFRESHES => error,
                Err(StoreError::Unmapped { offset }) if refreshed > 0 => {
                    return Err(StoreError::CollectedObject { offset, gc_generation: self.gc_generation() });
                }
                other => return other,
            };
            let Some(hook) = self.refresher.hook.get() else { return Err(error) };
            let _refreshing = self.refresher.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            refreshed += 1;
            // Another thread replaced the layout since this read began: read again.
            if self.epoch() != epoch {
                continue;
            }
            match hook(self)? {
                Some(fresh) => {
                    self.replace_with(fresh);
                    self.refresher.count.fetch_add(1, Ordering::Relaxed);
                }
                None => return Err(error),
            }
        }
    }
}
