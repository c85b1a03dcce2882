//! How larch's helper threads share the CPU with the thread they work for.
//!
//! A replay's reading thread is busy all the time, and its helpers (the trace reader, the cache's
//! dropping thread) sleep until it hands them work. A helper woken by it was placed on its core and,
//! as an ordinary thread, took that core at once: the reading thread then waited, ~0.6 s of a 13 s
//! replay (docs/benchmarks.md at c117370, "Issue 11, nineteenth round"). A helper marked here waits instead for
//! the running thread's time slice to end, or runs on the other core if that one is free.

/// Marks the calling thread as a helper that does not preempt a running thread when it wakes: the
/// Linux policy `SCHED_BATCH` (the same nice value and share of the CPU as an ordinary thread; only
/// the preemption on wakeup goes). Elsewhere it does nothing. Returns whether the policy was set:
/// a system that refuses it leaves the thread as it was, which is only slower.
pub fn mark_helper_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` reads the `sched_param` we pass, which lives across the
        // call, and changes only the calling thread's (pid 0) scheduling policy; it touches no
        // other memory of ours. There is no safe wrapper for it in `std`.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Lowers the calling thread's priority to `nice` (on Linux; elsewhere it does nothing): the
/// thread yields the CPU to ordinary threads when they compete for it. A failure leaves the
/// priority as it was, which is only slower for the others.
pub fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` has no preconditions; `setpriority` on this thread's id only changes
        // its scheduling weight and touches no memory of ours. There is no safe wrapper in `std`.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
    }
}

/// Whether the calling thread runs as a helper ([`mark_helper_thread`]); `false` off Linux.
pub fn is_helper_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getscheduler` of the calling thread (pid 0) only reads its policy.
        unsafe { libc::sched_getscheduler(0) == libc::SCHED_BATCH }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_thread_runs_as_a_helper_and_others_do_not() {
        let marked = std::thread::spawn(|| (mark_helper_thread(), is_helper_thread())).join();
        let other = std::thread::spawn(is_helper_thread).join();
        #[cfg(target_os = "linux")]
        {
            assert_eq!(marked.ok(), Some((true, true)), "SCHED_BATCH is allowed to any thread");
            assert_eq!(other.ok(), Some(false), "a thread not marked keeps the ordinary policy");
        }
        #[cfg(not(target_os = "linux"))]
        {
            assert_eq!(marked.ok(), Some((false, false)));
            assert_eq!(other.ok(), Some(false));
        }
    }
}
