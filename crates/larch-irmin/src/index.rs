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

    fn all(&self) -> Result<Vec<IndexEntry>> {
        let mut out = Vec::new();
        const BATCH: u64 = 4096;
        let mut i = 0;
        while i < self.count {
            let n = BATCH.min(self.count - i);
            let at = self.start + i * ENTRY_LEN;
            let raw = self.file.read(at, (n * ENTRY_LEN) as usize)?;
            for (k, chunk) in raw.chunks_exact(ENTRY_LEN as usize).enumerate() {
                out.push(decode_entry(chunk, at + k as u64 * ENTRY_LEN, &self.file.path)?);
            }
            i += n;
        }
        Ok(out)
    }
}

/// The index of a store: the logs in memory, the sorted data file searched on disk.
pub(crate) struct Index {
    recent: HashMap<Hash, IndexEntry>,
    data: Option<IndexFile>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("recent", &self.recent.len())
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
        let mut recent = HashMap::new();
        // `log_async` holds writes made during a merge: newer than `log`.
        for name in ["log", "log_async"] {
            if let Some(file) = open_index_file(&dir.join(name))? {
                for entry in file.all()? {
                    recent.insert(entry.hash, entry);
                }
            }
        }
        let data = open_index_file(&dir.join("data"))?;
        Ok(Index { recent, data })
    }

    /// The entry for `hash`, if indexed.
    pub(crate) fn find(&self, hash: &Hash) -> Result<Option<IndexEntry>> {
        if let Some(entry) = self.recent.get(hash) {
            return Ok(Some(*entry));
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
        Ok(data.all()?.into_iter().find(|entry| entry.hash == *hash))
    }

    /// Every entry (data and logs; a log entry replaces a data entry of the same hash).
    pub(crate) fn all(&self) -> Result<Vec<IndexEntry>> {
        let mut out: Vec<IndexEntry> = match &self.data {
            Some(data) => data.all()?.into_iter().filter(|e| !self.recent.contains_key(&e.hash)).collect(),
            None => Vec::new(),
        };
        out.extend(self.recent.values().copied());
        Ok(out)
    }
}
