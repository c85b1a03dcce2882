//! The process's descriptor limit, raised at start.
//!
//! A store handle keeps at most `RepoOptions::open_files` sealed chunk files open (192 by default)
//! plus a few files of its own, so larch runs under the common soft limit of 1,024 descriptors;
//! but `larch serve` holds a socket per connection, and a user may ask for more open chunk files.
//! So the soft `RLIMIT_NOFILE` is raised toward the hard limit, up to [`TARGET`] (never lowered).
//! Where the system forbids it, larch runs with the limit it was given.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The soft limit asked for, when the hard limit allows it.
pub const TARGET: u64 = 65_536;

/// Raises the soft limit on open descriptors toward the hard limit (at most [`TARGET`]).
/// Returns the soft limit in force afterwards (`None`: unlimited).
pub fn raise_open_files() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    let target = limit.maximum.map_or(TARGET, |hard| hard.min(TARGET));
    match limit.current {
        Some(soft) if soft < target => {
            let raised = Rlimit { current: Some(target), maximum: limit.maximum };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => Some(target),
                Err(_) => Some(soft),
            }
        }
        other => other,
    }
}
