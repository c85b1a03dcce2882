//! Stores built beside their final place (`larch snapshot import`, `larch import irmin`): in the
//! hidden directory `.NAME.importing-PID` next to `NAME`, renamed to `NAME` only when complete. A
//! build killed midway leaves its directory behind; the next build beside the same target removes
//! it, once its process is gone and no writer holds its store.

use crate::error::{Result, StoreError};
use std::fs::File;
use std::path::{Path, PathBuf};

/// What a build directory's name carries between the target's name and the process id.
const MARK: &str = ".importing-";

/// The directory a process builds the store `target` in: `.NAME.importing-PID` beside it.
pub fn build_dir(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    parent_of(target).join(format!(".{name}{MARK}{}", std::process::id()))
}

fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The process id a build directory of `target` named `name` carries (`.NAME.importing-PID`, or
/// `NAME.importing-PID` as earlier versions named it), if it is one.
fn builder_of(target_name: &str, name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.').unwrap_or(name).strip_prefix(target_name)?.strip_prefix(MARK)?;
    rest.bytes().all(|b| b.is_ascii_digit()).then(|| rest.parse().ok()).flatten()
}

/// Whether process `pid` is alive (Linux: `/proc/PID` exists; elsewhere assumed alive).
fn alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new("/proc").join(pid.to_string()).exists() } else { true }
}

/// Whether a writer holds the store in `dir` (its directory lock, as [`crate::Repo`] takes it).
fn locked(dir: &Path) -> bool {
    let Ok(handle) = File::open(dir) else { return false };
    let free = matches!(fs4::fs_std::FileExt::try_lock_exclusive(&handle), Ok(true));
    if free {
        let _ = fs4::fs_std::FileExt::unlock(&handle);
    }
    !free
}

/// Removes the build directories of `target` left by builds that died: those whose process is
/// gone and whose store no writer holds. Never one of a live process. Returns the directories
/// removed, for the caller to report.
pub fn remove_stale_builds(target: &Path) -> Result<Vec<PathBuf>> {
    let Some(target_name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(Vec::new());
    };
    let parent = parent_of(target);
    let dir_error = |path: &Path, op, source| StoreError::Directory { path: path.into(), op, source };
    let entries = match std::fs::read_dir(&parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(dir_error(&parent, "list", e)),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| dir_error(&parent, "list", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = builder_of(&target_name, &name) else { continue };
        let path = entry.path();
        if pid == std::process::id() || alive(pid) || !path.is_dir() || locked(&path) {
            continue;
        }
        std::fs::remove_dir_all(&path).map_err(|e| dir_error(&path, "remove a stale build", e))?;
        removed.push(path);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The id of a process that has exited (a child run and waited for).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn names_are_recognised_only_for_their_target() {
        assert_eq!(builder_of("ctx", ".ctx.importing-42"), Some(42));
        assert_eq!(builder_of("ctx", "ctx.importing-42"), Some(42));
        assert_eq!(builder_of("ctx", ".ctx2.importing-42"), None);
        assert_eq!(builder_of("ctx", ".ctx.importing-4x"), None);
        assert_eq!(builder_of("ctx", ".ctx.importing-"), None);
        assert_eq!(builder_of("ctx", "ctx"), None);
    }

    #[test]
    fn only_the_builds_of_dead_processes_without_a_writer_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("ctx");
        let dead = dead_pid();
        let stale = root.path().join(format!(".ctx.importing-{dead}"));
        let stale_old_name = root.path().join(format!("ctx.importing-{}", dead_pid()));
        let ours = build_dir(&target);
        let live = root.path().join(format!(".ctx.importing-{}", std::os::unix::process::parent_id()));
        let other_target = root.path().join(format!(".other.importing-{dead}"));
        let held = root.path().join(format!(".ctx.importing-{}", dead_pid()));
        for dir in [&stale, &stale_old_name, &ours, &live, &other_target, &held] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("control"), b"x").unwrap();
        }
        // A writer (this test) holds the store in `held`.
        let lock = File::open(&held).unwrap();
        assert!(matches!(fs4::fs_std::FileExt::try_lock_exclusive(&lock), Ok(true)));
        let mut removed = remove_stale_builds(&target).unwrap();
        removed.sort();
        let mut want = vec![stale.clone(), stale_old_name.clone()];
        want.sort();
        assert_eq!(removed, want);
        for kept in [&ours, &live, &other_target, &held] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(!stale.exists() && !stale_old_name.exists());
    }
}
