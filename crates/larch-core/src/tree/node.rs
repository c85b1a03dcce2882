//! The values a context tree is made of: names, contents, directory nodes and inode tries, each
//! either held in memory or known only by hash and key (lazy), with a per-node hash cache.

use crate::hash::Hash;
use crate::schema::Kind;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use super::key::{ObjectKey, StoreId};

mod contents;
mod name;

#[cfg(test)]
use contents::SMALL_CONTENTS;
pub use contents::{Contents, ContentsRef};
#[cfg(test)]
use name::compare_name_bytes;
pub(crate) use name::name_prefix;
pub use name::{InlineValue, Name, SharedBytes};

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
    pub(crate) fn detaches(&self, key: ObjectKey, child: &Node) -> bool {
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
        self.detached_copy_noting(held, &mut |_| {})
    }

    /// [`Node::detached_copy`], calling `on_detach` with each in-memory child the copy refers to
    /// by key (copy-on-write offers them to the tree's source,
    /// [`ObjectSource::offer_detached`](crate::ObjectSource::offer_detached)).
    pub(crate) fn detached_copy_noting(&self, held: HeldKeys, on_detach: &mut dyn FnMut(&Arc<Node>)) -> Node {
        let mut detach = |child: &NodeRef| match child {
            NodeRef::Mem(node) => match (node.stored_key(), node.cached_hash()) {
                (Some(key), Some(hash)) if held.detaches(key, node) => {
                    on_detach(node);
                    NodeRef::Stored { hash, key }
                }
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
    pub(crate) fn with_body(&self, body: NodeBody) -> Node {
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
