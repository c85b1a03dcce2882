//! The bytes a store's files take on disk, summed without a `stat` per file per call.
//!
//! A store of mainnet size holds hundreds of chunk files, and its size is sampled for every
//! block's statistics. A sealed chunk file never changes length (the writer rolled past it; only
//! a GC removes it, and its sequence number is never used again), so [`DiskUsage`] remembers the
//! lengths of the files its caller calls immutable and looks up on disk only the others (the head
//! chunk, the control and index files, GC segments): one listing and a few lookups per call,
//! whatever the store's size. A remembered file that the listing no longer shows (a GC retired
//! it) is forgotten, so the sum stays exact.

use super::storage::Directory;
use crate::error::{FileKind, Result, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Remembered lengths of a directory's immutable files (see the module documentation).
#[derive(Debug, Default)]
pub struct DiskUsage {
    /// Name → length of files known not to change.
    known: Mutex<HashMap<String, u64>>,
    /// Lengths looked up on disk so far ([`Directory::file_len`] calls).
    lookups: AtomicU64,
}

impl DiskUsage {
    /// The sum of the lengths of every file in `dir` now. The length of a file for which
    /// `immutable(name)` holds is looked up once and remembered while the file is listed.
    pub fn total(&self, dir: &dyn Directory, immutable: impl Fn(&str) -> bool) -> Result<u64> {
        let names = dir.list().map_err(|e| StoreError::io(FileKind::Pack, 0, "list", e))?;
        let mut known = self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Forget the files gone since the last call (`names` is sorted by `Directory::list`,
        // but not every implementation promises it: search it as a set).
        if !known.is_empty() {
            let listed: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
            known.retain(|name, _| listed.contains(name.as_str()));
        }
        let mut total = 0u64;
        for name in names {
            if let Some(len) = known.get(&name) {
                total += len;
                continue;
            }
            self.lookups.fetch_add(1, Ordering::Relaxed);
            match dir.file_len(&name) {
                Ok(len) => {
                    total += len;
                    if immutable(&name) {
                        known.insert(name, len);
                    }
                }
                // Unlinked between the listing and the look-up.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(FileKind::Pack, 0, "stat", e)),
            }
        }
        Ok(total)
    }

    /// Lengths looked up on disk so far (for tests and statistics).
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::storage::MemDirectory;

    #[test]
    fn immutable_lengths_are_looked_up_once_and_forgotten_when_removed() {
        let dir = MemDirectory::new();
        for (name, len) in [("chunk.000000", 100), ("chunk.000001", 200), ("chunk.000002", 7), ("control", 3)]
        {
            dir.insert(name, vec![0; len]);
        }
        let usage = DiskUsage::default();
        let sealed = |name: &str| name == "chunk.000000" || name == "chunk.000001";
        assert_eq!(usage.total(&dir, sealed).unwrap(), 310);
        assert_eq!(usage.lookups(), 4);
        // The mutable files grow: only they are looked up again, and the sum follows them.
        dir.insert("chunk.000002", vec![0; 50]);
        dir.insert("control", vec![0; 4]);
        assert_eq!(usage.total(&dir, sealed).unwrap(), 354);
        assert_eq!(usage.lookups(), 6);
        // A removed file leaves the sum; a new one enters it.
        dir.remove("chunk.000000").unwrap();
        dir.insert("seg.000001", vec![0; 9]);
        assert_eq!(usage.total(&dir, sealed).unwrap(), 263);
        assert_eq!(usage.lookups(), 9);
    }
}
