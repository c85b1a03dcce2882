//! Thread priorities: the store's helper threads yield the CPU to the writer and readers.

/// Lowers the calling thread's priority (nice +10 by default for the GC worker, +19 for the
/// prefetching thread, on Linux): the thread yields the CPU to the writer and readers when they
/// compete for it (docs/gc-design.md §5).
pub(crate) fn lower_priority(nice: i32) {
    larch_core::lower_thread_priority(nice);
}
