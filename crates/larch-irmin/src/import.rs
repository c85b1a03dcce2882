//! Conversion of an Irmin commit's tree into a larch tree ready to be committed into a larch
//! store: subtrees equal (same hash) to the matching subtree of a *base* tree already in that
//! store are reused as they are; the rest is read from Irmin, verified, and built in memory.

use crate::error::{IrminError, Result};
use crate::store::{IrminCommit, IrminStore};
use larch_core::{
    Contents, ContentsRef, Entry, Hash, InodeTree, Name, Node, NodeBody, NodeRef, ObjectSource, Tree,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Directories nested deeper than this are refused ([`IrminError::TooDeep`]): the conversion
/// recurses once per level, and a real Tezos context is about 15 levels deep.
pub const MAX_NESTING: usize = 256;

/// What one conversion built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Nodes (directories and inodes) read from Irmin.
    pub nodes: u64,
    /// Contents values read from Irmin.
    pub contents: u64,
    /// Subtrees and values reused from the base tree.
    pub reused: u64,
}

struct Builder<'a> {
    store: &'a IrminStore,
    base_source: Option<Arc<dyn ObjectSource>>,
    nodes: HashMap<u64, NodeRef>,
    contents: HashMap<u64, Arc<Contents>>,
    stats: BuildStats,
    progress: &'a mut dyn FnMut(&BuildStats),
}

/// Builds the tree of `commit` for the larch store whose source is `dest`. With `base` (a tree
/// of that store, typically the first parent's, already imported), every subtree whose hash equals
/// the base's subtree at the same place is taken from the base instead of being read again.
/// Every object read from Irmin is verified (its larch hash equals Irmin's); the result's hash is
/// the commit's tree hash. `progress` is called every 4,096 objects.
pub fn build_tree(
    store: &IrminStore,
    commit: &IrminCommit,
    dest: Arc<dyn ObjectSource>,
    base: Option<&Tree>,
    progress: &mut dyn FnMut(&BuildStats),
) -> Result<(Tree, BuildStats)> {
    let base_root = match base.map(Tree::root) {
        Some(Entry::Node(node)) => Some(node.clone()),
        _ => None,
    };
    let mut builder = Builder {
        store,
        base_source: base.map(|tree| tree.source().clone()),
        nodes: HashMap::new(),
        contents: HashMap::new(),
        stats: BuildStats::default(),
        progress,
    };
    let root = builder.node(commit.tree_offset, &commit.tree_hash, base_root.as_ref(), 0)?;
    (builder.progress)(&builder.stats);
    let stats = builder.stats;
    Ok((Tree::from_entry(Entry::Node(root), dest), stats))
}

impl Builder<'_> {
    fn tick(&mut self) {
        if (self.stats.nodes + self.stats.contents).is_multiple_of(4096) {
            (self.progress)(&self.stats);
        }
    }

    /// The base node's body, if it can be loaded (a failure only means no reuse below it).
    fn base_node(&self, base: Option<&NodeRef>) -> Option<Arc<Node>> {
        match base? {
            NodeRef::Mem(node) => Some(node.clone()),
            NodeRef::Stored { hash, key } => self.base_source.as_ref()?.load_node(*key, hash).ok(),
        }
    }

    fn node(&mut self, offset: u64, hash: &Hash, base: Option<&NodeRef>, depth: usize) -> Result<NodeRef> {
        if let Some(base) = base
            && base.hash() == *hash
        {
            self.stats.reused += 1;
            return Ok(base.clone());
        }
        if let Some(built) = self.nodes.get(&offset) {
            return Ok(built.clone());
        }
        if depth > MAX_NESTING {
            return Err(IrminError::TooDeep { offset, limit: MAX_NESTING });
        }
        let loaded = self.store.load_node(offset, hash)?;
        self.stats.nodes += 1;
        self.tick();
        let base_node = self.base_node(base);
        let body = match loaded.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let base_entries = match (loaded.body(), base_node.as_ref().map(|n| n.body())) {
                    (NodeBody::Flat(_), Some(NodeBody::Flat(list)))
                    | (NodeBody::Values(_), Some(NodeBody::Values(list))) => Some(list),
                    _ => None,
                };
                let mut out = Vec::with_capacity(entries.len());
                for (name, entry) in entries {
                    let base_entry = base_entries.and_then(|list| find_entry(list, name));
                    out.push((name.clone(), self.entry(entry, base_entry, depth)?));
                }
                match loaded.body() {
                    NodeBody::Flat(_) => NodeBody::Flat(out),
                    _ => NodeBody::Values(out),
                }
            }
            NodeBody::Tree(tree) => {
                let base_children = match base_node.as_ref().map(|n| n.body()) {
                    Some(NodeBody::Tree(base_tree)) if base_tree.depth == tree.depth => {
                        Some(&base_tree.children)
                    }
                    _ => None,
                };
                let mut children = Vec::with_capacity(tree.children.len());
                for (bucket, child) in &tree.children {
                    let NodeRef::Stored { hash, key } = child else {
                        return Err(IrminError::corrupt(self.store.dir(), offset, "inode child in memory"));
                    };
                    let base_child = base_children
                        .and_then(|list| {
                            list.binary_search_by_key(bucket, |(b, _)| *b).ok().and_then(|i| list.get(i))
                        })
                        .map(|(_, child)| child);
                    let offset = self.store.offset_of(*key)?;
                    children.push((*bucket, self.node(offset, hash, base_child, depth + 1)?));
                }
                NodeBody::Tree(InodeTree { depth: tree.depth, length: tree.length, children })
            }
        };
        // The children's hashes are the ones the loaded node was verified with.
        let built = NodeRef::Mem(Arc::new(Node::with_hash(body, *hash)));
        self.nodes.insert(offset, built.clone());
        Ok(built)
    }

    fn entry(&mut self, entry: &Entry, base: Option<&Entry>, depth: usize) -> Result<Entry> {
        match entry {
            Entry::Node(NodeRef::Stored { hash, key }) => {
                let base = match base {
                    Some(Entry::Node(node)) => Some(node),
                    _ => None,
                };
                let offset = self.store.offset_of(*key)?;
                Ok(Entry::Node(self.node(offset, hash, base, depth + 1)?))
            }
            Entry::Contents(ContentsRef::Stored { hash, key }) => {
                if let Some(Entry::Contents(base)) = base
                    && base.hash() == *hash
                {
                    self.stats.reused += 1;
                    return Ok(Entry::Contents(base.clone()));
                }
                let key = self.store.offset_of(*key)?;
                if let Some(contents) = self.contents.get(&key) {
                    return Ok(Entry::Contents(ContentsRef::Mem(contents.clone())));
                }
                let contents = Arc::new(self.store.load_contents(key, hash)?);
                self.stats.contents += 1;
                self.tick();
                self.contents.insert(key, contents.clone());
                Ok(Entry::Contents(ContentsRef::Mem(contents)))
            }
            other => Ok(other.clone()),
        }
    }
}

fn find_entry<'a>(list: &'a [(Name, Entry)], name: &Name) -> Option<&'a Entry> {
    list.binary_search_by(|(probe, _)| probe.cmp(name)).ok().and_then(|i| list.get(i)).map(|(_, e)| e)
}
