//! The process's allocator (mimalloc) and the one option larch sets on it.
//!
//! mimalloc gives the pages of freed memory back to the OS (`MADV_DONTNEED`) once they have been
//! free for its *purge delay* (1 s by default); the next allocation there faults the page in again
//! and the kernel zeroes it. A replay frees and reallocates decoded nodes and copied directories
//! all the time, so pages went back and forth: `clear_page_erms` and page faults were ~3% of the
//! replay thread. A delay of 10 s (with the pipelined replay's cache at 96 MiB) made the default
//! replay 1.02–1.10× faster in 4 alternated pairs (docs/benchmarks.md, "Issue 11, ninth round"),
//! but still took 2,418 page faults (huge pages zeroed) where never purging takes 379; a delay
//! of 60 s runs as never purging does, which ran 0.94–1.10× (1.02–1.10× in 7 of 8 pairs) the
//! speed of 10 s, peak RSS +0–10 MiB ("Issue 11, tenth round"). Memory idle for longer than a
//! minute is still given back. A `MIMALLOC_PURGE_DELAY` in the environment (mimalloc's own
//! setting) is left as it is.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the 16th member of its `mi_option_e`, in both mimalloc 2
/// and 3; `libmimalloc-sys` names no constant for it). A test checks it by its default value.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay larch sets, in milliseconds.
const PURGE_DELAY_MS: std::os::raw::c_long = 60_000;

/// Sets the allocator's purge delay to [`PURGE_DELAY_MS`] unless the environment chose one.
pub fn tune() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` stores an integer into mimalloc's option table (any thread, any
        // time: the allocator reads the option each time it schedules a purge); the option
        // index is a member of `mi_option_e`, checked by the test below.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

/// The allocator's purge delay now, in milliseconds (-1: never).
#[cfg(test)]
fn purge_delay() -> std::os::raw::c_long {
    // SAFETY: `mi_option_get` reads mimalloc's option table; the index is a member of `mi_option_e`.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Option 15 defaults to 1000 ms, the default of mimalloc's purge delay and of no other
        // option near it: the index names the purge delay. (The environment may set it.)
        let from_env = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok());
        assert_eq!(super::purge_delay(), from_env.unwrap_or(1000));
        super::tune();
        assert_eq!(super::purge_delay(), from_env.unwrap_or(super::PURGE_DELAY_MS));
    }
}
