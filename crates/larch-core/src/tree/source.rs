//! The object-source seam: how a lazy tree loads the nodes and contents it knows only by key.

use super::node::{Contents, ContentsRef, Entry, Name, Node, NodeBody, NodeRef, ObjectKey, StoreId};
use crate::hash::Hash;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// A failure to load an object that a tree refers to.
#[derive(Debug, thiserror::Error)]
#[error("cannot load {what} with hash {hash} at key {key}: {reason}")]
pub struct LoadError {
    /// What was being loaded: "node" or "contents".
    pub what: &'static str,
    /// The key that was asked for.
    pub key: ObjectKey,
    /// The hash the reference carried.
    pub hash: Hash,
    /// The source's own error.
    #[source]
    pub reason: Box<dyn std::error::Error + Send + Sync>,
}

/// Loads the objects a lazy tree refers to. A loaded node's children are themselves usually lazy
/// (`Stored`), as decoded from one record; a source may cache what it decodes.
pub trait ObjectSource: Send + Sync + Debug {
    /// Loads the directory node or inode stored at `key`, whose hash is `hash`.
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError>;
    /// Loads the contents stored at `key`, whose hash is `hash`.
    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError>;

    /// Loads the directory at `key` like [`ObjectSource::load_node`], found among the entries
    /// `leaf` of an inode leaf of a large directory: a source may then read the leaf's other
    /// stored sub-directories ahead of their use (on another thread), when many of a large
    /// directory's sub-directories are being read cold. The default: `load_node`.
    fn load_node_among(
        &self,
        key: ObjectKey,
        hash: &Hash,
        leaf: &[(Name, Entry)],
    ) -> Result<Arc<Node>, LoadError> {
        let _ = leaf;
        self.load_node(key, hash)
    }

    /// Loads the inode stored at `key` (a child of an inode `Tree`: an inner inode or a leaf of a
    /// large directory, never a directory's root) like [`ObjectSource::load_node`]. A source may
    /// read it knowing what it is: a store's inode records are mostly larger than its directories'
    /// (a leaf holds up to 32 entries with their hashes, a tree inode up to 32 hashes), so a pack
    /// store sizes their first reads apart. The default: `load_node`.
    fn load_inode(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.load_node(key, hash)
    }

    /// The keys this source surely holds, if it is one store (a pack store). A node copied for a
    /// change then refers to its in-memory children held there by their keys, but for the last
    /// ones written ([`Node::detached_copy`](crate::Node::detached_copy)), so that a tree kept
    /// across commits does not keep every node written before it in memory. `None` (the
    /// default): children are copied as they are.
    fn held_keys(&self) -> Option<super::node::HeldKeys> {
        None
    }

    /// Whether a node copied for a change remembers the version it was copied from
    /// ([`Node::origin`](crate::Node::origin)) until it is stored: a store that writes changed
    /// nodes as patches on their earlier versions then finds each one without a lookup. `false`
    /// (the default): nothing is remembered.
    fn keeps_origins(&self) -> bool {
        false
    }

    /// Told of an in-memory node, stored and hashed, that a copy for a change has just referred
    /// to by key instead ([`ObjectSource::held_keys`]): the copy no longer keeps it in memory, and
    /// a later read of it through the copy would load it by key. A source with a cache may keep
    /// it there (a decoded node like any other: its in-memory children by key too). The default:
    /// nothing.
    fn offer_detached(&self, node: &Arc<Node>) {
        let _ = node;
    }
}

/// The source of purely in-memory trees: it holds nothing, so every load fails.
#[derive(Debug, Default)]
pub struct NoSource;

#[derive(Debug, thiserror::Error)]
#[error("this tree has no object source (key {0} is dangling)")]
struct NoSourceError(ObjectKey);

impl ObjectSource for NoSource {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        Err(LoadError { what: "node", key, hash: *hash, reason: Box::new(NoSourceError(key)) })
    }
    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        Err(LoadError { what: "contents", key, hash: *hash, reason: Box::new(NoSourceError(key)) })
    }
}

#[derive(Debug, thiserror::Error)]
enum MemorySourceError {
    #[error("no object at key {0}")]
    Missing(ObjectKey),
    #[error("key {0} belongs to another store than {1}")]
    OtherStore(ObjectKey, StoreId),
    #[error("the object at key {key} has hash {actual}, the reference says {expected}")]
    HashMismatch { key: ObjectKey, expected: Hash, actual: Hash },
}

#[derive(Debug, Default)]
struct MemoryObjects {
    nodes: Vec<Arc<Node>>,
    contents: Vec<Arc<Contents>>,
}

/// An in-memory object store: `persist` turns a tree's in-memory nodes into stored records whose
/// children are lazy references, exactly as a disk store would, and loads count as a disk's reads.
#[derive(Debug)]
pub struct MemorySource {
    id: StoreId,
    objects: RwLock<MemoryObjects>,
    node_loads: AtomicU64,
    contents_loads: AtomicU64,
}

/// Contents shorter than this are kept inline in their parent record by [`MemorySource::persist`],
/// as the disk store does; longer ones become objects of their own.
pub const MEMORY_INLINE_CONTENTS_MAX: usize = 32;

impl Default for MemorySource {
    fn default() -> MemorySource {
        MemorySource {
            id: StoreId::fresh(),
            objects: RwLock::default(),
            node_loads: AtomicU64::new(0),
            contents_loads: AtomicU64::new(0),
        }
    }
}

impl MemorySource {
    /// An empty source.
    pub fn new() -> MemorySource {
        MemorySource::default()
    }

    /// This source's identity: the store of the keys it hands out.
    pub fn id(&self) -> StoreId {
        self.id
    }

    /// Number of node loads served so far.
    pub fn node_loads(&self) -> u64 {
        self.node_loads.load(Ordering::Relaxed)
    }

    /// Number of contents loads served so far.
    pub fn contents_loads(&self) -> u64 {
        self.contents_loads.load(Ordering::Relaxed)
    }

    /// Number of stored nodes and contents objects.
    pub fn object_counts(&self) -> (usize, usize) {
        let objects = self.objects.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        (objects.nodes.len(), objects.contents.len())
    }

    /// Stores every in-memory node reachable from `entry` that this source does not hold yet,
    /// and returns the lazy reference to it. Nodes this source already holds (a key of its own)
    /// are not written again; nodes and contents of another store (a key of another identity,
    /// recorded on a node or in a lazy reference) are copied, loading lazy parts from `source`,
    /// the source of the tree `entry` belongs to. (Loads happen with this source's lock held: a
    /// load from this very source is of another store's key, refused before taking the lock.)
    pub fn persist(&self, entry: &Entry, source: &dyn ObjectSource) -> Result<Entry, LoadError> {
        let mut objects = self.objects.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut persist = Persist { id: self.id, source, objects: &mut objects, copied: HashMap::new() };
        persist.entry(entry)
    }
}

/// One call of [`MemorySource::persist`].
struct Persist<'a> {
    id: StoreId,
    source: &'a dyn ObjectSource,
    objects: &'a mut MemoryObjects,
    /// Nodes of other stores copied by this call, by their key there, to their new reference.
    copied: HashMap<ObjectKey, NodeRef>,
}

impl Persist<'_> {
    fn entry(&mut self, entry: &Entry) -> Result<Entry, LoadError> {
        Ok(match entry {
            Entry::Contents(ContentsRef::Mem(contents)) if contents.len() >= MEMORY_INLINE_CONTENTS_MAX => {
                Entry::Contents(self.contents(contents.clone()))
            }
            Entry::Contents(ContentsRef::Inline(value))
                if value.as_bytes().len() >= MEMORY_INLINE_CONTENTS_MAX =>
            {
                Entry::Contents(self.contents(value.to_contents()))
            }
            Entry::Contents(ContentsRef::Stored { hash, key }) if key.store() != self.id => {
                let loaded = self.source.load_contents(*key, hash)?;
                if loaded.len() >= MEMORY_INLINE_CONTENTS_MAX {
                    Entry::Contents(self.contents(loaded))
                } else {
                    Entry::Contents(ContentsRef::Mem(loaded))
                }
            }
            Entry::Contents(contents) => Entry::Contents(contents.clone()),
            Entry::Node(node) => Entry::Node(crate::stack::guarded(|| self.node(node, None))?),
        })
    }

    fn contents(&mut self, contents: Arc<Contents>) -> ContentsRef {
        let key = ObjectKey::new(self.id, self.objects.contents.len() as u64);
        let hash = contents.hash();
        self.objects.contents.push(contents);
        ContentsRef::Stored { hash, key }
    }

    /// Persists `node`, which stands as a directory (`inode_parent` `None`) or as an inner inode
    /// below a `Tree` of that depth.
    fn node(&mut self, node: &NodeRef, inode_parent: Option<u8>) -> Result<NodeRef, LoadError> {
        let (node, foreign) = match node {
            NodeRef::Stored { key, .. } if key.store() == self.id => return Ok(node.clone()),
            NodeRef::Stored { key, .. } if self.copied.contains_key(key) => {
                // Another store's node already copied by this call (shared below several parents).
                return Ok(self.copied.get(key).cloned().unwrap_or_else(|| node.clone()));
            }
            NodeRef::Stored { hash, key } => (self.source.load_node(*key, hash)?, Some(*key)),
            NodeRef::Mem(node) => (node.clone(), None),
        };
        let fits = match (inode_parent, node.body()) {
            (None, NodeBody::Flat(_)) => true,
            (None, NodeBody::Tree(tree)) => tree.depth == 0,
            (Some(_), NodeBody::Values(_)) => true,
            (Some(depth), NodeBody::Tree(tree)) => u16::from(tree.depth) == u16::from(depth) + 1,
            _ => false,
        };
        if !fits {
            // A malformed part of another source is not copied (and cannot make the copy endless).
            return Err(LoadError {
                what: "node",
                key: ObjectKey::new(self.id, 0),
                hash: node.hash(),
                reason: "a node of the wrong shape or depth for its place in the tree".into(),
            });
        }
        let hash = node.hash();
        if let Some(offset) = node.stored_offset_in(self.id) {
            return Ok(NodeRef::Stored { hash, key: ObjectKey::new(self.id, offset) });
        }
        let body = match node.body() {
            NodeBody::Flat(list) => NodeBody::Flat(self.entries(list)?),
            NodeBody::Values(list) => NodeBody::Values(self.entries(list)?),
            NodeBody::Tree(tree) => {
                let mut stored = tree.clone();
                let depth = tree.depth;
                for (_, child) in &mut stored.children {
                    *child = crate::stack::guarded(|| self.node(child, Some(depth)))?;
                }
                NodeBody::Tree(stored)
            }
        };
        let key = ObjectKey::new(self.id, self.objects.nodes.len() as u64);
        let record = Node::with_hash(body, hash);
        record.set_stored_key(key);
        self.objects.nodes.push(Arc::new(record));
        // Recorded at once: a subtree shared below several parents is stored once.
        node.set_stored_key(key);
        if let Some(foreign) = foreign {
            self.copied.insert(foreign, NodeRef::Stored { hash, key });
        }
        Ok(NodeRef::Stored { hash, key })
    }

    fn entries(&mut self, list: &super::node::Entries) -> Result<super::node::Entries, LoadError> {
        // Exactly sized (collecting into a `Result` would grow the vector by doubling: stored
        // records would keep up to twice the memory their entries need).
        let mut out = Vec::with_capacity(list.len());
        for (name, entry) in list {
            out.push((name.clone(), self.entry(entry)?));
        }
        Ok(out)
    }
}

impl ObjectSource for MemorySource {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.node_loads.fetch_add(1, Ordering::Relaxed);
        let fail = |reason| LoadError { what: "node", key, hash: *hash, reason: Box::new(reason) };
        let index =
            key.offset_in(self.id).ok_or_else(|| fail(MemorySourceError::OtherStore(key, self.id)))?;
        let objects = self.objects.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let node = usize::try_from(index)
            .ok()
            .and_then(|index| objects.nodes.get(index))
            .ok_or_else(|| fail(MemorySourceError::Missing(key)))?;
        let actual = node.hash();
        if actual != *hash {
            return Err(fail(MemorySourceError::HashMismatch { key, expected: *hash, actual }));
        }
        Ok(node.clone())
    }

    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        self.contents_loads.fetch_add(1, Ordering::Relaxed);
        let fail = |reason| LoadError { what: "contents", key, hash: *hash, reason: Box::new(reason) };
        let index =
            key.offset_in(self.id).ok_or_else(|| fail(MemorySourceError::OtherStore(key, self.id)))?;
        let objects = self.objects.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let contents = usize::try_from(index)
            .ok()
            .and_then(|index| objects.contents.get(index))
            .ok_or_else(|| fail(MemorySourceError::Missing(key)))?;
        let actual = contents.hash();
        if actual != *hash {
            return Err(fail(MemorySourceError::HashMismatch { key, expected: *hash, actual }));
        }
        Ok(contents.clone())
    }
}
