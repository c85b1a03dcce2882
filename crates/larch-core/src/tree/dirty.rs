//! The modified part of a tree, cut into independent subtrees for hashing on several threads.
//!
//! The hashes of modified ("dirty": in memory, hash not computed) nodes depend only on their
//! children's, so disjoint dirty subtrees can be hashed independently. When a tree holds enough
//! dirty nodes to pay for a thread (a large block rewrites ~16k directories), its dirty part is cut
//! into a frontier of subtrees ([`Tree::dirty_subtrees`](super::Tree::dirty_subtrees)); a caller
//! with threads (the store's commit) hashes them from several threads, then hashes the tree, whose
//! nodes above the frontier find their children's hashes cached. The hashes are those of the
//! serial computation: each node's hash is computed from the same pre-image whichever thread
//! computes it, and cached once (`OnceLock`: a node shared by two subtrees, as a copy makes, may
//! be computed by both, and the second result, equal, is dropped). This crate starts no thread.

use super::node::{Node, NodeRef};
use std::sync::Arc;

/// The frontier is cut until it holds at least this many subtrees, so that the two threads share
/// the work evenly whatever the sizes of the subtrees.
const FRONTIER_MIN: usize = 256;

/// At most this many levels are cut (a frontier of a deep, thin dirty path stops there).
const FRONTIER_MAX_LEVELS: usize = 24;

/// Calls `f` on each dirty child (directory or inode) of `node`.
fn for_each_dirty_child<'a>(node: &'a Node, mut f: impl FnMut(&'a Arc<Node>)) {
    node.body().for_each_child(|child| {
        if let NodeRef::Mem(child) = child
            && child.cached_hash().is_none()
        {
            f(child);
        }
    });
}

/// Number of dirty nodes below and including `root`, counting stops at `cap` (a walk with an
/// explicit stack: the depth of a tree is its user's choice).
pub(crate) fn count_dirty(root: &Arc<Node>, cap: usize) -> usize {
    if root.cached_hash().is_some() {
        return 0;
    }
    let mut count = 0;
    // Borrowed, not cloned: a clone per node was two atomic operations on a line the next block's
    // tree shares (1.3% of a pipelined replay's CPU).
    let mut stack: Vec<&Node> = vec![root];
    while let Some(node) = stack.pop() {
        count += 1;
        if count >= cap {
            break;
        }
        for_each_dirty_child(node, |child| stack.push(child));
    }
    count
}

/// Subtrees covering the dirty part of `root` below its upper levels: each level of the dirty
/// part is replaced by its dirty children (a node without any stays as a subtree of its own)
/// until there are [`FRONTIER_MIN`] of them.
fn frontier(root: &Arc<Node>) -> Vec<Arc<Node>> {
    let mut frontier = vec![root.clone()];
    for _ in 0..FRONTIER_MAX_LEVELS {
        if frontier.len() >= FRONTIER_MIN {
            break;
        }
        let mut next = Vec::with_capacity(frontier.len() * 4);
        let mut expanded = false;
        for node in &frontier {
            let before = next.len();
            for_each_dirty_child(node, |child| next.push(child.clone()));
            if next.len() == before {
                next.push(node.clone());
            } else {
                expanded = true;
            }
        }
        if !expanded {
            break;
        }
        frontier = next;
    }
    frontier
}

/// The frontier of the dirty part of `root` when it holds at least `min_dirty` dirty nodes, and
/// nothing otherwise.
pub(crate) fn subtrees(root: &Arc<Node>, min_dirty: usize) -> Vec<Arc<Node>> {
    if count_dirty(root, min_dirty) >= min_dirty { frontier(root) } else { Vec::new() }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::tree::Tree;
    use crate::tree::node::Entry;

    /// A tree with `dirs` directories of `per_dir` values each, below two levels of directories.
    fn wide_tree(dirs: usize, per_dir: usize) -> Tree {
        let mut tree = Tree::empty();
        for d in 0..dirs {
            for v in 0..per_dir {
                let path = ["data".to_string(), format!("g{}", d % 7), format!("d{d}"), format!("v{v}")];
                tree.add(&path, format!("value {d} {v}").into_bytes()).unwrap();
            }
        }
        tree
    }

    fn serial_hash(tree: &Tree) -> crate::Hash {
        let Entry::Node(NodeRef::Mem(root)) = tree.root() else { panic!("an in-memory root") };
        root.hash()
    }

    #[test]
    fn subtrees_hashed_in_any_order_give_the_serial_hash() {
        // Two builds of the same content: one hashed from its frontier (last subtree first, as
        // another thread could), one serially.
        let split = wide_tree(3000, 3);
        let serial = wide_tree(3000, 3);
        let Entry::Node(NodeRef::Mem(root)) = split.root() else { panic!("an in-memory root") };
        let dirty = count_dirty(root, usize::MAX);
        assert!(dirty > 3000, "{dirty}");
        assert!(subtrees(root, dirty + 1).is_empty(), "below the threshold: no split");
        let work = split.dirty_subtrees(1024);
        assert!(work.len() >= FRONTIER_MIN, "{}", work.len());
        for node in work.iter().rev() {
            let _ = node.hash();
        }
        // Only the nodes above the frontier are left.
        assert!(count_dirty(root, usize::MAX) < dirty / 4);
        assert_eq!(split.hash(), serial_hash(&serial));
        assert_eq!(count_dirty(root, usize::MAX), 0, "every dirty node hashed");
    }

    /// The exact count of `tree`'s dirty nodes.
    fn dirty_count(tree: &Tree) -> usize {
        match tree.root() {
            Entry::Node(NodeRef::Mem(root)) => count_dirty(root, usize::MAX),
            _ => 0,
        }
    }

    #[test]
    fn the_edits_count_at_least_the_dirty_nodes() {
        use larch_testkit::rand::Rng;
        let (mut rng, seed) = larch_testkit::seeded_rng("the_edits_count_at_least_the_dirty_nodes", 11);
        let mut tree = Tree::empty();
        let mut other = Tree::empty();
        for step in 0..6000 {
            // Two directories cross 256 entries both ways (inode tries built and collapsed).
            let dir = format!("d{}", rng.random_range(0..3));
            let name = format!("k{}", rng.random_range(0..400));
            match rng.random_range(0..100) {
                0..55 => tree.add(&[&dir, &name], vec![step as u8; 3]).unwrap(),
                55..85 => tree.remove(&[&dir, &name]).unwrap(),
                85..90 => {
                    let _ = tree.copy(&[&dir], &["copies", &name]).unwrap();
                }
                90..94 => {
                    other.add(&["o", &name, "v"], vec![1]).unwrap();
                    tree.add_tree(&["grafts", &name], &other).unwrap();
                }
                94..97 => {
                    // A sub-tree edited on its own, then grafted back (taken from a hashed tree:
                    // a sub-tree with modified nodes has an unknown count, see below).
                    let _ = tree.hash();
                    if let Some(mut sub) = tree.find_tree(&[&dir]).unwrap() {
                        sub.add(&["deep", &name], vec![2]).unwrap();
                        tree.add_tree(&[&dir], &sub).unwrap();
                    }
                }
                _ => {
                    let _ = tree.hash();
                }
            }
            let (bound, exact) = (tree.dirty_bound().unwrap(), dirty_count(&tree));
            assert!(bound >= exact, "seed {seed} step {step}: bound {bound} below {exact} dirty nodes");
            if step % 1000 == 0 {
                eprintln!("step {step}: bound {bound}, {exact} dirty nodes");
            }
        }
        // Below the bound, no walk is needed; at or above it, the exact count decides.
        let exact = dirty_count(&tree);
        assert!(!tree.dirty_subtrees(exact).is_empty());
        assert!(tree.dirty_subtrees(exact + 1).is_empty());
        // An in-memory root not hashed: unknown (so is a sub-tree of it, and a tree it is grafted
        // into); hashed, or stored: none.
        let unknown = Tree::from_entry(tree.root().clone(), tree.source().clone());
        assert_eq!(unknown.dirty_bound(), None);
        let mut grafted = Tree::empty();
        grafted.add_tree(&["g"], &unknown).unwrap();
        assert_eq!(grafted.dirty_bound(), None);
        assert_eq!(grafted.dirty_subtrees(exact + 2).is_empty(), dirty_count(&grafted) < exact + 2);
        assert_eq!(unknown.dirty_subtrees(exact).is_empty(), tree.dirty_subtrees(exact).is_empty());
        let _ = tree.hash();
        assert_eq!(Tree::from_entry(tree.root().clone(), tree.source().clone()).dirty_bound(), Some(0));
    }

    #[test]
    fn edits_of_nodes_already_modified_are_not_counted_again() {
        // A block's edits go through the same few directories again and again: 2,000 values in
        // 20 directories of a hashed tree make ~150 dirty nodes (directories, their inodes and
        // the paths above), not one per node each edit passes through (8,000).
        let mut tree = wide_tree(20, 1);
        let _ = tree.hash();
        let before = tree.dirty_bound().unwrap();
        for i in 0..2000 {
            let path = ["data".to_string(), format!("g{}", i % 7), format!("d{}", i % 20), format!("w{i}")];
            tree.add(&path, vec![1]).unwrap();
        }
        let (bound, exact) = (tree.dirty_bound().unwrap() - before, dirty_count(&tree));
        assert!(bound >= exact, "bound {bound} below {exact} dirty nodes");
        assert!(bound <= exact + exact / 2, "bound {bound} for {exact} dirty nodes");
        // Modified in place again after hashing: counted again (hashed nodes become dirty).
        let _ = tree.hash();
        let before = tree.dirty_bound().unwrap();
        tree.add(&["data", "g0", "d0", "again"], vec![2]).unwrap();
        let (bound, exact) = (tree.dirty_bound().unwrap() - before, dirty_count(&tree));
        assert!(bound >= exact && exact >= 4, "bound {bound}, {exact} dirty nodes");
    }

    #[test]
    fn small_trees_count_below_the_threshold() {
        let tree = wide_tree(10, 2);
        let Entry::Node(NodeRef::Mem(root)) = tree.root() else { panic!("an in-memory root") };
        // root, data, 7 groups, 10 directories
        assert_eq!(count_dirty(root, usize::MAX), 19);
        assert_eq!(count_dirty(root, 5), 5);
        assert!(tree.dirty_subtrees(20).is_empty());
        assert!(!tree.dirty_subtrees(19).is_empty());
        let expected = wide_tree(10, 2);
        assert_eq!(tree.hash(), serial_hash(&expected));
        assert!(tree.dirty_subtrees(1).is_empty(), "a hashed tree has no dirty part");
    }
}
