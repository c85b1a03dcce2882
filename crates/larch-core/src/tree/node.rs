//! The values a context tree is made of: names, contents, directory nodes and inode tries, each
//! either held in memory or known only by hash and key (lazy), with a per-node hash cache.

use crate::hash::Hash;
use crate::schema::{self, Kind};
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use super::key::{ObjectKey, StoreId};

/// A step of a path: arbitrary bytes, ordered bytewise (OCaml `String.compare`).
///
/// A name is a piece of a shared buffer: a name built alone owns its buffer, and the names of a
/// node decoded from a store share one buffer ([`Name::split`]), so decoding, cloning and dropping
/// a node's names cost one allocation and touch one place in memory, not one per name.
///
/// A name also holds its first eight bytes (zero-padded) as an integer: most comparisons of two
/// names, and so most probes of a directory search, are decided by them without reading the
/// buffer (a cache line of its own, cold in a node just loaded).
#[derive(Clone)]
pub struct Name {
    buf: NameBuffer,
    start: u32,
    /// `u32::MAX`: the rest of the buffer (a name of 4 GiB or more, alone in its buffer).
    len: u32,
    /// [`name_prefix`] of the name's bytes.
    prefix: u64,
}

/// The shared buffer of names and inline values: a thin pointer (8 bytes, its length in the
/// allocation), so that a name takes 24 bytes and a directory entry 80, not 32 and 88.
type NameBuffer = triomphe::ThinArc<(), u8>;

/// The first eight bytes of `bytes`, zero-padded, as a big-endian integer: two names whose
/// prefixes differ compare as their prefixes do (a name that ends within the eight bytes is
/// padded with zeros, below any byte but zero; equal prefixes decide nothing).
#[inline]
pub(crate) fn name_prefix(bytes: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = bytes.len().min(8);
    if let (Some(head), Some(bytes)) = (head.get_mut(..n), bytes.get(..n)) {
        head.copy_from_slice(bytes);
    }
    u64::from_be_bytes(head)
}

impl Name {
    /// A name holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Name {
        Name {
            buf: NameBuffer::from_header_and_slice((), bytes),
            start: 0,
            len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            prefix: name_prefix(bytes),
        }
    }

    /// The names whose bytes are the consecutive pieces of `bytes` ending at `ends` (increasing,
    /// at most `bytes.len()`), sharing one allocation; `None` if `ends` are not so, or a piece
    /// starts past 4 GiB.
    pub fn split(bytes: &[u8], ends: &[usize]) -> Option<Vec<Name>> {
        let buf = NameBuffer::from_header_and_slice((), bytes);
        let mut start = 0usize;
        let mut names = Vec::with_capacity(ends.len());
        for &end in ends {
            if end < start || end > bytes.len() {
                return None;
            }
            let len = u32::try_from(end - start).ok().filter(|len| *len < u32::MAX)?;
            let prefix = name_prefix(bytes.get(start..end).unwrap_or_default());
            names.push(Name { buf: buf.clone(), start: u32::try_from(start).ok()?, len, prefix });
            start = end;
        }
        Some(names)
    }

    /// The piece `range` of `buf` as a name (sharing the buffer); `None` if the range is not
    /// within it or starts past 4 GiB.
    fn piece(buf: &NameBuffer, range: std::ops::Range<usize>) -> Option<Name> {
        if range.start > range.end || range.end > buf.slice.len() {
            return None;
        }
        let len = u32::try_from(range.end - range.start).ok().filter(|len| *len < u32::MAX)?;
        let prefix = name_prefix(buf.slice.get(range.clone()).unwrap_or_default());
        Some(Name { buf: buf.clone(), start: u32::try_from(range.start).ok()?, len, prefix })
    }

    /// The address of the name's buffer, for [`prefetch`](super::prefetch): triomphe's
    /// `ThinArc::ptr` is the start of its `ArcInner`, the reference count (only a hint relies on it).
    #[inline]
    pub(crate) fn buffer_address(&self) -> *const u8 {
        self.buf.ptr().cast::<u8>()
    }

    /// The address of the name's first eight bytes (what a search compares), for
    /// [`prefetch`](super::prefetch).
    #[inline]
    pub(crate) fn prefix_address(&self) -> *const u64 {
        std::ptr::from_ref(&self.prefix)
    }

    /// `self.cmp(key)` bytewise, `key_prefix` being [`name_prefix`] of `key`: decided by the
    /// prefixes when they differ, without reading the name's buffer.
    #[inline]
    pub(crate) fn cmp_bytes(&self, key: &[u8], key_prefix: u64) -> std::cmp::Ordering {
        match self.prefix.cmp(&key_prefix) {
            std::cmp::Ordering::Equal => compare_name_bytes(self.as_bytes(), key),
            decided => decided,
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        let start = self.start as usize;
        let piece = if self.len == u32::MAX {
            self.buf.slice.get(start..)
        } else {
            self.buf.slice.get(start..start + self.len as usize)
        };
        piece.unwrap_or_default()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        // The same piece of the same buffer (a name copied along with its node) is equal without
        // reading the bytes.
        self.prefix == other.prefix
            && ((self.buf.ptr() == other.buf.ptr() && self.start == other.start && self.len == other.len)
                || self.as_bytes() == other.as_bytes())
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.cmp_bytes(other.as_bytes(), other.prefix)
    }
}

/// `a.cmp(b)` (bytewise, a prefix first), eight bytes at a time and inline. Names are short (a
/// few to a few dozen bytes) and compared in every directory search: a call to the C library's
/// `memcmp` per probe cost more than the comparison itself (8.6% of the replay thread; this made
/// the default replay 1.05–1.07× faster, docs/benchmarks.md at c117370, "Issue 11, ninth round").
#[inline]
pub(crate) fn compare_name_bytes(mut a: &[u8], mut b: &[u8]) -> std::cmp::Ordering {
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        if x != y {
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
        (a, b) = (rest_a, rest_b);
    }
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl From<&[u8]> for Name {
    fn from(bytes: &[u8]) -> Name {
        Name::new(bytes)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text.as_bytes())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.as_bytes()) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => write!(f, "0x{}", hex::encode(self.as_bytes())),
        }
    }
}

/// One buffer holding the names and small contents values decoded from one record: each becomes
/// a piece of it ([`SharedBytes::name`], [`SharedBytes::value`]), so that decoding a node costs one
/// allocation for all of its names and inline values, not one per name or value.
#[derive(Clone)]
pub struct SharedBytes(NameBuffer);

impl SharedBytes {
    /// A buffer holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> SharedBytes {
        SharedBytes(NameBuffer::from_header_and_slice((), bytes))
    }

    /// The bytes at `range` as a name; `None` if `range` is not within the buffer or starts past
    /// 4 GiB.
    pub fn name(&self, range: std::ops::Range<usize>) -> Option<Name> {
        Name::piece(&self.0, range)
    }

    /// The bytes at `range` as a contents value; `None` as for [`name`](SharedBytes::name).
    pub fn value(&self, range: std::ops::Range<usize>) -> Option<InlineValue> {
        Name::piece(&self.0, range).map(|piece| InlineValue { piece })
    }
}

/// A small contents value held in a piece of a [`SharedBytes`] buffer (as decoded from a store,
/// inline in its parent's record): no allocation of its own, and no cached hash (the hash of a
/// value of at most a few dozen bytes is one BLAKE2b block, computed when asked).
#[derive(Clone, PartialEq, Eq)]
pub struct InlineValue {
    piece: Name,
}

impl InlineValue {
    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.piece.as_bytes()
    }

    /// The contents hash (computed at each call).
    pub fn hash(&self) -> Hash {
        schema::contents_hash(self.piece.as_bytes())
    }

    /// The address of the value's buffer, for [`prefetch`](super::prefetch).
    #[inline]
    pub(crate) fn buffer_address(&self) -> *const u8 {
        self.piece.buffer_address()
    }

    /// The value as [`Contents`] of its own.
    pub fn to_contents(&self) -> Arc<Contents> {
        Arc::new(Contents::from_slice(self.piece.as_bytes()))
    }
}

impl fmt::Debug for InlineValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InlineValue({} bytes)", self.piece.as_bytes().len())
    }
}

/// Values of at most this many bytes are held inside the [`Contents`] itself (most Tezos values:
/// balances, counters, flags), saving a heap allocation and a pointer chase per value. 22 keeps
/// `Contents` at 64 bytes, the size it has with a boxed value (a larger buffer would grow every
/// value, large ones included: +8 MiB of peak RSS with 32 on the default trace).
const SMALL_CONTENTS: usize = 22;

enum Bytes {
    Small { len: u8, buf: [u8; SMALL_CONTENTS] },
    Large(Box<[u8]>),
}

impl Bytes {
    fn small(bytes: &[u8]) -> Option<Bytes> {
        let mut buf = [0u8; SMALL_CONTENTS];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Bytes::Small { len: u8::try_from(bytes.len()).ok()?, buf })
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Small { len, buf } => buf.get(..usize::from(*len)).unwrap_or_default(),
            Bytes::Large(bytes) => bytes,
        }
    }
}

/// A contents value with its lazily computed hash.
pub struct Contents {
    bytes: Bytes,
    hash: OnceLock<Hash>,
}

impl Default for Contents {
    fn default() -> Contents {
        Contents::from_slice(&[])
    }
}

impl Contents {
    /// Contents holding `bytes` (kept in their own allocation: copying a small value in and
    /// freeing the box was measured to raise the peak RSS, the freed boxes fragmenting the heap).
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Contents {
        Contents { bytes: Bytes::Large(bytes.into()), hash: OnceLock::new() }
    }

    /// Contents holding a copy of `bytes` (no heap allocation for a small value).
    pub fn from_slice(bytes: &[u8]) -> Contents {
        let bytes = Bytes::small(bytes).unwrap_or_else(|| Bytes::Large(bytes.into()));
        Contents { bytes, hash: OnceLock::new() }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The contents hash, computed once.
    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| schema::contents_hash(self.bytes.as_slice()))
    }
}

impl Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes.as_slice()
    }
}

impl fmt::Debug for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Contents({} bytes)", self.bytes.as_slice().len())
    }
}

/// A reference to a contents value: in memory, or stored and loaded on demand.
#[derive(Clone, Debug)]
pub enum ContentsRef {
    /// Held in memory.
    Mem(Arc<Contents>),
    /// Held in memory in a piece of a buffer shared with its node's other names and values (a
    /// small value decoded from a store's record of its parent).
    Inline(InlineValue),
    /// Known by hash; its bytes are loaded from the source at `key`.
    Stored {
        /// The contents hash.
        hash: Hash,
        /// Where the source finds it.
        key: ObjectKey,
    },
}

impl ContentsRef {
    /// The contents hash (never needs a load).
    pub fn hash(&self) -> Hash {
        match self {
            ContentsRef::Mem(contents) => contents.hash(),
            ContentsRef::Inline(value) => value.hash(),
            ContentsRef::Stored { hash, .. } => *hash,
        }
    }

    /// The value's bytes if it is held in memory ([`Mem`](ContentsRef::Mem) or
    /// [`Inline`](ContentsRef::Inline)); `None` if it must be loaded.
    pub fn held_bytes(&self) -> Option<&[u8]> {
        match self {
            ContentsRef::Mem(contents) => Some(contents.as_bytes()),
            ContentsRef::Inline(value) => Some(value.as_bytes()),
            ContentsRef::Stored { .. } => None,
        }
    }

    /// Whether computing [`hash`](ContentsRef::hash) caches it (or needs no computation): false
    /// for an [`Inline`](ContentsRef::Inline) value, whose hash is computed at each call.
    pub fn hash_is_cached(&self) -> bool {
        !matches!(self, ContentsRef::Inline(_))
    }
}

/// A reference to a directory node or an inode: in memory, or stored and loaded on demand.
#[derive(Clone, Debug)]
pub enum NodeRef {
    /// Held in memory (possibly modified, then without a hash until asked).
    Mem(Arc<Node>),
    /// Known by hash; loaded from the source at `key` on first access.
    Stored {
        /// The node's (or inode's) hash.
        hash: Hash,
        /// Where the source finds it.
        key: ObjectKey,
    },
}

impl NodeRef {
    /// The node's hash, computing and caching it for modified in-memory nodes.
    pub fn hash(&self) -> Hash {
        match self {
            NodeRef::Mem(node) => node.hash(),
            NodeRef::Stored { hash, .. } => *hash,
        }
    }
}

/// A directory entry's target: a contents value or a sub-directory.
#[derive(Clone, Debug)]
pub enum Entry {
    /// A contents value.
    Contents(ContentsRef),
    /// A sub-directory (always a directory root: flat, or an inode `Tree` at depth 0).
    Node(NodeRef),
}

impl Entry {
    /// Contents or node.
    pub fn kind(&self) -> Kind {
        match self {
            Entry::Contents(_) => Kind::Contents,
            Entry::Node(_) => Kind::Node,
        }
    }

    /// The hash of the target.
    pub fn hash(&self) -> Hash {
        match self {
            Entry::Contents(contents) => contents.hash(),
            Entry::Node(node) => node.hash(),
        }
    }

    /// An in-memory contents entry holding `bytes`.
    pub fn contents(bytes: impl Into<Box<[u8]>>) -> Entry {
        Entry::Contents(ContentsRef::Mem(Arc::new(Contents::new(bytes))))
    }
}

/// Entries of a flat directory or an inode `Values` leaf, sorted by name, names unique.
pub type Entries = Vec<(Name, Entry)>;

/// An inode `Tree`: the non-empty buckets of a large directory (or of a part of one) at `depth`.
#[derive(Clone, Debug)]
pub struct InodeTree {
    /// Depth of this inode; the seed of its bucket function. 0 for a directory root.
    pub depth: u8,
    /// Total number of directory entries below this inode.
    pub length: u64,
    /// `(bucket index, child inode)`, sorted by index; empty buckets are absent.
    pub children: Vec<(u8, NodeRef)>,
}

impl InodeTree {
    /// The position of bucket `bucket` in `children` (`Ok`), or where it would go (`Err`), as a
    /// binary search by bucket gives it. A bucket whose position is its own index (every bucket of
    /// a full inode, as those of a large directory's upper levels are) is found by reading that one
    /// child: a binary search read five cold lines of the children one after the other (3% of a
    /// replay's reading thread, docs/benchmarks.md at c117370, "Issue 11, nineteenth round").
    #[inline]
    pub fn find_bucket(&self, bucket: u8) -> Result<usize, usize> {
        // Buckets are sorted and unique: one at its own index has every lower bucket before it.
        if let Some((probe, _)) = self.children.get(usize::from(bucket))
            && *probe == bucket
        {
            return Ok(usize::from(bucket));
        }
        self.children.binary_search_by_key(&bucket, |(probe, _)| *probe)
    }
}

/// What a node holds.
#[derive(Clone, Debug)]
pub enum NodeBody {
    /// A directory of at most 256 entries, hashed flat.
    Flat(Entries),
    /// An inner inode leaf of at most 32 entries (depth ≥ 1).
    Values(Entries),
    /// An inode `Tree`: the root of a directory above 256 entries (depth 0), or an inner inode of
    /// more than 32 entries.
    Tree(InodeTree),
}

impl NodeBody {
    /// Calls `f` on each child reference: the sub-directories among a directory's (or inode
    /// leaf's) entries, or an inode tree's children.
    pub(crate) fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a NodeRef)) {
        match self {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                for (_, entry) in entries {
                    if let Entry::Node(child) = entry {
                        f(child);
                    }
                }
            }
            NodeBody::Tree(tree) => tree.children.iter().for_each(|(_, child)| f(child)),
        }
    }
}

/// The keys a store surely holds, for [`Node::detached_copy`]: those of `store` at positions from
/// `from` on (below, a garbage collection may have removed records). Of those, the nodes written
/// at `recent_from` or later stay in memory, and the inode trees written at `recent_inodes_from`
/// or later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldKeys {
    /// The store whose keys these are.
    pub store: StoreId,
    /// The first position surely held.
    pub from: u64,
    /// Nodes stored at this position or later (the last ones written) are kept in memory by a
    /// copy; `u64::MAX`: none is.
    pub recent_from: u64,
    /// Inode trees ([`NodeBody::Tree`]: a large directory's root and inner inodes) stored at this
    /// position or later are kept in memory by a copy as well; `u64::MAX`: none is (beyond
    /// `recent_from`).
    pub recent_inodes_from: u64,
}

impl HeldKeys {
    /// Whether a copy refers to `child`, stored at `key`, by its key rather than in memory.
    fn detaches(&self, key: ObjectKey, child: &Node) -> bool {
        key.offset_in(self.store).is_some_and(|at| {
            at >= self.from
                && at < self.recent_from
                && (at < self.recent_inodes_from || !matches!(child.body, NodeBody::Tree(_)))
        })
    }
}

/// A directory node or an inode, with caches for its hash and its storage key.
pub struct Node {
    body: NodeBody,
    hash: OnceLock<Hash>,
    key: OnceLock<ObjectKey>,
    /// The patch chain length of the record at `key`, as the store that read or wrote it noted
    /// ([`NO_CHAIN`]: not noted).
    chain: AtomicU8,
    /// The version this node was copied from for a change, until the node is stored: a store
    /// writes the node as changes to it (a patch) without looking it up again.
    origin: Mutex<Option<Arc<Node>>>,
}

/// The most versions not stored that the origins of a node chain in memory
/// ([`Node::origin_for_copy`]).
pub const MAX_UNSTORED_ORIGINS: usize = 16;

/// [`Node::record_chain`] not noted.
const NO_CHAIN: u8 = u8::MAX;

impl Clone for Node {
    /// Clones the body and keeps the caches (they describe the same value); not the origin.
    fn clone(&self) -> Node {
        super::prefetch::copy_targets(&self.body, false);
        self.with_body(self.body.clone())
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Formatting recurses through in-memory children: guarded, as every per-level recursion.
        crate::stack::guarded(|| {
            f.debug_struct("Node").field("body", &self.body).field("key", &self.key.get()).finish()
        })
    }
}

impl Node {
    /// A node with `body` and no cached hash.
    pub fn new(body: NodeBody) -> Node {
        Node::with_caches(body, OnceLock::new())
    }

    /// A node whose hash is already known (as decoded from a store); the hash is trusted.
    pub fn with_hash(body: NodeBody, hash: Hash) -> Node {
        Node::with_caches(body, OnceLock::from(hash))
    }

    fn with_caches(body: NodeBody, hash: OnceLock<Hash>) -> Node {
        Node { body, hash, key: OnceLock::new(), chain: AtomicU8::new(NO_CHAIN), origin: Mutex::new(None) }
    }

    /// A copy of this node to be changed, which remembers this node as its origin (until the copy
    /// is stored: see [`origin`](Node::origin)).
    pub fn copy_for_change(self: &Arc<Node>) -> Node {
        let copy = Node::clone(self);
        copy.set_origin(self.origin_for_copy());
        copy
    }

    /// The origin a copy of this node made for a change remembers: this node. But when this node
    /// is not stored and its origins chain more than [`MAX_UNSTORED_ORIGINS`] versions that are
    /// not stored either, this node forgets its own origin first (it is then written in full if
    /// it is ever stored), so that a chain of versions in memory stays that short.
    ///
    /// A caller that keeps every version of a tree and changes the newest without ever storing
    /// them (OCaml trees, which stay values after a change) copies a directory at each change;
    /// each copy remembering the one before made the chain of every version of every directory it
    /// changed stay in memory until a commit (3.5 GiB on the first block of a 100-block trace
    /// replayed through the OCaml bindings with persistent contexts, docs/ocaml.md). The versions
    /// that a store may still write (a commit being written while the next blocks change the
    /// tree: `PipelinedRepo` keeps up to 4 in flight) are within the bound, so their copies keep
    /// their patch bases.
    pub fn origin_for_copy(self: &Arc<Node>) -> Arc<Node> {
        let mut node = self.clone();
        for _ in 0..MAX_UNSTORED_ORIGINS {
            if node.stored_key().is_some() {
                return self.clone();
            }
            match node.origin() {
                Some(origin) => node = origin,
                None => return self.clone(),
            }
        }
        if node.stored_key().is_none()
            && let Ok(mut slot) = self.origin.lock()
        {
            drop(slot.take());
        }
        self.clone()
    }

    /// Remembers `origin` as the version this node was copied from.
    pub fn set_origin(&self, origin: Arc<Node>) {
        if let Ok(mut slot) = self.origin.lock() {
            *slot = Some(origin);
        }
    }

    /// The version this node was copied from for a change, if it is remembered: set by
    /// [`copy_for_change`](Node::copy_for_change) or [`set_origin`](Node::set_origin), forgotten
    /// once the node is stored ([`set_stored_key`](Node::set_stored_key)), so that a node never
    /// keeps a chain of its earlier versions in memory.
    pub fn origin(&self) -> Option<Arc<Node>> {
        self.origin.lock().ok().and_then(|slot| slot.clone())
    }

    /// The patch chain length of the record at the stored key, if the store noted it
    /// ([`note_record_chain`](Node::note_record_chain)).
    pub fn record_chain(&self) -> Option<u8> {
        Some(self.chain.load(Ordering::Relaxed)).filter(|chain| *chain != NO_CHAIN)
    }

    /// Notes the patch chain length of the record at `key` (a pack store's: 0 for a full record,
    /// `n` for a patch on a record of chain `n - 1`), if `key` is the node's stored key (a node
    /// stored by two stores keeps the first one's key, and the chain of that key's record).
    pub fn note_record_chain(&self, key: ObjectKey, chain: u8) {
        if self.key.get() == Some(&key) {
            self.chain.store(chain.min(NO_CHAIN - 1), Ordering::Relaxed);
        }
    }

    /// The empty directory.
    pub fn empty() -> Node {
        Node::new(NodeBody::Flat(Vec::new()))
    }

    /// What the node holds.
    pub fn body(&self) -> &NodeBody {
        &self.body
    }

    /// A copy of this node whose in-memory children that a store holds (`held`: a stored key of
    /// its store at a position from `held.from` on, and a cached hash) are referred to by key
    /// instead: the copy does not keep them in memory. Those written at `held.recent_from` or
    /// later stay in memory (the next blocks read them without a lookup), and the inode trees
    /// written at `held.recent_inodes_from` or later. Same value, same hash;
    /// the caches are kept. Copy-on-write uses it when the tree's source is such a store
    /// ([`ObjectSource::held_keys`](crate::ObjectSource::held_keys)).
    pub fn detached_copy(&self, held: HeldKeys) -> Node {
        let detach = |child: &NodeRef| match child {
            NodeRef::Mem(node) => match (node.stored_key(), node.cached_hash()) {
                (Some(key), Some(hash)) if held.detaches(key, node) => NodeRef::Stored { hash, key },
                _ => child.clone(),
            },
            NodeRef::Stored { .. } => child.clone(),
        };
        super::prefetch::copy_targets(&self.body, true);
        let body = match &self.body {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let entries = entries
                    .iter()
                    .map(|(name, entry)| {
                        let entry = match entry {
                            Entry::Node(child) => Entry::Node(detach(child)),
                            Entry::Contents(_) => entry.clone(),
                        };
                        (name.clone(), entry)
                    })
                    .collect();
                if matches!(self.body, NodeBody::Flat(_)) {
                    NodeBody::Flat(entries)
                } else {
                    NodeBody::Values(entries)
                }
            }
            NodeBody::Tree(tree) => NodeBody::Tree(InodeTree {
                depth: tree.depth,
                length: tree.length,
                children: tree.children.iter().map(|(index, child)| (*index, detach(child))).collect(),
            }),
        };
        self.with_body(body)
    }

    /// The addresses of the hash and key caches (a detached copy reads them), for
    /// [`prefetch`](super::prefetch).
    pub(crate) fn cache_addresses(&self) -> (*const OnceLock<Hash>, *const OnceLock<ObjectKey>) {
        (std::ptr::from_ref(&self.hash), std::ptr::from_ref(&self.key))
    }

    /// A node holding `body` (the same value as this one's) with this one's caches, no origin.
    fn with_body(&self, body: NodeBody) -> Node {
        Node {
            body,
            hash: self.hash.clone(),
            key: self.key.clone(),
            chain: AtomicU8::new(self.chain.load(Ordering::Relaxed)),
            origin: Mutex::new(None),
        }
    }

    /// The body, taken out of the node (its caches and origin are dropped with it).
    pub fn into_body(mut self) -> NodeBody {
        std::mem::replace(&mut self.body, NodeBody::Flat(Vec::new()))
    }

    /// Mutable access to the body; forgets the cached hash and key, since the value changes.
    pub fn body_mut(&mut self) -> &mut NodeBody {
        self.hash = OnceLock::new();
        self.key = OnceLock::new();
        *self.chain.get_mut() = NO_CHAIN;
        &mut self.body
    }

    /// The key at which a store holds exactly this value, if recorded (by any store: see
    /// [`stored_offset_in`](Node::stored_offset_in)).
    pub fn stored_key(&self) -> Option<ObjectKey> {
        self.key.get().copied()
    }

    /// The position at which `store` holds exactly this value, if `store` recorded it.
    #[inline]
    pub fn stored_offset_in(&self, store: StoreId) -> Option<u64> {
        self.key.get().and_then(|key| key.offset_in(store))
    }

    /// Records that a store holds this value at `key` (first record wins: a node committed to
    /// two stores keeps the first one's key, and the second store writes it again each time).
    pub fn set_stored_key(&self, key: ObjectKey) {
        let _ = self.key.set(key);
        if let Ok(mut slot) = self.origin.lock() {
            // Stored: the origin is no longer needed (and would chain versions in memory).
            drop(slot.take());
        }
    }

    /// The cached hash, if computed.
    pub fn cached_hash(&self) -> Option<Hash> {
        self.hash.get().copied()
    }

    /// Number of directory entries held (for a `Tree`, all entries below it).
    pub fn length(&self) -> u64 {
        match &self.body {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => entries.len() as u64,
            NodeBody::Tree(tree) => tree.length,
        }
    }

    /// The node's hash under the Tezos schema, computed once and cached, with those of its
    /// in-memory descendants that lack one: level by level from the deepest, several at a time
    /// (`node_hash.rs`).
    pub fn hash(&self) -> Hash {
        if let Some(hash) = self.hash.get() {
            return *hash;
        }
        crate::stack::guarded(|| {
            node_hash::hash_all(&[self]);
            *self.hash.get_or_init(|| node_hash::hash_alone(self))
        })
    }

    /// Computes and caches the hashes of `nodes` and of their in-memory descendants that lack
    /// one, as [`hash`](Node::hash) does for one node, batching the pre-images of all of them
    /// (for a writer hashing many independent subtrees: [`Tree::dirty_subtrees`](crate::Tree::dirty_subtrees)).
    pub fn hash_all(nodes: &[Arc<Node>]) {
        let nodes: Vec<&Node> = nodes.iter().map(|node| &**node).collect();
        crate::stack::guarded(|| node_hash::hash_all(&nodes));
    }
}

impl Drop for Node {
    /// Drops the body on a [guarded](crate::stack::guarded) stack: dropping the last reference to
    /// a deep chain of in-memory directories drops it level by level, recursively.
    ///
    /// The versions it was copied from (its origin, theirs, ...) are dropped one after the
    /// other, not recursively: a persistent tree changed many times without being stored (a
    /// caller keeping every version, as OCaml contexts do) holds a chain of them as long as its
    /// history, which a recursive drop would follow to the end of the thread's stack.
    fn drop(&mut self) {
        let mut origin = self.origin.get_mut().ok().and_then(Option::take);
        while let Some(node) = origin {
            origin = match Arc::try_unwrap(node) {
                // The last reference: take its origin before it drops (without one).
                Ok(mut node) => node.origin.get_mut().ok().and_then(Option::take),
                // Still held elsewhere: whoever holds it drops the rest.
                Err(_) => None,
            };
        }
        let body = std::mem::replace(&mut self.body, NodeBody::Flat(Vec::new()));
        let has_children = match &body {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => !entries.is_empty(),
            NodeBody::Tree(tree) => !tree.children.is_empty(),
        };
        if has_children {
            crate::stack::guarded(move || drop(body));
        }
    }
}

mod node_hash;

#[cfg(test)]
mod tests;
