//! The process's allocator (mimalloc) and the two settings larch makes for it: its purge delay,
//! and no transparent huge pages.
//!
//! **Purge delay.**
//! mimalloc gives the pages of freed memory back to the OS (`MADV_DONTNEED`) once they have been
//! free for its *purge delay* (1 s by default); the next allocation there faults the page in again
//! and the kernel zeroes it. A replay frees and reallocates decoded nodes and copied directories
//! all the time, so pages went back and forth: `clear_page_erms` and page faults were ~3% of the
//! replay thread. A delay of 10 s (with the pipelined replay's cache at 96 MiB) made the default
//! replay 1.02–1.10× faster in 4 alternated pairs (docs/benchmarks.md at c117370, "Issue 11, ninth round"),
//! but still took 2,418 page faults (huge pages zeroed) where never purging takes 379; a delay
//! of 60 s runs as never purging does, which ran 0.94–1.10× (1.02–1.10× in 7 of 8 pairs) the
//! speed of 10 s, peak RSS +0–10 MiB ("Issue 11, tenth round"). Memory idle for longer than a
//! minute is still given back, and while a GC runs `larch replay` gives freed memory back every
//! 2 s (`cmd_replay.rs`, `RELEASE_DURING_GC`): on the mainnet rung the minute's freed pages,
//! with a GC's, took the peak RSS past 400 MB. A `MIMALLOC_PURGE_DELAY` in the environment
//! (mimalloc's own setting) is left as it is.
//!
//! **No transparent huge pages.** By default mimalloc asks the kernel for 2 MiB pages
//! (`MADV_HUGEPAGE`). On the shared VMs larch is measured on, a huge page that has been free for a
//! couple of seconds has been handed back to the host (virtio-balloon free page reporting), and
//! touching it again costs 0.9–2.3 ms per MiB (`scripts/page_refault_cost.py`), against ~0.37 ms
//! per MiB for 4 KiB pages: the first large burst of a replay, which grows the heap by 10–20 MiB,
//! took up to ~40 ms of CPU in such faults. With huge pages off (docs/benchmarks.md at c117370, "Issue 11,
//! sixteenth round"; 16 alternated pairs of default replays): peak RSS 208–220 MiB against
//! 229–253, speed 1.02× (median), no run with a block over 100 ms against 3 of 16. They are
//! switched off for the whole process (`prctl(PR_SET_THP_DISABLE)`, what mimalloc itself does for
//! `MIMALLOC_ALLOW_THP=0`); a `MIMALLOC_ALLOW_THP` in the environment is left to mimalloc.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the 16th member of its `mi_option_e`, in both mimalloc 2
/// and 3; `libmimalloc-sys` names no constant for it). A test checks it by its default value.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay larch sets, in milliseconds.
const PURGE_DELAY_MS: std::os::raw::c_long = 60_000;

/// Sets the allocator's purge delay to [`PURGE_DELAY_MS`] and turns transparent huge pages off
/// for the process, each unless the environment chose it.
pub fn tune() {
    tune_purge_delay();
    tune_huge_pages();
}

/// Sets the purge delay to [`PURGE_DELAY_MS`] unless the environment chose one.
fn tune_purge_delay() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` stores an integer into mimalloc's option table (any thread, any
        // time: the allocator reads the option each time it schedules a purge); the option
        // index is a member of `mi_option_e`, checked by the test below.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

/// Turns transparent huge pages off unless the environment set `MIMALLOC_ALLOW_THP`.
fn tune_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        disable_huge_pages();
    }
}

/// Turns transparent huge pages off for the whole process (memory already in huge pages stays so).
/// A kernel without the setting (before Linux 3.15) keeps them: nothing else changes.
#[cfg(target_os = "linux")]
fn disable_huge_pages() {
    // SAFETY: `PR_SET_THP_DISABLE` sets a flag of the calling process; with these arguments prctl
    // reads and writes no memory of ours. It has no safe wrapper in the crates larch uses.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(not(target_os = "linux"))]
fn disable_huge_pages() {}

/// Whether transparent huge pages are off for this process (`PR_GET_THP_DISABLE`).
#[cfg(all(test, target_os = "linux"))]
fn huge_pages_disabled() -> bool {
    // SAFETY: `PR_GET_THP_DISABLE` returns the calling process's flag and touches no memory.
    unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
}

/// The allocator's purge delay now, in milliseconds (-1: never).
#[cfg(test)]
fn purge_delay() -> std::os::raw::c_long {
    // SAFETY: `mi_option_get` reads mimalloc's option table; the index is a member of `mi_option_e`.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

/// Gives the memory freed so far back to the OS at once, whatever the purge delay: after a
/// streamed setup, whose parts' trees are freed and would otherwise stay resident for a minute.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` has no preconditions; it only purges this thread's free pages and
    // those of abandoned heaps.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Option 15 defaults to 1000 ms, the default of mimalloc's purge delay and of no other
        // option near it: the index names the purge delay. (The environment may set it.)
        let from_env = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok());
        assert_eq!(super::purge_delay(), from_env.unwrap_or(1000));
        super::tune_purge_delay();
        assert_eq!(super::purge_delay(), from_env.unwrap_or(super::PURGE_DELAY_MS));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn tuning_turns_huge_pages_off_unless_the_environment_chose() {
        let before = super::huge_pages_disabled();
        super::tune_huge_pages();
        let chosen = std::env::var_os("MIMALLOC_ALLOW_THP").is_some();
        assert_eq!(super::huge_pages_disabled(), if chosen { before } else { true });
        if !chosen {
            // The kernel's own view of the process agrees (Linux 5.0 and later print it).
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            if let Some(line) = status.lines().find(|line| line.starts_with("THP_enabled:")) {
                assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
            }
        }
    }
}
