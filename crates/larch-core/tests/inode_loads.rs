//! A tree loads the children of inode `Tree`s (a large directory's inner inodes and leaves)
//! through `ObjectSource::load_inode`, and every other node (directories, a large directory's
//! root) through `load_node`, whichever walk it is: find, list, add, remove.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{Contents, Hash, LoadError, MemorySource, Node, NodeBody, ObjectKey, ObjectSource, Tree};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A memory source counting both kinds of node loads, and checking what each one returns.
#[derive(Debug)]
struct Counting {
    inner: MemorySource,
    nodes: AtomicU64,
    inodes: AtomicU64,
}

impl ObjectSource for Counting {
    fn load_node(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        let node = self.inner.load_node(key, hash)?;
        let inner_inode = match node.body() {
            NodeBody::Values(_) => true,
            NodeBody::Tree(tree) => tree.depth > 0,
            NodeBody::Flat(_) => false,
        };
        assert!(!inner_inode, "an inner inode loaded as a directory");
        self.nodes.fetch_add(1, Ordering::Relaxed);
        Ok(node)
    }
    fn load_inode(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Node>, LoadError> {
        let node = self.inner.load_node(key, hash)?;
        let inner_inode = match node.body() {
            NodeBody::Values(_) => true,
            NodeBody::Tree(tree) => tree.depth > 0,
            NodeBody::Flat(_) => false,
        };
        assert!(inner_inode, "a directory loaded as an inode");
        self.inodes.fetch_add(1, Ordering::Relaxed);
        Ok(node)
    }
    fn load_contents(&self, key: ObjectKey, hash: &Hash) -> Result<Arc<Contents>, LoadError> {
        self.inner.load_contents(key, hash)
    }
}

const ENTRIES: usize = 2_000;

/// A lazy tree over a counting source: `big` a directory of [`ENTRIES`] values (an inode trie),
/// `small` one of two.
fn lazy_tree() -> (Tree, Arc<Counting>) {
    let mut tree = Tree::empty();
    for i in 0..ENTRIES {
        tree.add(&["big", format!("entry{i:05}").as_str()], vec![i as u8; 40]).unwrap();
    }
    tree.add(&["small", "a"], b"1".to_vec()).unwrap();
    tree.add(&["small", "b"], b"2".to_vec()).unwrap();
    let source = Arc::new(Counting {
        inner: MemorySource::new(),
        nodes: AtomicU64::new(0),
        inodes: AtomicU64::new(0),
    });
    let root = source.inner.persist(tree.root(), tree.source().as_ref()).unwrap();
    (Tree::from_entry(root, source.clone()), source)
}

fn counts(source: &Counting) -> (u64, u64) {
    (source.nodes.load(Ordering::Relaxed), source.inodes.load(Ordering::Relaxed))
}

#[test]
fn inode_children_are_loaded_as_inodes_by_every_walk() {
    let (tree, source) = lazy_tree();
    assert_eq!(tree.find(&["big", "entry00042"]).unwrap().unwrap().as_bytes(), &[42u8; 40][..]);
    let (nodes, inodes) = counts(&source);
    // The root and `big`'s root as directories; at least one inner inode down to the leaf.
    assert_eq!(nodes, 2);
    assert!(inodes >= 1, "{inodes}");

    assert_eq!(tree.find(&["small", "b"]).unwrap().unwrap().as_bytes(), b"2");
    assert_eq!(counts(&source).1, inodes, "a flat directory loads no inode");

    assert_eq!(tree.list(&["big"], 0, None).unwrap().len(), ENTRIES);
    let after_list = counts(&source).1;
    assert!(after_list > inodes, "listing a large directory loads its inodes");

    let mut changed = tree.clone();
    changed.add(&["big", "entry01999"], b"new".to_vec()).unwrap();
    changed.remove(&["big", "entry00007"]).unwrap();
    assert_eq!(changed.find(&["big", "entry01999"]).unwrap().unwrap().as_bytes(), b"new");
    assert!(changed.find(&["big", "entry00007"]).unwrap().is_none());
    assert!(counts(&source).1 > after_list, "changes load the inodes on their paths");
}
