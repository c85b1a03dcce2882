//! Reading the pack: records out of the storage (a memory map for files), checked, decoded and kept
//! in a byte-bounded cache of decoded nodes and contents keyed by offset. This is the
//! [`ObjectSource`] of every tree checked out of a store.

use crate::codec::{self, MAX_BODY_LEN, PACK_HEADER_LEN, RecordKind};
use crate::error::{FileKind, Result, StoreError};
use crate::storage::Storage;
use larch_core::{Contents, Hash, LoadError, Node, NodeBody, ObjectKey, ObjectSource};
use quick_cache::Weighter;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default byte budget of the decoded-object cache.
pub const DEFAULT_CACHE_BYTES: u64 = 128 << 20;

#[derive(Clone)]
enum CachedObject {
    Node(Arc<Node>),
    Contents(Arc<Contents>),
}

#[derive(Clone)]
struct CacheItem {
    object: CachedObject,
    weight: u32,
}

#[derive(Clone)]
struct ItemWeight;

impl Weighter<u64, CacheItem> for ItemWeight {
    fn weight(&self, _key: &u64, item: &CacheItem) -> u64 {
        u64::from(item.weight)
    }
}

/// An estimate of the heap bytes a decoded node holds.
fn node_weight(node: &Node) -> u32 {
    let bytes = match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => entries
            .iter()
            .map(|(name, entry)| {
                let inline = match entry {
                    larch_core::Entry::Contents(larch_core::ContentsRef::Mem(c)) => 56 + c.len(),
                    _ => 0,
                };
                72 + name.len() + inline
            })
            .sum::<usize>(),
        NodeBody::Tree(tree) => tree.children.len() * 56,
    };
    u32::try_from(bytes + 120).unwrap_or(u32::MAX)
}

/// Counters of the read path.
#[derive(Debug, Default)]
pub(crate) struct ReadCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub bytes_read: AtomicU64,
    pub records_read: AtomicU64,
}

/// The read side of a pack: storage, published end, cache, counters.
pub(crate) struct PackReader {
    storage: Arc<dyn Storage>,
    end: AtomicU64,
    cache: quick_cache::sync::Cache<u64, CacheItem, ItemWeight>,
    pub counters: ReadCounters,
}

impl fmt::Debug for PackReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackReader")
            .field("end", &self.end())
            .field("cache_bytes", &self.cache.weight())
            .field("cache_entries", &self.cache.len())
            .finish()
    }
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Parses a record header (kind byte and LEB128 body length) from its first bytes.
fn parse_head(head: &[u8], offset: u64) -> Result<(RecordKind, u64, usize)> {
    let corrupt = |reason: String| StoreError::corrupt(FileKind::Pack, offset, reason);
    let kind_byte = head.first().copied().ok_or_else(|| corrupt("empty record".into()))?;
    let kind = RecordKind::from_byte(kind_byte).ok_or_else(|| corrupt(format!("unknown record kind {kind_byte}")))?;
    let mut cursor = codec::Cursor::new(head.get(1..).unwrap_or_default(), FileKind::Pack, offset);
    let len = cursor.leb()?;
    if len > MAX_BODY_LEN {
        return Err(corrupt(format!("record body of {len} bytes")));
    }
    let mut head_len = 2;
    let mut rest = len >> 7;
    while rest > 0 {
        head_len += 1;
        rest >>= 7;
    }
    Ok((kind, len, head_len))
}

impl PackReader {
    /// A reader of `storage` whose published end is `end`, with a cache of `cache_bytes`.
    pub fn new(storage: Arc<dyn Storage>, end: u64, cache_bytes: u64) -> PackReader {
        let items = usize::try_from(cache_bytes / 512).unwrap_or(1 << 20).max(16);
        PackReader {
            storage,
            end: AtomicU64::new(end),
            cache: quick_cache::sync::Cache::with_weighter(items, cache_bytes.max(1), ItemWeight),
            counters: ReadCounters::default(),
        }
    }

    /// The published end: records are read below it only.
    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// Publishes a new end (after a commit, or a reload).
    pub fn set_end(&self, end: u64) {
        self.end.store(end, Ordering::Release);
    }

    /// Bytes and entries held by the cache.
    pub fn cache_usage(&self) -> (u64, usize) {
        (self.cache.weight(), self.cache.len())
    }

    /// Reads and checks the record at `offset`, then calls `decode` on its kind and body. Returns
    /// also the record's total length.
    pub fn with_record<T>(
        &self,
        offset: u64,
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        let end = self.end();
        if offset < PACK_HEADER_LEN || offset >= end {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("offset outside the published pack [{PACK_HEADER_LEN}, {end})"),
            ));
        }
        let mut head = [0u8; 11];
        let head_len = usize::try_from((end - offset).min(11)).unwrap_or(11);
        let head = head.get_mut(..head_len).unwrap_or_default();
        self.storage.read_at(offset, head).map_err(|e| StoreError::io(FileKind::Pack, offset, "read", e))?;
        let (kind, body_len, header_len) = parse_head(head, offset)?;
        let total = header_len as u64 + body_len + 4;
        if offset + total > end {
            return Err(StoreError::corrupt(FileKind::Pack, offset, "record runs past the published end"));
        }
        self.counters.bytes_read.fetch_add(total, Ordering::Relaxed);
        self.counters.records_read.fetch_add(1, Ordering::Relaxed);
        let total_usize = usize::try_from(total).map_err(|_| StoreError::corrupt(FileKind::Pack, offset, "huge"))?;
        let run = |buffer: &mut Vec<u8>| -> Result<T> {
            buffer.clear();
            buffer.resize(total_usize, 0);
            self.storage.read_at(offset, buffer).map_err(|e| StoreError::io(FileKind::Pack, offset, "read", e))?;
            let (data, crc) = buffer.split_at(total_usize - 4);
            let stored = u32::from_le_bytes(crc.try_into().unwrap_or_default());
            if crc32fast::hash(data) != stored {
                return Err(StoreError::corrupt(FileKind::Pack, offset, "record checksum mismatch"));
            }
            decode(kind, data.get(header_len..).unwrap_or_default())
        };
        let value = SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buffer) => run(&mut buffer),
            Err(_) => run(&mut Vec::new()),
        })?;
        Ok((value, total))
    }

    /// The node at `offset` whose hash is `hash`, from the cache or decoded.
    pub fn node(&self, offset: u64, hash: &Hash) -> Result<Arc<Node>> {
        if let Some(CacheItem { object: CachedObject::Node(node), .. }) = self.cache.get(&offset) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            if node.cached_hash().is_some_and(|cached| cached != *hash) {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    format!("references disagree on the hash of this node ({hash})"),
                ));
            }
            return Ok(node);
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let (node, _) = self.with_record(offset, |kind, body| match kind {
            RecordKind::Flat | RecordKind::Values | RecordKind::Tree => codec::decode_node(kind, body, offset, *hash),
            other => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a {} record where a node was expected", other.name()),
            )),
        })?;
        let node = Arc::new(node);
        let weight = node_weight(&node);
        self.cache.insert(offset, CacheItem { object: CachedObject::Node(node.clone()), weight });
        Ok(node)
    }

    /// The contents at `offset`, from the cache or read.
    pub fn contents(&self, offset: u64) -> Result<Arc<Contents>> {
        if let Some(CacheItem { object: CachedObject::Contents(contents), .. }) = self.cache.get(&offset) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(contents);
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let (contents, _) = self.with_record(offset, |kind, body| match kind {
            RecordKind::Contents => Ok(Contents::new(body)),
            other => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a {} record where contents were expected", other.name()),
            )),
        })?;
        let contents = Arc::new(contents);
        let weight = u32::try_from(contents.len() + 64).unwrap_or(u32::MAX);
        self.cache.insert(offset, CacheItem { object: CachedObject::Contents(contents.clone()), weight });
        Ok(contents)
    }

    /// The commit record at `offset`.
    pub fn commit(&self, offset: u64) -> Result<codec::CommitData> {
        let (commit, _) = self.with_record(offset, |kind, body| match kind {
            RecordKind::Commit => codec::decode_commit(body, offset),
            other => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a {} record where a commit was expected", other.name()),
            )),
        })?;
        Ok(commit)
    }
}

/// The [`ObjectSource`] of a store's trees.
#[derive(Debug)]
pub struct PackSource {
    pub(crate) reader: PackReader,
}

impl ObjectSource for PackSource {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.reader.node(key, hash).map_err(|e| LoadError { what: "node", key, hash: *hash, reason: Box::new(e) })
    }

    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        self.reader.contents(key).map_err(|e| LoadError { what: "contents", key, hash: *hash, reason: Box::new(e) })
    }
}
