//! The bounded disk cache of blocks read from object storage: one file per block
//! (`<chunk>.<block>` in the cache's `blocks/` directory), evicted least recently used first once
//! their bytes exceed the budget. Blocks are verified when fetched, written to a temporary name
//! and renamed, so a crash leaves no torn block under a block's name (temporary names are removed
//! at open); a block found at open is checked against its chunk's checksums again at its first hit. Hits and misses are counted.

use crate::error::{RemoteError, local};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Key = (String, u64);

/// How many cached blocks' files stay open for the next hits (a warm read is then one `pread`, as
/// on a local store, not an `open`, a `pread` and a `close`).
const OPEN_FILES: usize = 64;

#[derive(Debug, Default)]
struct State {
    /// Recency tick → block.
    order: BTreeMap<u64, Key>,
    /// Block → (tick, bytes, verified since this open).
    entries: HashMap<Key, (u64, u64, bool)>,
    used: u64,
    tick: u64,
}

/// What the cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Its budget in bytes.
    pub capacity: u64,
    /// The bytes it holds.
    pub used: u64,
    /// The blocks it holds.
    pub blocks: u64,
    /// Reads served from the cache.
    pub hits: u64,
    /// Reads that fetched a block from object storage.
    pub misses: u64,
}

impl CacheStats {
    /// Hits over all reads (0 when none).
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 { 0.0 } else { self.hits as f64 / total as f64 }
    }
}

/// A block cache on disk.
#[derive(Debug)]
pub struct BlockCache {
    dir: PathBuf,
    capacity: u64,
    state: Mutex<State>,
    /// Open files of recently hit blocks (at most [`OPEN_FILES`]; emptied when full). A block's
    /// file is dropped from it before the file is removed or replaced.
    open: Mutex<HashMap<Key, Arc<std::fs::File>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    temp: AtomicU64,
}

fn file_name(name: &str, block: u64) -> String {
    format!("{name}.{block}")
}

impl BlockCache {
    /// The cache in `dir` (created when absent) with a budget of `capacity` bytes; the blocks
    /// already there are kept within the budget.
    pub fn open(dir: &Path, capacity: u64) -> Result<BlockCache, RemoteError> {
        std::fs::create_dir_all(dir).map_err(|e| local(dir, "create", e))?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| local(dir, "list", e))? {
            let entry = entry.map_err(|e| local(dir, "list", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains(".tmp.") {
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            let Some((chunk, block)) = name.rsplit_once('.') else { continue };
            let Ok(block) = block.parse::<u64>() else { continue };
            let meta = entry.metadata().map_err(|e| local(&entry.path(), "stat", e))?;
            found.push((meta.modified().ok(), chunk.to_string(), block, meta.len()));
        }
        found.sort();
        let cache = BlockCache {
            dir: dir.to_path_buf(),
            capacity,
            state: Mutex::new(State::default()),
            open: Mutex::new(HashMap::new()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            temp: AtomicU64::new(0),
        };
        // Blocks found on disk (written before a crash, perhaps a power loss) are checked against
        // their chunk's checksums at their first hit.
        for (_, chunk, block, len) in found {
            cache.admit((chunk, block), len, false);
        }
        Ok(cache)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn open_files(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<std::fs::File>>> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes the kept file of `key`, if any (before its file is removed or replaced).
    fn close(&self, key: &Key) {
        self.open_files().remove(key);
    }

    /// Reads from the block's file, kept open for the next hits.
    fn read_open(&self, key: &Key, path: &Path, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let kept = self.open_files().get(key).cloned();
        let file = match kept {
            Some(file) => file,
            None => {
                let file = Arc::new(std::fs::File::open(path)?);
                let mut open = self.open_files();
                if open.len() >= OPEN_FILES {
                    open.clear();
                }
                open.insert(key.clone(), file.clone());
                file
            }
        };
        file.read_exact_at(buf, offset)
    }

    /// Records the block `key` of `len` bytes, then evicts the oldest blocks beyond the budget.
    fn admit(&self, key: Key, len: u64, verified: bool) {
        let mut evicted = Vec::new();
        {
            let mut state = self.lock();
            state.tick += 1;
            let tick = state.tick;
            if let Some((old, old_len, _)) = state.entries.insert(key.clone(), (tick, len, verified)) {
                state.order.remove(&old);
                state.used -= old_len;
            }
            state.order.insert(tick, key);
            state.used += len;
            while state.used > self.capacity {
                let Some((_, victim)) = state.order.pop_first() else { break };
                if let Some((_, victim_len, _)) = state.entries.remove(&victim) {
                    state.used -= victim_len;
                }
                evicted.push(victim);
            }
        }
        for (chunk, block) in evicted {
            self.close(&(chunk.clone(), block));
            let _ = std::fs::remove_file(self.dir.join(file_name(&chunk, block)));
        }
    }

    /// Reads `buf.len()` bytes at `offset` of the cached block `block` of `name`; `false` (a
    /// miss, counted) when the block is not cached. A block this process did not fetch itself (found
    /// in the directory at open) is read whole and passed to `verify` at its first hit; one that
    /// fails is dropped (a miss).
    pub fn read(
        &self,
        name: &str,
        block: u64,
        offset: u64,
        buf: &mut [u8],
        verify: impl Fn(&[u8]) -> bool,
    ) -> bool {
        let key = (name.to_string(), block);
        let cached = {
            let mut state = self.lock();
            state.tick += 1;
            let tick = state.tick;
            match state.entries.get_mut(&key) {
                Some((at, _, verified)) => {
                    let verified = *verified;
                    let old = std::mem::replace(at, tick);
                    state.order.remove(&old);
                    state.order.insert(tick, key.clone());
                    Some(verified)
                }
                None => None,
            }
        };
        let path = self.dir.join(file_name(name, block));
        let hit = match cached {
            None => false,
            Some(true) => self.read_open(&key, &path, buf, offset).is_ok(),
            Some(false) => {
                let whole = std::fs::read(&path).ok().filter(|bytes| verify(bytes));
                let piece = whole.as_ref().and_then(|bytes| {
                    let start = usize::try_from(offset).ok()?;
                    bytes.get(start..start.checked_add(buf.len())?)
                });
                match piece {
                    Some(piece) => {
                        buf.copy_from_slice(piece);
                        if let Some(entry) = self.lock().entries.get_mut(&key) {
                            entry.2 = true;
                        }
                        true
                    }
                    None => {
                        let mut state = self.lock();
                        if let Some((tick, len, _)) = state.entries.remove(&key) {
                            state.order.remove(&tick);
                            state.used -= len;
                        }
                        drop(state);
                        self.close(&key);
                        let _ = std::fs::remove_file(&path);
                        false
                    }
                }
            }
        };
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        hit
    }

    /// Keeps the (verified) block `block` of `name`. A failure to write is not an error: the
    /// block is fetched again next time.
    pub fn insert(&self, name: &str, block: u64, bytes: &[u8]) {
        if bytes.len() as u64 > self.capacity {
            return;
        }
        let final_path = self.dir.join(file_name(name, block));
        let tmp = self.dir.join(format!(
            "{}.tmp.{}.{}",
            file_name(name, block),
            std::process::id(),
            self.temp.fetch_add(1, Ordering::Relaxed)
        ));
        let key = (name.to_string(), block);
        self.close(&key);
        let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &final_path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.admit(key, bytes.len() as u64, true);
    }

    /// Forgets every block of `name` (its object was removed).
    pub fn forget(&self, name: &str) -> io::Result<()> {
        let keys: Vec<Key> = self.lock().entries.keys().filter(|(chunk, _)| chunk == name).cloned().collect();
        let mut state = self.lock();
        for key in keys {
            if let Some((tick, len, _)) = state.entries.remove(&key) {
                state.order.remove(&tick);
                state.used -= len;
                self.close(&key);
                let _ = std::fs::remove_file(self.dir.join(file_name(&key.0, key.1)));
            }
        }
        Ok(())
    }

    /// Its counters.
    pub fn stats(&self) -> CacheStats {
        let state = self.lock();
        CacheStats {
            capacity: self.capacity,
            used: state.used,
            blocks: state.entries.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_cache_stays_within_its_budget_and_counts_hits() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open(dir.path(), 250).unwrap();
        let mut buf = [0u8; 4];
        assert!(!cache.read("chunk.1", 0, 0, &mut buf, |_| true));
        cache.insert("chunk.1", 0, &[1; 100]);
        cache.insert("chunk.1", 1, &[2; 100]);
        assert!(cache.read("chunk.1", 0, 10, &mut buf, |_| true));
        assert_eq!(buf, [1; 4]);
        cache.insert("chunk.2", 0, &[3; 100]); // evicts chunk.1 block 1, the least recently used
        assert!(!cache.read("chunk.1", 1, 0, &mut buf, |_| true));
        assert!(cache.read("chunk.2", 0, 96, &mut buf, |_| true));
        let stats = cache.stats();
        assert_eq!((stats.used, stats.blocks, stats.hits, stats.misses), (200, 2, 2, 2));
        assert!((stats.hit_ratio() - 0.5).abs() < 1e-9);
        drop(cache);
        let reopened = BlockCache::open(dir.path(), 150).unwrap();
        assert_eq!(reopened.stats().blocks, 1);
        reopened.forget("chunk.2").unwrap();
        reopened.forget("chunk.1").unwrap();
        assert_eq!(reopened.stats().used, 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Warm hits read through a kept file; a block forgotten, evicted or inserted again is never
    /// read through the file it had before, and the kept files stay bounded.
    #[test]
    fn kept_files_follow_the_blocks_they_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open(dir.path(), 1 << 20).unwrap();
        let mut buf = [0u8; 4];
        cache.insert("chunk.1", 0, &[1; 100]);
        assert!(cache.read("chunk.1", 0, 0, &mut buf, |_| true));
        assert_eq!(cache.open_files().len(), 1);
        cache.insert("chunk.1", 0, &[7; 100]); // the object came back with other bytes
        assert!(cache.read("chunk.1", 0, 0, &mut buf, |_| true));
        assert_eq!(buf, [7; 4]);
        cache.forget("chunk.1").unwrap();
        assert!(!cache.read("chunk.1", 0, 0, &mut buf, |_| true));
        assert!(cache.open_files().is_empty());
        for block in 0..(OPEN_FILES as u64 * 2 + 3) {
            cache.insert("chunk.2", block, &[block as u8; 8]);
            assert!(cache.read("chunk.2", block, 4, &mut buf, |_| true));
            assert_eq!(buf, [block as u8; 4]);
            assert!(cache.open_files().len() <= OPEN_FILES);
        }
    }

    #[test]
    fn a_block_found_at_open_is_verified_at_its_first_hit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open(dir.path(), 1000).unwrap();
        cache.insert("chunk.1", 0, &[1; 100]);
        cache.insert("chunk.1", 1, &[2; 100]);
        drop(cache);
        // A power loss kept the right length but not the bytes of block 1.
        std::fs::write(dir.path().join("chunk.1.1"), [0u8; 100]).unwrap();
        let reopened = BlockCache::open(dir.path(), 1000).unwrap();
        let good = |bytes: &[u8]| bytes.iter().all(|b| *b != 0);
        let mut buf = [0u8; 4];
        assert!(reopened.read("chunk.1", 0, 0, &mut buf, good));
        assert_eq!(buf, [1; 4]);
        assert!(!reopened.read("chunk.1", 1, 0, &mut buf, good), "a damaged block is a miss");
        assert!(!dir.path().join("chunk.1.1").exists(), "and it is dropped");
        // Verified once: a later hit does not read the whole block again.
        assert!(reopened.read("chunk.1", 0, 8, &mut buf, |_| false));
        assert_eq!(reopened.stats().blocks, 1);
    }
}
