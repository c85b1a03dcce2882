//! The object-source seam: how a lazy tree loads the nodes and contents it knows only by key.

use super::node::{Contents, ContentsRef, Entry, Node, NodeBody, NodeRef, ObjectKey};
use crate::hash::Hash;
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
#[derive(Debug, Default)]
pub struct MemorySource {
    objects: RwLock<MemoryObjects>,
    node_loads: AtomicU64,
    contents_loads: AtomicU64,
}

/// Contents shorter than this are kept inline in their parent record by [`MemorySource::persist`],
/// as the disk store does; longer ones become objects of their own.
pub const MEMORY_INLINE_CONTENTS_MAX: usize = 32;

impl MemorySource {
    /// An empty source.
    pub fn new() -> MemorySource {
        MemorySource::default()
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

    /// Stores every in-memory node reachable from `entry` that is not stored yet, and returns the
    /// lazy reference to it. Nodes already stored (recorded key) are not written again.
    pub fn persist(&self, entry: &Entry) -> Entry {
        let mut objects = self.objects.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        persist_entry(&mut objects, entry)
    }
}

fn persist_entry(objects: &mut MemoryObjects, entry: &Entry) -> Entry {
    match entry {
        Entry::Contents(ContentsRef::Mem(contents)) if contents.len() >= MEMORY_INLINE_CONTENTS_MAX => {
            let key = objects.contents.len() as ObjectKey;
            objects.contents.push(contents.clone());
            Entry::Contents(ContentsRef::Stored { hash: contents.hash(), key })
        }
        Entry::Contents(contents) => Entry::Contents(contents.clone()),
        Entry::Node(node) => Entry::Node(persist_node(objects, node)),
    }
}

fn persist_node(objects: &mut MemoryObjects, node: &NodeRef) -> NodeRef {
    let node = match node {
        NodeRef::Stored { .. } => return node.clone(),
        NodeRef::Mem(node) => node,
    };
    let hash = node.hash();
    if let Some(key) = node.stored_key() {
        return NodeRef::Stored { hash, key };
    }
    let entries = |entries: &super::node::Entries, objects: &mut MemoryObjects| {
        entries.iter().map(|(name, entry)| (name.clone(), persist_entry(objects, entry))).collect()
    };
    let body = match node.body() {
        NodeBody::Flat(list) => NodeBody::Flat(entries(list, objects)),
        NodeBody::Values(list) => NodeBody::Values(entries(list, objects)),
        NodeBody::Tree(tree) => {
            let mut stored = tree.clone();
            for (_, child) in &mut stored.children {
                *child = persist_node(objects, child);
            }
            NodeBody::Tree(stored)
        }
    };
    let key = objects.nodes.len() as ObjectKey;
    let record = Node::with_hash(body, hash);
    record.set_stored_key(key);
    objects.nodes.push(Arc::new(record));
    node.set_stored_key(key);
    NodeRef::Stored { hash, key }
}

impl ObjectSource for MemorySource {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        self.node_loads.fetch_add(1, Ordering::Relaxed);
        let objects = self.objects.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fail = |reason| LoadError { what: "node", key, hash: *hash, reason: Box::new(reason) };
        let node = usize::try_from(key)
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
        let objects = self.objects.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fail = |reason| LoadError { what: "contents", key, hash: *hash, reason: Box::new(reason) };
        let contents = usize::try_from(key)
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
