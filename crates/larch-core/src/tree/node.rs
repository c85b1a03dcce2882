//! The values a context tree is made of: names, contents, directory nodes and inode tries, each
//! either held in memory or known only by hash and key (lazy), with a per-node hash cache.

use crate::hash::Hash;
use crate::schema::{self, Kind};
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// Where an object lives in an [`ObjectSource`](crate::ObjectSource) (a pack offset for the disk store).
pub type ObjectKey = u64;

/// A step of a path: arbitrary bytes, ordered bytewise (OCaml `String.compare`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<[u8]>);

impl Name {
    /// A name holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Name {
        Name(Arc::from(bytes))
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
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
        match std::str::from_utf8(&self.0) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => write!(f, "0x{}", hex::encode(&self.0)),
        }
    }
}

/// A contents value with its lazily computed hash.
#[derive(Default)]
pub struct Contents {
    bytes: Box<[u8]>,
    hash: OnceLock<Hash>,
}

impl Contents {
    /// Contents holding `bytes`.
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Contents {
        Contents { bytes: bytes.into(), hash: OnceLock::new() }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The contents hash, computed once.
    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| schema::contents_hash(&self.bytes))
    }
}

impl Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Debug for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Contents({} bytes)", self.bytes.len())
    }
}

/// A reference to a contents value: in memory, or stored and loaded on demand.
#[derive(Clone, Debug)]
pub enum ContentsRef {
    /// Held in memory.
    Mem(Arc<Contents>),
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
            ContentsRef::Stored { hash, .. } => *hash,
        }
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

/// A directory node or an inode, with caches for its hash and its storage key.
pub struct Node {
    body: NodeBody,
    hash: OnceLock<Hash>,
    key: OnceLock<ObjectKey>,
}

impl Clone for Node {
    /// Clones the body and keeps the caches (they describe the same value).
    fn clone(&self) -> Node {
        Node { body: self.body.clone(), hash: self.hash.clone(), key: self.key.clone() }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node").field("body", &self.body).field("key", &self.key.get()).finish()
    }
}

impl Node {
    /// A node with `body` and no cached hash.
    pub fn new(body: NodeBody) -> Node {
        Node { body, hash: OnceLock::new(), key: OnceLock::new() }
    }

    /// A node whose hash is already known (as decoded from a store); the hash is trusted.
    pub fn with_hash(body: NodeBody, hash: Hash) -> Node {
        Node { body, hash: OnceLock::from(hash), key: OnceLock::new() }
    }

    /// The empty directory.
    pub fn empty() -> Node {
        Node::new(NodeBody::Flat(Vec::new()))
    }

    /// What the node holds.
    pub fn body(&self) -> &NodeBody {
        &self.body
    }

    /// Mutable access to the body; forgets the cached hash and key, since the value changes.
    pub fn body_mut(&mut self) -> &mut NodeBody {
        self.hash = OnceLock::new();
        self.key = OnceLock::new();
        &mut self.body
    }

    /// The key at which a store holds exactly this value, if recorded.
    pub fn stored_key(&self) -> Option<ObjectKey> {
        self.key.get().copied()
    }

    /// Records that a store holds this value at `key` (first record wins).
    pub fn set_stored_key(&self, key: ObjectKey) {
        let _ = self.key.set(key);
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

    /// The node's hash under the Tezos schema, computed bottom-up once and cached.
    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| compute_hash(&self.body))
    }
}

fn entry_refs(entries: &Entries) -> impl Iterator<Item = schema::EntryRef<'_>> {
    entries.iter().map(|(name, entry)| (name.as_bytes(), entry.kind(), entry.hash()))
}

fn compute_hash(body: &NodeBody) -> Hash {
    // Children are hashed in a first pass, so that the pre-image buffer is free while they hash and
    // the second pass only reads their caches.
    match body {
        NodeBody::Flat(entries) => {
            for (_, entry) in entries {
                let _ = entry.hash();
            }
            schema::flat_node_hash(entries.len(), entry_refs(entries))
        }
        NodeBody::Values(entries) => {
            for (_, entry) in entries {
                let _ = entry.hash();
            }
            schema::values_inode_hash(entries.len(), entry_refs(entries))
        }
        NodeBody::Tree(tree) => {
            for (_, child) in &tree.children {
                let _ = child.hash();
            }
            let pointers = tree.children.iter().map(|(index, child)| (*index, child.hash()));
            schema::tree_inode_hash(tree.depth, tree.length, tree.children.len(), pointers)
        }
    }
}
