//! Reading the pack: records out of the storage (a memory map for files), checked, decoded and kept
//! in a byte-bounded cache of decoded nodes and contents keyed by offset. This is the
//! [`ObjectSource`] of every tree checked out of a store.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, MAX_BODY_LEN, PACK_HEADER_LEN, RecordKind};
use crate::format::patch;
use crate::pack::graveyard::Graveyard;
use crate::pack::layout::Layout;
use crate::pack::reader::prefetch::Prefetcher;
use larch_core::{
    Contents, Entry, Hash, HeldKeys, LoadError, Name, Node, NodeBody, ObjectKey, ObjectSource, StoreId,
};
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod cache;
mod offer;
pub(crate) mod prefetch;
mod wide;

use cache::{CacheItem, CachedObject, ObjectCache, hash_prefix, new_cache};
pub(crate) use cache::{entries_weight, node_weight, tree_weight};
pub(crate) use wide::ReadKind;
use wide::{PAGE, ReadWidths, WideReads};

/// Bytes read at once for a record: its header and most records (a larger one takes a second
/// read). Most records read on a miss are patches and small directories (~100 B): on the default
/// trace 256 needs 2% more read calls than 512 but copies half the bytes (find/mem 3–6% faster);
/// 160 needs 5% more calls and is slower again. (2 KB was 10–15% slower than 512.)
const FIRST_READ: u64 = 256;

/// The span of a run of records read ahead ([`PackReader::read_ahead`]): the records whose
/// offsets lie within this many bytes of the run's first one are read with one call.
pub(crate) const READ_AHEAD_SPAN: u64 = 64 << 10;

/// Counters of the read path.
#[derive(Debug, Default)]
pub(crate) struct ReadCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub bytes_read: AtomicU64,
    pub records_read: AtomicU64,
    /// Read calls made into the pack's files (a record takes one or two; a run read ahead, one).
    pub read_calls: AtomicU64,
}

/// The read side of a pack: storage, published end, cache, counters.
pub(crate) struct PackReader {
    /// The identity of the keys this reader hands out and accepts.
    store: StoreId,
    layout: Arc<Layout>,
    end: AtomicU64,
    cache: ObjectCache,
    /// Where evicted items go to be dropped on another thread.
    graveyard: Graveyard<CacheItem>,
    cache_capacity: u64,
    /// A limit below the configured budget ([`crate::CacheBudget`]; `u64::MAX`: none).
    cache_limit: AtomicU64,
    /// The running GC's share of the budget ([`crate::GcPolicy::cache_reserve_bytes`]; 0: none).
    cache_reserve: AtomicU64,
    /// Serialises the cache's weight updates (each reads both settings after its own store).
    cache_weight_lock: std::sync::Mutex<()>,
    /// Rehash every object loaded (and compare full hashes on cache hits): tampering is then
    /// detected on reads, not only by fsck ([`crate::RepoOptions::verify_on_load`]).
    verify: bool,
    /// Copy-on-write refers to in-memory children this store holds by key
    /// ([`ObjectSource::held_keys`]): set while a [`crate::PipelinedRepo`] carries trees from
    /// commit to commit.
    detach: std::sync::atomic::AtomicBool,
    /// While detaching: the nodes written in this many last bytes of the pack stay in memory
    /// (`RECENT_IN_MEMORY` under a [`crate::PipelinedRepo`]; 0: none).
    recent_window: AtomicU64,
    /// While detaching: the inode trees written in this many last bytes of the pack stay in memory
    /// (`RECENT_INODES_IN_MEMORY` under a [`crate::PipelinedRepo`]; 0: only those of
    /// `recent_window`).
    recent_inodes_window: AtomicU64,
    pub counters: ReadCounters,
    /// The size of first reads ([`WideReads`]), of inodes and of the other records.
    wide: ReadWidths,
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
    let kind = RecordKind::from_byte(kind_byte)
        .ok_or_else(|| corrupt(format!("unknown record kind {kind_byte}")))?;
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
    /// Reads `buf.len()` raw bytes of the pack at global offset `offset` (no cache, no checks).
    pub fn read_raw(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.layout.read(offset, buf)
    }

    /// The layout of the pack's files.
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// A reader of `layout` whose published end is `end`, with a cache of `cache_bytes`.
    pub fn new(layout: Arc<Layout>, end: u64, cache_bytes: u64) -> PackReader {
        let items = usize::try_from(cache_bytes / 512).unwrap_or(1 << 20).max(16);
        PackReader {
            store: StoreId::fresh(),
            layout,
            end: AtomicU64::new(end),
            cache: new_cache(items, cache_bytes),
            graveyard: Graveyard::new(),
            cache_capacity: cache_bytes,
            cache_limit: AtomicU64::new(u64::MAX),
            cache_reserve: AtomicU64::new(0),
            cache_weight_lock: std::sync::Mutex::new(()),
            verify: false,
            detach: std::sync::atomic::AtomicBool::new(false),
            recent_window: AtomicU64::new(0),
            recent_inodes_window: AtomicU64::new(0),
            counters: ReadCounters::default(),
            wide: ReadWidths::default(),
        }
    }

    /// Whether copy-on-write of this store's trees refers to in-memory children by key
    /// ([`ObjectSource::held_keys`]).
    pub fn set_detach(&self, detach: bool) {
        self.detach.store(detach, std::sync::atomic::Ordering::Relaxed);
    }

    /// While detaching, the nodes written in the last `bytes` of the pack stay in memory when their
    /// parent is copied ([`larch_core::HeldKeys::recent_from`]; 0: none).
    pub fn set_recent_window(&self, bytes: u64) {
        self.recent_window.store(bytes, Ordering::Relaxed);
    }

    /// While detaching, the inode trees written in the last `bytes` of the pack stay in memory
    /// when their parent is copied ([`larch_core::HeldKeys::recent_inodes_from`]; 0: only those
    /// of [`set_recent_window`](PackReader::set_recent_window)).
    pub fn set_recent_inodes_window(&self, bytes: u64) {
        self.recent_inodes_window.store(bytes, Ordering::Relaxed);
    }

    /// This reader, verifying the full hash of every object it loads when `verify`.
    pub fn verifying(mut self, verify: bool) -> PackReader {
        self.verify = verify;
        self
    }

    /// The identity of this store instance: the store of every key it decodes.
    pub fn store(&self) -> StoreId {
        self.store
    }

    /// The key of the object at `offset` of this store.
    pub fn key(&self, offset: u64) -> ObjectKey {
        ObjectKey::new(self.store, offset)
    }

    /// The published end: records are read below it only.
    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// Publishes a new end (after a commit, or a reload).
    pub fn set_end(&self, end: u64) {
        self.end.store(end, Ordering::Release);
    }

    /// Limits the cache below its configured budget for now (`None`: no limit), evicting what
    /// exceeds it ([`crate::CacheBudget`]). A running GC's reserve comes out of what is left.
    pub fn set_cache_limit(&self, limit: Option<u64>) {
        self.cache_limit.store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
        self.apply_cache_weight();
    }

    /// Sets the share of the budget a running GC's worker takes ([`crate::GcPolicy::cache_reserve_bytes`],
    /// at most half of it; 0 once the GC switched or was abandoned).
    pub fn set_cache_reserve(&self, reserve: u64) {
        self.cache_reserve.store(reserve, Ordering::Relaxed);
        self.apply_cache_weight();
    }

    /// The cache's weight capacity: the configured budget, or the limit below it, less the GC's
    /// reserve (at most half of it).
    fn apply_cache_weight(&self) {
        let _serialised = self.cache_weight_lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let budget = self.cache_limit.load(Ordering::Relaxed).min(self.cache_capacity);
        let reserve = self.cache_reserve.load(Ordering::Relaxed).min(budget / 2);
        self.cache.set_capacity((budget - reserve).max(1));
    }

    /// The cache's weight capacity now (tests).
    #[cfg(test)]
    pub(crate) fn cache_weight(&self) -> u64 {
        self.cache.capacity()
    }

    /// The cache's byte budget.
    pub fn cache_capacity(&self) -> u64 {
        self.cache_capacity
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
        self.with_record_in(offset, None, ReadKind::Other, decode)
    }

    /// Whether first reads of `kind` go to the end of their page now (tests).
    #[cfg(test)]
    pub(crate) fn reads_wide(&self, kind: ReadKind) -> bool {
        self.wide.of(kind).wide()
    }

    /// [`PackReader::with_record`], taking the record from `pre` (the pack's bytes from `offset`
    /// on, read already) when it holds it whole, reading it otherwise: the same checks either way.
    pub fn with_record_from<T>(
        &self,
        offset: u64,
        pre: &[u8],
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        self.with_record_in(offset, Some(pre), ReadKind::Other, decode)
    }

    /// [`PackReader::with_record`], taking the record from `pre` (the pack's bytes from `offset`
    /// on, read ahead) when it holds it whole, its first read sized as `kind`'s are.
    fn with_record_in<T>(
        &self,
        offset: u64,
        pre: Option<&[u8]>,
        kind: ReadKind,
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
        let wide = self.wide.of(kind);
        // Bytes read ahead, if they hold the header (up to 11 bytes) and the whole record.
        if let Some(pre) = pre.filter(|pre| pre.len() as u64 >= (end - offset).min(11)) {
            let (record_kind, body_len, header_len) =
                parse_head(pre.get(..pre.len().min(11)).unwrap_or_default(), offset)?;
            let total = header_len as u64 + body_len + 4;
            if let Some(record) = usize::try_from(total).ok().and_then(|total| pre.get(..total))
                && offset + total <= end
            {
                return self.check_and_decode(offset, record, record_kind, header_len, wide, decode);
            }
        }
        // One read usually covers the whole record (most are under the first read's size); a
        // second read fetches the rest of a larger one.
        let first = usize::try_from((end - offset).min(wide.first_read(offset))).unwrap_or(0);
        let run = |buffer: &mut Vec<u8>| -> Result<(T, u64)> {
            buffer.clear();
            buffer.resize(first, 0);
            // A pack shorter than published (truncated by someone else, or lost by the disk) is
            // `Truncated`; an offset in no file of the layout, `Unmapped`.
            self.counters.read_calls.fetch_add(1, Ordering::Relaxed);
            self.layout.read(offset, buffer)?;
            let (record_kind, body_len, header_len) =
                parse_head(buffer.get(..first.min(11)).unwrap_or_default(), offset)?;
            let total = header_len as u64 + body_len + 4;
            if offset + total > end {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    "record runs past the published end",
                ));
            }
            let total_usize = usize::try_from(total)
                .map_err(|_| StoreError::corrupt(FileKind::Pack, offset, "huge record"))?;
            if total_usize > first {
                buffer.resize(total_usize, 0);
                let rest = buffer.get_mut(first..).unwrap_or_default();
                self.counters.read_calls.fetch_add(1, Ordering::Relaxed);
                self.layout.read(offset + first as u64, rest)?;
            }
            let record = buffer.get(..total_usize).unwrap_or_default();
            self.check_and_decode(offset, record, record_kind, header_len, wide, decode)
        };
        let (value, total) = SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buffer) => run(&mut buffer),
            Err(_) => run(&mut Vec::new()),
        })?;
        Ok((value, total))
    }

    /// Counts the whole `record` at `offset` (header, body, checksum) read (its size noted in
    /// `wide`), checks its checksum and decodes its body.
    fn check_and_decode<T>(
        &self,
        offset: u64,
        record: &[u8],
        kind: RecordKind,
        header_len: usize,
        wide: &WideReads,
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        let total = record.len() as u64;
        wide.note(total);
        self.counters.bytes_read.fetch_add(total, Ordering::Relaxed);
        self.counters.records_read.fetch_add(1, Ordering::Relaxed);
        let (data, crc) = record.split_at(record.len().saturating_sub(4));
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or_default());
        if crc32fast::hash(data) != stored {
            return Err(StoreError::corrupt(FileKind::Pack, offset, "record checksum mismatch"));
        }
        Ok((decode(kind, data.get(header_len..).unwrap_or_default())?, total))
    }

    /// Reads the nodes `nodes` (`(offset, hash)`, sorted by offset) that the cache lacks into
    /// it, in runs: the records within [`READ_AHEAD_SPAN`] of a run's first one are read with
    /// one call (and a page past the last), then decoded from it; a record the run does not hold
    /// whole, or a run that cannot be read, is read on its own. Errors are left to whoever needs
    /// the node. Returns the nodes read into the cache.
    pub(crate) fn read_ahead(&self, nodes: &[(u64, Hash)]) -> u64 {
        let end = self.end();
        let mut read = 0;
        let mut rest = nodes;
        let mut buffer = Vec::new();
        while let Some(&(start, _)) = rest.first() {
            let count =
                rest.iter().take_while(|(offset, _)| *offset < start.saturating_add(READ_AHEAD_SPAN)).count();
            let (run, after) = rest.split_at(count.max(1));
            rest = after;
            let last = run.last().map_or(start, |(offset, _)| *offset);
            let span_end = last.saturating_add(PAGE).min(end);
            let have = start < span_end && {
                buffer.clear();
                buffer.resize(usize::try_from(span_end - start).unwrap_or(0), 0);
                self.counters.read_calls.fetch_add(1, Ordering::Relaxed);
                self.layout.read(start, &mut buffer).is_ok()
            };
            for &(offset, hash) in run {
                if self.is_cached(offset) {
                    continue;
                }
                let pre = have
                    .then(|| buffer.get(usize::try_from(offset - start).unwrap_or(usize::MAX)..))
                    .flatten();
                if self.node_read_in(offset, &hash, patch::MAX_CHAIN, true, ReadKind::Other, pre).is_ok() {
                    read += 1;
                }
            }
        }
        read
    }

    /// Puts `item` into the cache; what it evicts is dropped on the graveyard's thread.
    fn insert(&self, offset: u64, item: CacheItem) {
        let evicted = self.cache.insert_with_lifecycle(offset, item);
        if !evicted.is_empty() {
            self.graveyard.bury(evicted);
        }
    }
    /// The node at `offset` whose hash is `hash`, from the cache or decoded.
    pub fn node(&self, offset: u64, hash: &Hash) -> Result<Arc<Node>> {
        Ok(self.node_chained(offset, hash, patch::MAX_CHAIN)?.0)
    }

    /// The node at `offset` with the patch chain length of its record, which must not exceed
    /// `max_chain` (this bounds the recursion through the bases of patch records).
    pub fn node_chained(&self, offset: u64, hash: &Hash, max_chain: u8) -> Result<(Arc<Node>, u8)> {
        self.node_loaded(offset, hash, max_chain, true, ReadKind::Other)
    }

    /// The inode at `offset` (a child of an inode tree) whose hash is `hash`, from the cache or
    /// decoded, its first read sized as inodes' are ([`ReadKind::Inode`]).
    pub fn inode(&self, offset: u64, hash: &Hash) -> Result<Arc<Node>> {
        Ok(self.node_loaded(offset, hash, patch::MAX_CHAIN, true, ReadKind::Inode)?.0)
    }

    /// [`PackReader::node_chained`]; a node decoded on a miss enters the cache when `keep` (the
    /// bases of a patch are not kept: they are older versions, rarely wanted for themselves),
    /// its first read sized as `kind`'s are.
    fn node_loaded(
        &self,
        offset: u64,
        hash: &Hash,
        max_chain: u8,
        keep: bool,
        kind: ReadKind,
    ) -> Result<(Arc<Node>, u8)> {
        match self.cached_node(offset, hash, max_chain)? {
            Some(found) => Ok(found),
            None => self.node_read_in(offset, hash, max_chain, keep, kind, None),
        }
    }

    /// Whether the cache holds an object at `offset` (not counted as a use).
    pub(crate) fn is_cached(&self, offset: u64) -> bool {
        self.cache.contains_key(&offset)
    }

    /// The node at `offset` if the cache holds it (a hit is counted, a miss is not).
    pub(crate) fn cached_node(
        &self,
        offset: u64,
        hash: &Hash,
        max_chain: u8,
    ) -> Result<Option<(Arc<Node>, u8)>> {
        if let Some(CacheItem { object: CachedObject::Node(node), chain, hash_prefix: prefix, .. }) =
            self.cache.get(&offset)
        {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            if prefix != hash_prefix(hash) || (self.verify && node.hash() != *hash) {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    format!("references disagree on the hash of this node ({hash})"),
                ));
            }
            if chain > max_chain {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    "patch chain longer than its successor says",
                ));
            }
            return Ok(Some((node, chain)));
        }
        Ok(None)
    }

    /// The node at `offset` read from the pack (a miss of the cache), kept in the cache if `keep`.
    pub(crate) fn node_read(
        &self,
        offset: u64,
        hash: &Hash,
        max_chain: u8,
        keep: bool,
    ) -> Result<(Arc<Node>, u8)> {
        self.node_read_in(offset, hash, max_chain, keep, ReadKind::Other, None)
    }

    /// [`PackReader::node_read`] of a `kind` record (the bases of its patch chain read as
    /// such too), its record taken from `pre` if it holds it whole
    /// ([`PackReader::with_record_in`]).
    fn node_read_in(
        &self,
        offset: u64,
        hash: &Hash,
        max_chain: u8,
        keep: bool,
        read_kind: ReadKind,
        pre: Option<&[u8]>,
    ) -> Result<(Arc<Node>, u8)> {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        enum Decoded {
            Full(NodeBody),
            Patch(patch::Patch),
        }
        let (decoded, _) = self.with_record_in(offset, pre, read_kind, |kind, body| {
            let mut counts = codec::EntryCounts::default();
            match kind {
                RecordKind::Flat | RecordKind::Values | RecordKind::Tree => {
                    Ok(Decoded::Full(codec::decode_node_body(kind, body, offset, &mut counts, self.store)?))
                }
                RecordKind::PatchEntries | RecordKind::PatchTree => {
                    Ok(Decoded::Patch(patch::decode(kind, body, offset, &mut counts, self.store)?))
                }
                other => Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    format!("a {} record where a node was expected", other.name()),
                )),
            }
        })?;
        let (body, chain) = match decoded {
            Decoded::Full(body) => (body, 0),
            Decoded::Patch(patch) => {
                let chain = patch.chain();
                if chain > max_chain {
                    return Err(StoreError::corrupt(FileKind::Pack, offset, "patch chain too long"));
                }
                let (base_hash, base_offset) = patch.base();
                let (base, base_chain) =
                    self.node_loaded(base_offset, &base_hash, chain - 1, false, read_kind)?;
                if base_chain != chain - 1 {
                    return Err(StoreError::corrupt(FileKind::Pack, offset, "patch chain length mismatch"));
                }
                // A base decoded for this patch alone (not cached) is moved into the result.
                let body = match Arc::try_unwrap(base) {
                    Ok(base) => patch::apply_to(Cow::Owned(base.into_body()), patch, offset)?,
                    Err(shared) => patch::apply(shared.body(), patch, offset)?,
                };
                (body, chain)
            }
        };
        let node = if self.verify {
            // The record's own hash (its children's as their pointers say, which their own loads
            // verify in turn), against the reference's.
            let node = Node::new(body);
            let actual = node.hash();
            if actual != *hash {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    format!("the node hashes to {actual}, its reference says {hash}"),
                ));
            }
            node
        } else {
            Node::with_hash(body, *hash)
        };
        node.set_stored_key(self.key(offset));
        node.note_record_chain(self.key(offset), chain);
        let node = Arc::new(node);
        if keep {
            let weight = node_weight(&node);
            let item = CacheItem {
                object: CachedObject::Node(node.clone()),
                weight,
                chain,
                hash_prefix: hash_prefix(hash),
            };
            self.insert(offset, item);
        }
        Ok((node, chain))
    }

    /// Puts a node just written at `offset` (a record of patch chain length `chain`, of cache weight
    /// `weight`, i.e. [`node_weight`]) into the cache.
    pub fn prime(&self, offset: u64, node: Arc<Node>, chain: u8, weight: u32) {
        node.note_record_chain(self.key(offset), chain);
        let hash_prefix = hash_prefix(&node.hash());
        self.insert(offset, CacheItem { object: CachedObject::Node(node), weight, chain, hash_prefix });
    }

    /// The contents at `offset`, whose hash is `hash`, from the cache or read. As for nodes, a
    /// cache hit reached with a hash whose first 8 bytes differ from those of the reference that
    /// loaded it is corruption; in verifying mode the value is rehashed on a miss and full hashes
    /// are compared on hits.
    pub fn contents(&self, offset: u64, hash: &Hash) -> Result<Arc<Contents>> {
        let disagree = || {
            StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("references disagree on the hash of these contents ({hash})"),
            )
        };
        if let Some(CacheItem { object: CachedObject::Contents(contents), hash_prefix: prefix, .. }) =
            self.cache.get(&offset)
        {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            if prefix != hash_prefix(hash) || (self.verify && contents.hash() != *hash) {
                return Err(disagree());
            }
            return Ok(contents);
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let (contents, _) = self.with_record(offset, |kind, body| match kind {
            RecordKind::Contents => Ok(Contents::from_slice(body)),
            other => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a {} record where contents were expected", other.name()),
            )),
        })?;
        if self.verify {
            let actual = contents.hash();
            if actual != *hash {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    offset,
                    format!("the contents hash to {actual}, their reference says {hash}"),
                ));
            }
        }
        let contents = Arc::new(contents);
        let weight = u32::try_from(contents.len() + 64).unwrap_or(u32::MAX);
        let item = CacheItem {
            object: CachedObject::Contents(contents.clone()),
            weight,
            chain: 0,
            hash_prefix: hash_prefix(hash),
        };
        self.insert(offset, item);
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
    /// Reads a large directory's sub-directories ahead during a storm of cold reads.
    prefetch: Prefetcher,
}

impl PackSource {
    /// The source of `reader`'s objects, in an `Arc` that its prefetching thread refers to
    /// weakly.
    pub(crate) fn new(reader: PackReader) -> Arc<PackSource> {
        Arc::new_cyclic(|source| PackSource { reader, prefetch: Prefetcher::new(source.clone()) })
    }

    /// The reading ahead of large directories' sub-directories.
    pub(crate) fn prefetch(&self) -> &Prefetcher {
        &self.prefetch
    }

    /// The position of `key` in this store: a key of another store is refused (its position means
    /// nothing here).
    fn offset(&self, key: ObjectKey) -> Result<u64> {
        key.offset_in(self.reader.store).ok_or(StoreError::OtherStoreKey { key, store: self.reader.store })
    }
}

impl ObjectSource for PackSource {
    /// The writer patches a changed node on the version it was copied from.
    fn keeps_origins(&self) -> bool {
        true
    }

    /// Into the cache, as its record would decode (`offer.rs`).
    fn offer_detached(&self, node: &Arc<Node>) {
        self.reader.offer_detached(node);
    }

    /// Records from the first chunk on are readable now; a later GC keeps those that its commit
    /// and the newer ones reach, which a tree carried forward from the last commit (the
    /// pipelined writer's) does. Only while a pipelined writer runs: other callers may keep a tree
    /// of an older commit, or read it after the store failed, and then need its in-memory nodes.
    /// The nodes of the last [`PackReader::set_recent_window`] bytes written stay in memory, and
    /// the inode trees of the last [`PackReader::set_recent_inodes_window`] bytes.
    fn held_keys(&self) -> Option<HeldKeys> {
        let reader = &self.reader;
        if !reader.detach.load(Ordering::Relaxed) {
            return None;
        }
        let from_end = |window: &AtomicU64| match window.load(Ordering::Relaxed) {
            0 => u64::MAX,
            window => reader.end().saturating_sub(window),
        };
        Some(HeldKeys {
            store: reader.store,
            from: reader.layout().first_chunk_start(),
            recent_from: from_end(&reader.recent_window),
            recent_inodes_from: from_end(&reader.recent_inodes_window),
        })
    }

    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.offset(key).and_then(|offset| self.reader.node(offset, hash)).map_err(|e| LoadError {
            what: "node",
            key,
            hash: *hash,
            reason: Box::new(e),
        })
    }

    /// A miss counts towards a storm of cold reads, during which the leaf's other stored
    /// sub-directories are read ahead ([`Prefetcher`]).
    fn load_node_among(
        &self,
        key: ObjectKey,
        hash: &Hash,
        leaf: &[(Name, Entry)],
    ) -> Result<Arc<Node>, LoadError> {
        let load = || -> Result<Arc<Node>> {
            let offset = self.offset(key)?;
            if let Some((node, _)) = self.reader.cached_node(offset, hash, patch::MAX_CHAIN)? {
                return Ok(node);
            }
            self.prefetch.missed(offset, leaf, self.reader.store);
            Ok(self.reader.node_read(offset, hash, patch::MAX_CHAIN, true)?.0)
        };
        load().map_err(|e| LoadError { what: "node", key, hash: *hash, reason: Box::new(e) })
    }

    /// An inode's first read is sized apart from the other records' ([`ReadKind::Inode`]).
    fn load_inode(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.offset(key).and_then(|offset| self.reader.inode(offset, hash)).map_err(|e| LoadError {
            what: "node",
            key,
            hash: *hash,
            reason: Box::new(e),
        })
    }

    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        self.offset(key).and_then(|offset| self.reader.contents(offset, hash)).map_err(|e| LoadError {
            what: "contents",
            key,
            hash: *hash,
            reason: Box::new(e),
        })
    }
}
