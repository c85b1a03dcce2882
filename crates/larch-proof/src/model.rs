//! The partial tree a proof describes, as the verifier (and the producer) work on it: directories
//! in their inode shape with blinded parts, loaded from a proof tree with Irmin's structural checks,
//! hashed bottom-up with the Tezos rules, and written back to a proof tree in Irmin's shape
//! (extender compression included).

use crate::error::VerifyError;
use crate::hash::{self, Arity, Hash, Kind};
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Tree};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Maximum nesting of a proof tree (directories, inode levels and extender segments together);
/// deeper proofs are rejected, so that no recursion depth is controlled by the input.
pub const MAX_NESTING: usize = 256;
/// Maximum depth of an inode in a proof (the root inode of a directory is at depth 0).
pub const MAX_INODE_DEPTH: u8 = 64;

/// A node of the partial tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PNode {
    /// A revealed value.
    Contents(Vec<u8>),
    /// A value known by hash only.
    BlindedContents(Hash),
    /// A directory known by hash only.
    BlindedNode(Hash),
    /// A revealed directory: its root inode (depth 0), a `Values` for a flat directory.
    Dir(Box<PInode>),
}

/// An inode of a revealed directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PInode {
    /// A sub-inode known by hash only.
    Blinded(Hash),
    /// A leaf: every entry of its part of the directory (at depth 0: a flat directory).
    Values(PValues),
    /// An inner inode.
    Tree(PTree),
}

/// A `Values` leaf (or, at depth 0, a flat directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PValues {
    /// Depth in the inode trie (0 for a flat directory).
    pub depth: u8,
    /// Entries by name.
    pub entries: BTreeMap<Vec<u8>, PNode>,
}

/// An inode `Tree`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PTree {
    /// Depth in the inode trie.
    pub depth: u8,
    /// Number of directory entries below.
    pub length: u64,
    /// Non-empty buckets.
    pub children: BTreeMap<u8, PInode>,
}

/// Supplies the parts of the tree that the partial tree blinds, when an operation needs them. The
/// verifier's resolver refuses ([`Refuse`]); a producer's loads them from its store.
pub trait Resolver {
    /// The value whose hash is `hash`.
    fn contents(&mut self, op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError>;
    /// The root inode (depth 0) of the directory whose hash is `hash`, children blinded.
    fn node(&mut self, op: &'static str, hash: &Hash) -> Result<PInode, VerifyError>;
    /// The inode at `depth` whose hash is `hash`, children blinded.
    fn inode(&mut self, op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError>;
    /// The shape of the context's directories (buckets, flat-hash bound, depth limit).
    fn arity(&self) -> Arity {
        Arity::TREE32
    }
}

/// The verifier's resolver: every blinded part an operation needs is an error.
#[derive(Clone, Copy, Debug, Default)]
pub struct Refuse;

/// [`Refuse`] for a context of another [`Arity`] (the binary tree's: [`Arity::TREE2`]).
#[derive(Clone, Copy, Debug)]
pub struct RefuseIn(pub Arity);

impl Resolver for RefuseIn {
    fn contents(&mut self, op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError> {
        Refuse.contents(op, hash)
    }
    fn node(&mut self, op: &'static str, hash: &Hash) -> Result<PInode, VerifyError> {
        Refuse.node(op, hash)
    }
    fn inode(&mut self, op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError> {
        Refuse.inode(op, hash, depth)
    }
    fn arity(&self) -> Arity {
        self.0
    }
}

impl Resolver for Refuse {
    fn contents(&mut self, op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError> {
        Err(VerifyError::Blinded { op, what: "contents", hash: *hash })
    }
    fn node(&mut self, op: &'static str, hash: &Hash) -> Result<PInode, VerifyError> {
        Err(VerifyError::Blinded { op, what: "node", hash: *hash })
    }
    fn inode(&mut self, op: &'static str, hash: &Hash, _depth: u8) -> Result<PInode, VerifyError> {
        Err(VerifyError::Blinded { op, what: "inode", hash: *hash })
    }
}

fn malformed(why: &'static str) -> VerifyError {
    VerifyError::Malformed(why)
}

fn budget(nesting: usize) -> Result<usize, VerifyError> {
    nesting.checked_sub(1).ok_or(VerifyError::TooDeep { limit: MAX_NESTING })
}

// ---------------------------------------------------------------------------------------------
// Loading a proof tree (spec §3.1, Irmin's `of_concrete_exn` checks).

/// Loads a proof tree of the 32-ary context into a partial tree, applying Irmin's structural
/// checks.
pub fn load(tree: &Tree) -> Result<PNode, VerifyError> {
    load_in(tree, Arity::TREE32)
}

/// [`load`] for a context of the given [`Arity`].
pub fn load_in(tree: &Tree, arity: Arity) -> Result<PNode, VerifyError> {
    load_tree(tree, MAX_NESTING, arity)
}

fn load_entries(
    entries: &Entries,
    nesting: usize,
    arity: Arity,
) -> Result<BTreeMap<Vec<u8>, PNode>, VerifyError> {
    let mut map = BTreeMap::new();
    for (step, tree) in entries {
        // Irmin adds the entries one by one: a repeated step overwrites the earlier one.
        map.insert(step.clone(), load_tree(tree, nesting, arity)?);
    }
    Ok(map)
}

fn load_tree(tree: &Tree, nesting: usize, arity: Arity) -> Result<PNode, VerifyError> {
    let nesting = budget(nesting)?;
    Ok(match tree {
        Tree::Contents(value) => PNode::Contents(value.clone()),
        Tree::BlindedContents(hash) => PNode::BlindedContents(*hash),
        Tree::BlindedNode(hash) => PNode::BlindedNode(*hash),
        Tree::Node(entries) => PNode::Dir(Box::new(PInode::Values(PValues {
            depth: 0,
            entries: load_entries(entries, nesting, arity)?,
        }))),
        Tree::Inode(inode) => {
            PNode::Dir(Box::new(stable_root(load_tree_inode(0, inode, nesting, arity)?.0, arity)?))
        }
        Tree::Extender(ext) => {
            PNode::Dir(Box::new(stable_root(load_extender(0, ext, nesting, arity)?.0, arity)?))
        }
    })
}

/// A directory root given in inode form with at most 256 entries (Irmin never emits one) is
/// hashed flat, so the placement of its entries in buckets is not authenticated: it is turned into
/// a flat directory (every entry must be revealed, each name once), so that lookups go by name and
/// a misplaced entry cannot be hidden from them.
fn stable_root(root: PInode, arity: Arity) -> Result<PInode, VerifyError> {
    if dir_length(&root) > arity.stable_hash as u64 {
        return Ok(root);
    }
    let mut entries = BTreeMap::new();
    let mut stack = alloc::vec![root];
    while let Some(inode) = stack.pop() {
        match inode {
            PInode::Blinded(hash) => return Err(VerifyError::Blinded { op: "hash", what: "inode", hash }),
            PInode::Values(values) => {
                for (name, child) in values.entries {
                    if entries.insert(name, child).is_some() {
                        return Err(malformed("a name appears twice in a directory"));
                    }
                }
            }
            PInode::Tree(tree) => stack.extend(tree.children.into_values()),
        }
    }
    Ok(PInode::Values(PValues { depth: 0, entries }))
}

/// -> (inode, entries counted in revealed `Values` below, whether nothing below is blinded).
fn load_inode_tree(
    depth: u8,
    tree: &InodeTree,
    nesting: usize,
    arity: Arity,
) -> Result<(PInode, u64, bool), VerifyError> {
    let nesting = budget(nesting)?;
    if depth > MAX_INODE_DEPTH {
        return Err(malformed("inode deeper than the verifier's limit"));
    }
    match tree {
        InodeTree::Blinded(hash) => Ok((PInode::Blinded(*hash), 0, false)),
        InodeTree::Values(entries) => {
            if depth == 0 {
                return Err(malformed("Inode_values at depth 0 inside an inode"));
            }
            if entries.is_empty() {
                return Err(malformed("empty Inode_values"));
            }
            if entries.len() > arity.values_max() {
                return Err(malformed("Inode_values with more entries than an inode has buckets"));
            }
            if entries.windows(2).any(|pair| matches!(pair, [(a, _), (b, _)] if a >= b)) {
                return Err(malformed("Inode_values steps not strictly increasing"));
            }
            let map = load_entries(entries, nesting, arity)?;
            let count = map.len() as u64;
            Ok((PInode::Values(PValues { depth, entries: map }), count, true))
        }
        InodeTree::Tree(inode) => load_tree_inode(depth, inode, nesting, arity),
        InodeTree::Extender(ext) => load_extender(depth, ext, nesting, arity),
    }
}

fn check_length(length: u64, count: u64, exact: bool) -> Result<(), VerifyError> {
    if (exact && count != length) || (!exact && count > length) {
        return Err(malformed("inode length inconsistent with its entries"));
    }
    Ok(())
}

fn load_tree_inode(
    depth: u8,
    inode: &Inode,
    nesting: usize,
    arity: Arity,
) -> Result<(PInode, u64, bool), VerifyError> {
    if inode.proofs.is_empty() {
        return Err(malformed("inode without pointers"));
    }
    if inode.proofs.windows(2).any(|pair| matches!(pair, [(a, _), (b, _)] if a >= b)) {
        return Err(malformed("inode indices not strictly increasing"));
    }
    let child_depth = depth.checked_add(1).ok_or(malformed("inode too deep"))?;
    let mut children = BTreeMap::new();
    let (mut count, mut exact) = (0u64, true);
    for (index, child) in &inode.proofs {
        if *index >= arity.entries {
            return Err(malformed("inode index out of range"));
        }
        let (node, n, e) = load_inode_tree(child_depth, child, nesting, arity)?;
        count = count.saturating_add(n);
        exact &= e;
        children.insert(*index, node);
    }
    check_length(inode.length, count, exact)?;
    Ok((PInode::Tree(PTree { depth, length: inode.length, children }), count, exact))
}

fn load_extender(
    depth: u8,
    ext: &Extender,
    nesting: usize,
    arity: Arity,
) -> Result<(PInode, u64, bool), VerifyError> {
    let segments = ext.segments.len();
    let nesting = nesting.checked_sub(segments).ok_or(VerifyError::TooDeep { limit: MAX_NESTING })?;
    let bottom = usize::from(depth) + segments;
    let bottom = u8::try_from(bottom).map_err(|_| malformed("extender too deep"))?;
    let (mut node, count, exact) = load_inode_tree(bottom, &ext.proof, nesting, arity)?;
    for (k, segment) in ext.segments.iter().enumerate().rev() {
        if *segment >= arity.entries {
            return Err(malformed("extender segment out of range"));
        }
        check_length(ext.length, count, exact)?;
        let level = depth + k as u8;
        let mut children = BTreeMap::new();
        children.insert(*segment, node);
        node = PInode::Tree(PTree { depth: level, length: ext.length, children });
    }
    Ok((node, count, exact))
}

// ---------------------------------------------------------------------------------------------
// Hashing (spec §3.1), resolving blinded parts through `resolver` when a hash needs them.

/// Replaces a blinded inode by its expansion from `resolver`.
pub(crate) fn expand_inode(
    inode: &mut PInode,
    depth: u8,
    resolver: &mut dyn Resolver,
    op: &'static str,
) -> Result<(), VerifyError> {
    if let PInode::Blinded(hash) = inode {
        *inode = resolver.inode(op, hash, depth)?;
    }
    Ok(())
}

/// The kinded hash of a partial tree.
pub fn kinded_hash(node: &mut PNode, resolver: &mut dyn Resolver) -> Result<KindedHash, VerifyError> {
    let (kind, hash) = node_hash(node, resolver)?;
    Ok(KindedHash { kind, hash })
}

pub(crate) fn node_hash(node: &mut PNode, resolver: &mut dyn Resolver) -> Result<(Kind, Hash), VerifyError> {
    Ok(match node {
        PNode::Contents(value) => (Kind::Contents, hash::contents_hash(value)),
        PNode::BlindedContents(hash) => (Kind::Contents, *hash),
        PNode::BlindedNode(hash) => (Kind::Node, *hash),
        PNode::Dir(root) => (Kind::Node, dir_hash(root, resolver)?),
    })
}

/// Number of entries of a directory whose root inode is `root`.
pub(crate) fn dir_length(root: &PInode) -> u64 {
    match root {
        PInode::Values(values) => values.entries.len() as u64,
        PInode::Tree(tree) => tree.length,
        PInode::Blinded(_) => 0,
    }
}

fn dir_hash(root: &mut PInode, resolver: &mut dyn Resolver) -> Result<Hash, VerifyError> {
    let arity = resolver.arity();
    let stable = dir_length(root) <= arity.stable_hash as u64;
    match root {
        PInode::Values(values) if !stable => {
            // A flat proof of a large directory (or one grown past 256): the canonical trie.
            let mut entries = Vec::with_capacity(values.entries.len());
            for (name, child) in &mut values.entries {
                let (kind, hash) = node_hash(child, resolver)?;
                entries.push((name.as_slice(), kind, hash));
            }
            canonical_hash(0, &entries, arity)
        }
        PInode::Tree(_) if !stable => inode_hash(root, resolver),
        PInode::Blinded(hash) => Ok(*hash),
        _ => {
            // At most `stable_hash` entries: the flat hash, which needs every entry.
            let mut entries = Vec::new();
            collect_hashed(root, resolver, &mut entries)?;
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let refs = entries.iter().map(|(name, kind, hash)| (name.as_slice(), *kind, *hash));
            Ok(hash::flat_node_hash(entries.len(), refs))
        }
    }
}

/// Appends (name, kind, hash) of every entry below `inode`, expanding blinded inodes.
fn collect_hashed(
    inode: &mut PInode,
    resolver: &mut dyn Resolver,
    out: &mut Vec<(Vec<u8>, Kind, Hash)>,
) -> Result<(), VerifyError> {
    match inode {
        PInode::Blinded(_) => Err(malformed("unexpanded inode")),
        PInode::Values(values) => {
            for (name, child) in &mut values.entries {
                let (kind, hash) = node_hash(child, resolver)?;
                out.push((name.clone(), kind, hash));
            }
            Ok(())
        }
        PInode::Tree(tree) => {
            let depth = tree.depth + 1;
            for child in tree.children.values_mut() {
                expand_inode(child, depth, resolver, "hash")?;
                collect_hashed(child, resolver, out)?;
            }
            Ok(())
        }
    }
}

fn inode_hash(inode: &mut PInode, resolver: &mut dyn Resolver) -> Result<Hash, VerifyError> {
    match inode {
        PInode::Blinded(hash) => Ok(*hash),
        PInode::Values(values) => {
            if values.depth == 0 {
                return Err(malformed("Values at depth 0 inside an inode"));
            }
            let mut entries = Vec::with_capacity(values.entries.len());
            for (name, child) in &mut values.entries {
                let (kind, hash) = node_hash(child, resolver)?;
                entries.push((name.as_slice(), kind, hash));
            }
            Ok(hash::values_inode_hash(entries.len(), entries.into_iter()))
        }
        PInode::Tree(tree) => {
            let mut pointers = Vec::with_capacity(tree.children.len());
            for (index, child) in &mut tree.children {
                pointers.push((*index, inode_hash(child, resolver)?));
            }
            Ok(hash::tree_inode_hash(tree.depth, tree.length, pointers.len(), pointers.into_iter()))
        }
    }
}

/// Hash of the canonical inode at `depth` holding `entries` (sorted by name).
fn canonical_hash(depth: u8, entries: &[(&[u8], Kind, Hash)], arity: Arity) -> Result<Hash, VerifyError> {
    if depth > 0 && entries.len() <= arity.values_max() {
        return Ok(hash::values_inode_hash(entries.len(), entries.iter().copied()));
    }
    if depth >= arity.max_depth {
        return Err(VerifyError::MaxDepth);
    }
    let mut buckets: Vec<Vec<(&[u8], Kind, Hash)>> = (0..arity.entries).map(|_| Vec::new()).collect();
    for entry in entries {
        if let Some(bucket) = buckets.get_mut(usize::from(arity.index(depth, entry.0))) {
            bucket.push(*entry);
        }
    }
    let mut pointers = Vec::new();
    for (index, bucket) in buckets.iter().enumerate() {
        if !bucket.is_empty() {
            pointers.push((index as u8, canonical_hash(depth + 1, bucket, arity)?));
        }
    }
    Ok(hash::tree_inode_hash(depth, entries.len() as u64, pointers.len(), pointers.into_iter()))
}

/// The canonical inode at `depth` for `entries` (depth > 0: `Values` up to `arity.entries`
/// entries).
pub(crate) fn build(
    depth: u8,
    entries: BTreeMap<Vec<u8>, PNode>,
    arity: Arity,
) -> Result<PInode, VerifyError> {
    if depth > 0 && entries.len() <= arity.values_max() {
        return Ok(PInode::Values(PValues { depth, entries }));
    }
    if depth >= arity.max_depth {
        return Err(VerifyError::MaxDepth);
    }
    let length = entries.len() as u64;
    let mut buckets: BTreeMap<u8, BTreeMap<Vec<u8>, PNode>> = BTreeMap::new();
    for (name, child) in entries {
        buckets.entry(arity.index(depth, &name)).or_default().insert(name, child);
    }
    let mut children = BTreeMap::new();
    for (index, bucket) in buckets {
        children.insert(index, build(depth + 1, bucket, arity)?);
    }
    Ok(PInode::Tree(PTree { depth, length, children }))
}

// ---------------------------------------------------------------------------------------------
// Writing a partial tree as a proof tree, in Irmin's shape.

/// The proof tree of a partial tree: flat directories as `Node`, large ones as `Inode`, chains of
/// two or more single-pointer inodes as extenders (Irmin's `proof_of_tree`).
pub fn to_proof(node: &PNode) -> Tree {
    match node {
        PNode::Contents(value) => Tree::Contents(value.clone()),
        PNode::BlindedContents(hash) => Tree::BlindedContents(*hash),
        PNode::BlindedNode(hash) => Tree::BlindedNode(*hash),
        PNode::Dir(root) => match inode_to_proof(root) {
            InodeTree::Blinded(hash) => Tree::BlindedNode(hash),
            InodeTree::Values(entries) => Tree::Node(entries),
            InodeTree::Tree(inode) => Tree::Inode(inode),
            InodeTree::Extender(ext) => Tree::Extender(ext),
        },
    }
}

fn inode_to_proof(inode: &PInode) -> InodeTree {
    match inode {
        PInode::Blinded(hash) => InodeTree::Blinded(*hash),
        PInode::Values(values) => InodeTree::Values(
            values.entries.iter().map(|(name, child)| (name.clone(), to_proof(child))).collect(),
        ),
        PInode::Tree(tree) => {
            // Follow the chain of single-pointer Trees.
            let mut segments = Vec::new();
            let mut current = tree;
            let end = loop {
                let mut only = current.children.iter();
                match (only.next(), only.next()) {
                    (Some((index, child)), None) => {
                        segments.push(*index);
                        match child {
                            PInode::Tree(next) if next.children.len() == 1 => current = next,
                            other => break Some(other),
                        }
                    }
                    _ => break None,
                }
            };
            match end {
                Some(end) if segments.len() >= 2 => InodeTree::Extender(Extender {
                    length: tree.length,
                    segments,
                    proof: Box::new(inode_to_proof(end)),
                }),
                _ => InodeTree::Tree(Inode {
                    length: tree.length,
                    proofs: tree
                        .children
                        .iter()
                        .map(|(index, child)| (*index, inode_to_proof(child)))
                        .collect(),
                }),
            }
        }
    }
}
