//! The commit index (`index/`, library mirage/index; spec §4.9): `log`, `log_async` and `data`,
//! each a 32-byte header, a fan-out table and 45-byte entries `hash ‖ offset ‖ length ‖ kind`.

use crate::bytes::Cursor;
use crate::error::{IrminError, Result};
use crate::layout::DataFile;
use larch_core::Hash;
use larch_core::ocaml_hash::ocaml_seeded_hash;
use std::collections::HashMap;
use std::path::Path;

/// Bytes of one index entry with 32-byte hashes.
pub const ENTRY_LEN: u64 = 45;
const HEADER_LEN: u64 = 32;

/// Where the index says an object lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The object's hash.
    pub hash: Hash,
    /// Its global pack offset.
    pub offset: u64,
    /// The whole entry's length in the pack.
    pub length: u32,
    /// Its kind magic (`D` for commits).
    pub kind: u8,
}

fn decode_entry(raw: &[u8], at: u64, path: &Path) -> Result<IndexEntry> {
    let mut cursor = Cursor::new(raw, at, path);
    let hash = cursor.hash("index key")?;
    let offset = cursor.int63("index offset")?;
    let length = cursor.int32("index length")?;
    let kind = cursor.byte("index kind")?;
    Ok(IndexEntry { hash, offset, length, kind })
}

/// One index file's valid entries: `[start, start + count × 45)`.
struct IndexFile {
    file: DataFile,
    start: u64,
    count: u64,
}

fn open_index_file(path: &Path) -> Result<Option<IndexFile>> {
    if !path.exists() {
        return Ok(None);
    }
    let file = DataFile::open(path.to_path_buf())?;
    let header = file.read(0, HEADER_LEN.min(file.len) as usize)?;
    let mut cursor = Cursor::new(&header, 0, path);
    let valid = cursor.int63("index end offset")?;
    if cursor.raw(8, "index version")? != b"00000001" {
        return Err(IrminError::corrupt(path, 8, "index version is not 00000001"));
    }
    cursor.int63("index generation")?;
    let fan_size = cursor.int63("index fan size")?;
    let start = HEADER_LEN.checked_add(fan_size).filter(|start| *start <= file.len).ok_or_else(|| {
        IrminError::corrupt(path, 24, format!("fan-out table of {fan_size} bytes past the end"))
    })?;
    if valid % ENTRY_LEN != 0 || start.checked_add(valid).is_none_or(|end| end > file.len) {
        return Err(IrminError::corrupt(
            path,
            0,
            format!("index end offset {valid} does not fit the file ({} bytes)", file.len),
        ));
    }
    Ok(Some(IndexFile { file, start, count: valid / ENTRY_LEN }))
}

impl IndexFile {
    fn entry(&self, i: u64) -> Result<IndexEntry> {
        let at = self.start + i * ENTRY_LEN;
        decode_entry(&self.file.read(at, ENTRY_LEN as usize)?, at, &self.file.path)
    }

    /// Calls `visit` on every entry in file order, reading 4,096 entries at a time; stops early
    /// and returns the entry `visit` accepts.
    fn scan(&self, mut visit: impl FnMut(&IndexEntry) -> bool) -> Result<Option<IndexEntry>> {
        const BATCH: u64 = 4096;
        let mut i = 0;
        while i < self.count {
            let n = BATCH.min(self.count - i);
            let at = self.start + i * ENTRY_LEN;
            let raw = self.file.read(at, (n * ENTRY_LEN) as usize)?;
            for (k, chunk) in raw.chunks_exact(ENTRY_LEN as usize).enumerate() {
                let entry = decode_entry(chunk, at + k as u64 * ENTRY_LEN, &self.file.path)?;
                if visit(&entry) {
                    return Ok(Some(entry));
                }
            }
            i += n;
        }
        Ok(None)
    }
}

fn is_commit(entry: &IndexEntry) -> bool {
    matches!(entry.kind, b'D' | b'C')
}

/// The index of a store. Only the commits of the logs are held in memory (a store indexing every
/// object, Irmin's `always` strategy, may have millions of log entries); other objects are found
/// by scanning, which only references by hash need.
pub(crate) struct Index {
    commits: HashMap<Hash, IndexEntry>,
    /// `log` then `log_async` (newer), scanned for non-commit entries when they hold any.
    logs: Vec<IndexFile>,
    logs_hold_others: bool,
    data: Option<IndexFile>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("commits", &self.commits.len())
            .field("data", &self.data.as_ref().map(|d| d.count))
            .finish()
    }
}

/// mirage/index's `key_hash` for Tezos hashes: OCaml's `Hashtbl.seeded_hash 0` of the raw bytes.
fn key_hash(hash: &Hash) -> u32 {
    ocaml_seeded_hash(0, hash.as_bytes())
}

impl Index {
    pub(crate) fn open(dir: &Path) -> Result<Index> {
        let mut commits = HashMap::new();
        let mut logs = Vec::new();
        let mut logs_hold_others = false;
        // `log_async` holds writes made during a merge: newer than `log`.
        for name in ["log", "log_async"] {
            if let Some(file) = open_index_file(&dir.join(name))? {
                file.scan(|entry| {
                    if is_commit(entry) {
                        commits.insert(entry.hash, *entry);
                    } else {
                        logs_hold_others = true;
                    }
                    false
                })?;
                logs.push(file);
            }
        }
        let data = open_index_file(&dir.join("data"))?;
        Ok(Index { commits, logs, logs_hold_others, data })
    }

    /// The entry for `hash`, if indexed.
    pub(crate) fn find(&self, hash: &Hash) -> Result<Option<IndexEntry>> {
        if let Some(entry) = self.commits.get(hash) {
            return Ok(Some(*entry));
        }
        if self.logs_hold_others {
            // The newest log first.
            for log in self.logs.iter().rev() {
                if let Some(entry) = log.scan(|entry| entry.hash == *hash)? {
                    return Ok(Some(entry));
                }
            }
        }
        let Some(data) = &self.data else { return Ok(None) };
        // Entries are sorted by key_hash: binary search, then scan the equal run.
        let target = key_hash(hash);
        let (mut lo, mut hi) = (0u64, data.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key_hash(&data.entry(mid)?.hash) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut i = lo;
        while i < data.count {
            let entry = data.entry(i)?;
            if key_hash(&entry.hash) != target {
                break;
            }
            if entry.hash == *hash {
                return Ok(Some(entry));
            }
            i += 1;
        }
        // The data file's order (by mirage/index's 30-bit key hash) was not verified on an
        // Irmin-written file: if the search misses, scan it before answering "absent".
        data.scan(|entry| entry.hash == *hash)
    }

    /// Every indexed commit (data and logs; a log entry replaces a data entry of the same hash).
    pub(crate) fn commits(&self) -> Result<Vec<IndexEntry>> {
        let mut out: Vec<IndexEntry> = Vec::new();
        if let Some(data) = &self.data {
            data.scan(|entry| {
                if is_commit(entry) && !self.commits.contains_key(&entry.hash) {
                    out.push(*entry);
                }
                false
            })?;
        }
        out.extend(self.commits.values().copied());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry_bytes(hash: &Hash, offset: u64, length: u32, kind: u8) -> Vec<u8> {
        let mut out = hash.as_bytes().to_vec();
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&length.to_be_bytes());
        out.push(kind);
        out
    }

    fn index_file(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = (body.len() as u64).to_be_bytes().to_vec();
        out.extend_from_slice(b"00000001");
        out.extend_from_slice(&[0u8; 16]);
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn logs_keep_commits_in_memory_and_find_other_objects_by_scanning() {
        let dir = tempfile::tempdir().unwrap();
        let (commit, blob, newer) = (Hash::of_bytes(b"c"), Hash::of_bytes(b"b"), Hash::of_bytes(b"n"));
        let log = index_file(&[entry_bytes(&commit, 100, 40, b'D'), entry_bytes(&blob, 10, 20, b'B')]);
        std::fs::write(dir.path().join("log"), log).unwrap();
        // log_async is newer: its entry for the commit wins.
        let log_async = index_file(&[entry_bytes(&commit, 200, 40, b'D'), entry_bytes(&newer, 300, 9, b'R')]);
        std::fs::write(dir.path().join("log_async"), log_async).unwrap();
        let index = Index::open(dir.path()).unwrap();
        assert_eq!(index.commits.len(), 1);
        assert_eq!(index.find(&commit).unwrap().map(|e| e.offset), Some(200));
        assert_eq!(index.find(&blob).unwrap().map(|e| (e.offset, e.kind)), Some((10, b'B')));
        assert_eq!(index.find(&newer).unwrap().map(|e| e.offset), Some(300));
        assert_eq!(index.find(&Hash::of_bytes(b"x")).unwrap(), None);
        let commits = index.commits().unwrap();
        assert_eq!(commits.len(), 1);
        assert_eq!(commits[0].hash, commit);
        // A valid-bytes field that is not a whole number of entries is refused.
        let mut bad = index_file(&[entry_bytes(&commit, 1, 1, b'D')]);
        bad[7] = 44;
        std::fs::write(dir.path().join("log"), bad).unwrap();
        assert!(matches!(Index::open(dir.path()), Err(IrminError::Corrupt { offset: 0, .. })));
    }
}
