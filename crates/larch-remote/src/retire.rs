//! The writer's journal of retired chunks, and its sweep. When a GC retires a chunk
//! ([`larch_store::Directory::remove`] on the lower layer), its name is first written durably to
//! `retired/` in the cache directory; then the spooled copy (if any) is removed and the chunk's
//! objects are deleted (the `.sums` object first: an object without one is never trusted). The
//! journal entry goes once both deletions succeeded. So:
//!
//! - an upload in flight when its chunk is retired cannot resurrect it: the uploader checks the
//!   journal after its verification, under [`Retired::gate`] (which the retirement also takes
//!   around its journal entry and its removal of the spooled copy), and deletes what it
//!   uploaded instead of writing the `.sums` object;
//! - a deletion that failed (object store unreachable, an error answer) or was cut short by a
//!   crash is retried by the writer's upload thread ([`sweep`]) with backoff, and at the writer's
//!   next open. Readers never sweep (they have no journal and never write the bucket).

use crate::client::Client;
use crate::error::{RemoteError, local};
use crate::sums::SUMS_SUFFIX;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The journal's directory in the cache directory.
pub const RETIRED_DIR: &str = "retired";

/// The retired chunks whose objects may still be in the bucket.
#[derive(Debug)]
pub struct Retired {
    dir: PathBuf,
    names: Mutex<BTreeSet<String>>,
    gate: Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Retired {
    /// The journal in `dir` (created when absent), with the entries an earlier writer left.
    pub fn open(dir: &Path) -> Result<Retired, RemoteError> {
        std::fs::create_dir_all(dir).map_err(|e| local(dir, "create", e))?;
        let mut names = BTreeSet::new();
        for entry in std::fs::read_dir(dir).map_err(|e| local(dir, "list", e))? {
            let name = entry.map_err(|e| local(dir, "list", e))?.file_name().to_string_lossy().into_owned();
            if crate::upload::larch_store_names::is_chunk(&name) {
                names.insert(name);
            }
        }
        Ok(Retired { dir: dir.to_path_buf(), names: Mutex::new(names), gate: Mutex::new(()) })
    }

    /// The gate between an upload's last step (checking the journal, writing the `.sums` object,
    /// removing the spooled copy) and a retirement (its journal entry and its removal of the
    /// spooled copy): one of them sees the other's effect.
    pub fn gate(&self) -> MutexGuard<'_, ()> {
        lock(&self.gate)
    }

    /// Records `name` as retired, durably (file and directory synced).
    pub fn mark(&self, name: &str) -> Result<(), RemoteError> {
        if lock(&self.names).contains(name) {
            return Ok(());
        }
        let path = self.dir.join(name);
        std::fs::File::create(&path)
            .and_then(|file| file.sync_all())
            .map_err(|e| local(&path, "create", e))?;
        std::fs::File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| local(&self.dir, "sync", e))?;
        lock(&self.names).insert(name.to_string());
        Ok(())
    }

    /// Whether `name` is retired.
    pub fn contains(&self, name: &str) -> bool {
        lock(&self.names).contains(name)
    }

    /// The retired chunks whose objects may still be in the bucket.
    pub fn names(&self) -> Vec<String> {
        lock(&self.names).iter().cloned().collect()
    }

    /// Deletes the objects of the retired chunk `name` (its `.sums` object first), then its entry.
    pub fn delete(&self, client: &Client, name: &str) -> Result<(), RemoteError> {
        client.delete(&format!("{name}{SUMS_SUFFIX}"))?;
        client.delete(name)?;
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(local(&path, "remove", e)),
        }
        lock(&self.names).remove(name);
        Ok(())
    }
}

/// Deletes the objects of every retired chunk of the journal; the number deleted, or the first
/// failure (the rest wait for the next sweep).
pub fn sweep(retired: &Retired, client: &Client) -> Result<usize, RemoteError> {
    let names = retired.names();
    for name in &names {
        retired.delete(client, name)?;
    }
    Ok(names.len())
}
