//! The system allocator, counting the bytes live and their peak: the global allocator of the
//! test binaries that measure a run's heap (`streamed_memory.rs`, `streamed_burst_memory.rs`;
//! each holds one test, so that no other test allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live ([`LIVE`]) and their peak ([`PEAK`]).
pub struct Counting;

/// Bytes allocated and not freed yet.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live at once since it was last reset.
pub static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator with the same arguments; the counters
// do not affect the allocations.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
