//! The proof tree of Irmin's tree proofs in its `Tree32` form (`spec/merkle-proofs.md` §1), with
//! Octez's names in the docs: `Contents` is Octez's `Value`, `BlindedContents` its `Blinded_value`.

use crate::hash::{Hash, Kind};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// A hash with the kind of object it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindedHash {
    /// Contents or node.
    pub kind: Kind,
    /// The 32-byte context hash.
    pub hash: Hash,
}

/// A tree proof: the before and after hashes and the partial `before` tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    /// Octez's `version` bit set (0 for tree proofs of the 32-ary context); not hashed.
    pub version: i16,
    /// Hash of the tree the computation started from.
    pub before: KindedHash,
    /// Hash of the tree the computation ended with.
    pub after: KindedHash,
    /// The before tree, with everything the computation did not read replaced by its hash.
    pub state: Tree,
}

/// A directory entry list of a `Node` or `Inode_values`: (step, subtree) pairs.
pub type Entries = Vec<(Vec<u8>, Tree)>;

/// A node of the proof tree (Irmin `Proof.tree`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tree {
    /// A value that was read (Octez `Value`).
    Contents(Vec<u8>),
    /// A value that was not read: its hash only (Octez `Blinded_value`).
    BlindedContents(Hash),
    /// A directory listed in full ("flat" form, every entry present).
    Node(Entries),
    /// A directory that was not read.
    BlindedNode(Hash),
    /// A large directory in its inode form (root inode, depth 0).
    Inode(Inode),
    /// A large directory whose root starts a chain of single-pointer inodes.
    Extender(Extender),
}

/// An inode `Tree`: the entry count below it and its pointers `(bucket index, sub-inode)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    /// Number of directory entries below this inode (the `length` of its hash pre-image).
    pub length: u64,
    /// `(index, sub-inode)`, by increasing index, one per non-empty bucket.
    pub proofs: Vec<(u8, InodeTree)>,
}

/// A chain of single-pointer inodes compressed: the buckets followed and the inode at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extender {
    /// Number of directory entries below (the same at every level of the chain).
    pub length: u64,
    /// The bucket index followed at each level of the chain (Octez's `segment`).
    pub segments: Vec<u8>,
    /// The first inode of the chain with other than exactly one pointer.
    pub proof: Box<InodeTree>,
}

/// A sub-inode of a large directory (Irmin `Proof.inode_tree`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InodeTree {
    /// A sub-inode that was not read.
    Blinded(Hash),
    /// An inode leaf (`Values`), every entry listed.
    Values(Entries),
    /// An inner inode `Tree`.
    Tree(Inode),
    /// A chain of single-pointer inodes.
    Extender(Extender),
}

/// Number of each constructor in a proof tree, as the vectors' `stats` count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `Contents`.
    pub contents: usize,
    /// `Blinded_contents`.
    pub blinded_contents: usize,
    /// `Node`.
    pub node: usize,
    /// `Blinded_node`.
    pub blinded_node: usize,
    /// `Inode`.
    pub inode: usize,
    /// `Extender`.
    pub extender: usize,
    /// `Blinded_inode`.
    pub blinded_inode: usize,
    /// `Inode_values`.
    pub inode_values: usize,
    /// `Inode_tree`.
    pub inode_tree: usize,
    /// `Inode_extender`.
    pub inode_extender: usize,
}

enum Item<'a> {
    Tree(&'a Tree),
    Inode(&'a InodeTree),
}

impl Tree {
    /// Counts the constructors of this proof tree (iteratively: no recursion on input depth).
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        let mut stack = alloc::vec![Item::Tree(self)];
        while let Some(item) = stack.pop() {
            match item {
                Item::Tree(tree) => match tree {
                    Tree::Contents(_) => stats.contents += 1,
                    Tree::BlindedContents(_) => stats.blinded_contents += 1,
                    Tree::BlindedNode(_) => stats.blinded_node += 1,
                    Tree::Node(entries) => {
                        stats.node += 1;
                        stack.extend(entries.iter().map(|(_, t)| Item::Tree(t)));
                    }
                    Tree::Inode(inode) => {
                        stats.inode += 1;
                        stack.extend(inode.proofs.iter().map(|(_, t)| Item::Inode(t)));
                    }
                    Tree::Extender(ext) => {
                        stats.extender += 1;
                        stack.push(Item::Inode(&ext.proof));
                    }
                },
                Item::Inode(inode) => match inode {
                    InodeTree::Blinded(_) => stats.blinded_inode += 1,
                    InodeTree::Values(entries) => {
                        stats.inode_values += 1;
                        stack.extend(entries.iter().map(|(_, t)| Item::Tree(t)));
                    }
                    InodeTree::Tree(inode) => {
                        stats.inode_tree += 1;
                        stack.extend(inode.proofs.iter().map(|(_, t)| Item::Inode(t)));
                    }
                    InodeTree::Extender(ext) => {
                        stats.inode_extender += 1;
                        stack.push(Item::Inode(&ext.proof));
                    }
                },
            }
        }
        stats
    }
}
