//! Thread priorities: the store's helper threads yield the CPU to the writer and readers.

/// Lowers the calling thread's priority (nice +10 by default for the GC worker, +19 for the
/// prefetching thread, on Linux): the thread yields the CPU to the writer and readers when they
/// compete for it (docs/gc-design.md §5).
pub(crate) fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` has no preconditions; `setpriority` on this thread's id only changes
        // its scheduling weight and touches no memory of ours. A failure leaves the priority as
        // it was (nothing to undo).
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
        }
    }
}
