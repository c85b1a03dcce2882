//! Stream proofs (Irmin's `Tree.produce_stream` / `Tree.verify_stream`, Octez's
//! `produce_stream_proof` / `verify_stream_proof`): instead of a partial tree, the proof is the
//! sequence of objects the computation reads, in the order it reads them. The verifier starts from
//! the `before` hash alone and, each time the replay needs an object it has not seen, takes the next
//! element of the stream and checks that it hashes to the hash it looked for.
//!
//! An element is a value, a directory or inode leaf listed with the kinded hashes of its entries
//! (`Node`), an inner inode with the hashes of its buckets (`Inode`), or a chain of ≥ 2
//! single-pointer inodes with the hash it ends on (`InodeExtender`). Each object appears once,
//! keyed by its hash alone as in Irmin 3.7.2's stream environment (`Proof.Env`, one `set` of
//! hashes for values, directories and inodes): an inode leaf reached again at another depth (its
//! hash does not include its depth) is not sent again, and the verifier reuses it at that depth.

use crate::error::VerifyError;
use crate::hash::{
    self, Hash, INODE_BUCKETS, INODE_MAX_DEPTH, INODE_VALUES_MAX, Kind, STABLE_HASH_MAX, contents_hash,
    flat_node_hash, inode_index, tree_inode_hash, values_inode_hash,
};
use crate::model::{MAX_INODE_DEPTH, PInode, PNode, PTree, PValues, Resolver};
use crate::ops::{Op, OpResult};
use crate::types::KindedHash;
use crate::verify::{Context, Source};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

/// Octez's `version` of a stream proof of the 32-ary context (bit 0: stream).
pub const STREAM_VERSION: i16 = 1;

/// One element of a stream proof (Irmin `Proof.elt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elt {
    /// A value (Octez `Value`).
    Contents(Vec<u8>),
    /// A directory of at most 256 entries, or an inode leaf (`Values`): every entry with its
    /// kinded hash, by increasing name.
    Node(Vec<(Vec<u8>, KindedHash)>),
    /// An inner inode: its entry count and its non-empty buckets `(index, hash)`.
    Inode {
        /// Number of directory entries below.
        length: u64,
        /// `(index, sub-inode hash)` by increasing index.
        proofs: Vec<(u8, Hash)>,
    },
    /// A chain of single-pointer inodes: the buckets followed and the hash of the inode it ends on.
    InodeExtender {
        /// Number of directory entries below.
        length: u64,
        /// The bucket followed at each level (Octez `segment`), at least 2.
        segments: Vec<u8>,
        /// Hash of the inode at the end of the chain.
        proof: Hash,
    },
}

/// A stream proof: Octez's `stream_proof` (`{version; before; after; state = elt list}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamProof {
    /// Octez's `version` bit set: [`STREAM_VERSION`] (1) for the 32-ary context; not hashed.
    pub version: i16,
    /// Hash of the tree the computation started from.
    pub before: KindedHash,
    /// Hash of the tree the computation ended with.
    pub after: KindedHash,
    /// The objects read, in the order the computation reads them.
    pub elts: Vec<Elt>,
}

/// A produced stream proof with the results of its operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducedStream {
    /// The proof (version [`STREAM_VERSION`]).
    pub proof: StreamProof,
    /// One result per operation.
    pub results: Vec<OpResult>,
}

/// What a verified stream proof establishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedStream {
    /// The `before` hash (checked).
    pub before: KindedHash,
    /// One result per operation.
    pub results: Vec<OpResult>,
    /// The `after` hash (checked).
    pub after: KindedHash,
}

fn blinded_root(root: KindedHash) -> PNode {
    match root.kind {
        Kind::Node => PNode::BlindedNode(root.hash),
        Kind::Contents => PNode::BlindedContents(root.hash),
    }
}

// ---------------------------------------------------------------------------------------------
// Verification.

/// Verifies the stream proof `proof` for `ops`.
pub fn verify_stream(proof: &StreamProof, ops: &[Op]) -> Result<VerifiedStream, VerifyError> {
    let (results, before, after) = verify_stream_with(proof, |context| context.apply_all(ops))?;
    Ok(VerifiedStream { before, results, after })
}

/// Verifies the stream proof `proof` for the computation `f` (Irmin's `verify_stream p f`): the
/// version must be [`STREAM_VERSION`]; `f` runs on a tree known only by its `before` hash, every
/// object it reads is taken from the stream and checked against the hash it was reached by; the
/// hash of the resulting tree must be `after`, and every element must have been used.
pub fn verify_stream_with<T>(
    proof: &StreamProof,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(T, KindedHash, KindedHash), VerifyError> {
    if proof.version != STREAM_VERSION {
        return Err(VerifyError::UnsupportedVersion(proof.version));
    }
    let mut consumer =
        Consumer { elts: &proof.elts, next: 0, nodes: BTreeMap::new(), contents: BTreeMap::new() };
    let mut context = Context::new(blinded_root(proof.before), &mut consumer, Some(proof.before));
    let value = f(&mut context)?;
    let after = context.hash()?;
    if after != proof.after {
        return Err(VerifyError::AfterMismatch { expected: proof.after.hash, computed: after.hash });
    }
    let used = consumer.next;
    if used < proof.elts.len() {
        return Err(VerifyError::StreamTooLong { used, len: proof.elts.len() });
    }
    Ok((value, proof.before, after))
}

/// The verifier's resolver: takes the next element of the stream for an object not seen yet.
struct Consumer<'a> {
    elts: &'a [Elt],
    next: usize,
    /// Directories and inodes taken, by hash (as Irmin's consumer `nodes` table): the index of the
    /// element that gave it, the depth it was read at and the inode.
    nodes: BTreeMap<Hash, (usize, u8, PInode)>,
    contents: BTreeMap<Hash, Vec<u8>>,
}

impl Consumer<'_> {
    fn take(
        &mut self,
        op: &'static str,
        what: &'static str,
        hash: &Hash,
    ) -> Result<(usize, &Elt), VerifyError> {
        let index = self.next;
        let elt = self.elts.get(index).ok_or(VerifyError::StreamTooShort { op, what, hash: *hash })?;
        self.next += 1;
        Ok((index, elt))
    }

    fn dir(&mut self, op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError> {
        if let Some((index, seen_depth, inode)) = self.nodes.get(hash) {
            return at_depth(inode, *seen_depth, depth).ok_or(VerifyError::StreamMismatch {
                index: *index,
                why: REDEPTH,
                hash: *hash,
            });
        }
        let what = if depth == 0 { "node" } else { "inode" };
        let (index, elt) = self.take(op, what, hash)?;
        let mismatch = |why: &'static str| VerifyError::StreamMismatch { index, why, hash: *hash };
        let (computed, inode, chain) = rehydrate(elt, depth).map_err(mismatch)?;
        if computed != *hash {
            return Err(mismatch("the element does not hash to the hash it was reached by"));
        }
        // A directory of 33 to 256 entries: irmin-pack keeps it as an inode trie, and reading it
        // whole (Irmin's `head`) reads the inner inodes, which follow in the stream.
        let trie = match elt {
            Elt::Node(entries) if depth == 0 => stable_trie(entries)?,
            _ => Vec::new(),
        };
        for ((key, level), sub) in chain {
            self.nodes.entry(key).or_insert((index, level, sub));
        }
        self.nodes.insert(*hash, (index, depth, inode.clone()));
        for (inner, inner_depth, _) in trie {
            self.dir(op, &inner, inner_depth)?;
        }
        Ok(inode)
    }
}

const REDEPTH: &str = "an object reached again at a depth where it does not have its hash";

/// The inode `inode`, read at `seen` and known by its hash, as the object reached by that hash at
/// `depth`: the same object at the same depth; an inode leaf (`Values`, whose hash does not
/// include its depth) at any other depth ≥ 1. Anything else would need two pre-images of one hash
/// (a flat directory and an inode leaf, or an inner inode at two depths): `None`.
fn at_depth(inode: &PInode, seen: u8, depth: u8) -> Option<PInode> {
    if seen == depth {
        return Some(inode.clone());
    }
    match inode {
        PInode::Values(values) if seen > 0 && depth > 0 => {
            Some(PInode::Values(PValues { depth, entries: values.entries.clone() }))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Directories of 33 to 256 entries.

/// The inner inodes of the canonical inode trie of a directory whose entries (sorted by name)
/// are `entries`, as irmin-pack keeps a directory of 33 to 256 entries, in the order Irmin's
/// `head` reads them when it lists the directory whole: depth first, parents before their
/// children, buckets by increasing index; each as (hash, depth, element): `Inode` for an inner
/// `Tree`, `Node` for a `Values` leaf. Empty for a directory of at most 32 entries (one leaf).
pub fn stable_trie(entries: &[(Vec<u8>, KindedHash)]) -> Result<Vec<(Hash, u8, Elt)>, VerifyError> {
    let mut out = Vec::new();
    if entries.len() > INODE_VALUES_MAX {
        let refs: Vec<&(Vec<u8>, KindedHash)> = entries.iter().collect();
        trie_pointers(0, &refs, &mut out)?;
    }
    Ok(out)
}

type EntryRef<'a> = &'a (Vec<u8>, KindedHash);

/// Pushes the inodes below the inode `Tree` at `depth` holding `entries`; returns its pointers.
fn trie_pointers(
    depth: u8,
    entries: &[EntryRef<'_>],
    out: &mut Vec<(Hash, u8, Elt)>,
) -> Result<Vec<(u8, Hash)>, VerifyError> {
    if depth >= INODE_MAX_DEPTH {
        return Err(VerifyError::MaxDepth);
    }
    let mut buckets: BTreeMap<u8, Vec<EntryRef<'_>>> = BTreeMap::new();
    for entry in entries {
        buckets.entry(inode_index(depth, &entry.0)).or_default().push(entry);
    }
    let mut pointers = Vec::with_capacity(buckets.len());
    for (index, bucket) in buckets {
        pointers.push((index, trie_inode(depth + 1, &bucket, out)?));
    }
    Ok(pointers)
}

/// Pushes the inode at `depth` holding `entries` (then the inodes below it); returns its hash.
fn trie_inode(
    depth: u8,
    entries: &[EntryRef<'_>],
    out: &mut Vec<(Hash, u8, Elt)>,
) -> Result<Hash, VerifyError> {
    if entries.len() <= INODE_VALUES_MAX {
        let refs = entries.iter().map(|(name, kh)| (name.as_slice(), kh.kind, kh.hash));
        let hash = values_inode_hash(entries.len(), refs);
        out.push((hash, depth, Elt::Node(entries.iter().map(|entry| (*entry).clone()).collect())));
        return Ok(hash);
    }
    let at = out.len();
    out.push((Hash::default(), depth, Elt::Inode { length: 0, proofs: Vec::new() }));
    let proofs = trie_pointers(depth, entries, out)?;
    let length = entries.len() as u64;
    let hash = tree_inode_hash(depth, length, proofs.len(), proofs.iter().copied());
    if let Some(slot) = out.get_mut(at) {
        *slot = (hash, depth, Elt::Inode { length, proofs });
    }
    Ok(hash)
}

impl Resolver for Consumer<'_> {
    fn contents(&mut self, op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError> {
        if let Some(value) = self.contents.get(hash) {
            return Ok(value.clone());
        }
        let (index, elt) = self.take(op, "contents", hash)?;
        let Elt::Contents(value) = elt else {
            return Err(VerifyError::StreamMismatch { index, why: "expected a value", hash: *hash });
        };
        if contents_hash(value) != *hash {
            return Err(VerifyError::StreamMismatch {
                index,
                why: "the value does not hash to the hash it was reached by",
                hash: *hash,
            });
        }
        let value = value.clone();
        self.contents.insert(*hash, value.clone());
        Ok(value)
    }
    fn node(&mut self, op: &'static str, hash: &Hash) -> Result<PInode, VerifyError> {
        self.dir(op, hash, 0)
    }
    fn inode(&mut self, op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError> {
        self.dir(op, hash, depth)
    }
}

type Chain = Vec<((Hash, u8), PInode)>;

/// The inode an element describes at `depth` (children blinded), its hash, and for an extender
/// the inner inodes of its chain keyed by (hash, depth).
fn rehydrate(elt: &Elt, depth: u8) -> Result<(Hash, PInode, Chain), &'static str> {
    match elt {
        Elt::Contents(_) => Err("expected a node or inode, found a value"),
        Elt::Node(entries) => {
            let max = if depth == 0 { STABLE_HASH_MAX } else { INODE_VALUES_MAX };
            if entries.len() > max || (depth > 0 && entries.is_empty()) {
                return Err("node element with a wrong number of entries");
            }
            if entries.windows(2).any(|pair| matches!(pair, [a, b] if a.0 >= b.0)) {
                return Err("node element entries not strictly increasing");
            }
            let refs = entries.iter().map(|(name, kh)| (name.as_slice(), kh.kind, kh.hash));
            let hash = if depth == 0 {
                flat_node_hash(entries.len(), refs)
            } else {
                values_inode_hash(entries.len(), refs)
            };
            let entries = entries
                .iter()
                .map(|(name, kh)| {
                    let child = match kh.kind {
                        Kind::Contents => PNode::BlindedContents(kh.hash),
                        Kind::Node => PNode::BlindedNode(kh.hash),
                    };
                    (name.clone(), child)
                })
                .collect();
            Ok((hash, PInode::Values(PValues { depth, entries }), Vec::new()))
        }
        Elt::Inode { length, proofs } => {
            check_inode_length(*length, depth)?;
            if proofs.is_empty() {
                return Err("inode element without pointers");
            }
            if proofs.windows(2).any(|pair| matches!(pair, [a, b] if a.0 >= b.0))
                || proofs.iter().any(|(index, _)| *index >= INODE_BUCKETS)
            {
                return Err("inode element indices not strictly increasing below 32");
            }
            let hash = tree_inode_hash(depth, *length, proofs.len(), proofs.iter().copied());
            let children = proofs.iter().map(|(index, hash)| (*index, PInode::Blinded(*hash))).collect();
            Ok((hash, PInode::Tree(PTree { depth, length: *length, children }), Vec::new()))
        }
        Elt::InodeExtender { length, segments, proof } => {
            check_inode_length(*length, depth)?;
            if segments.len() < 2 || segments.iter().any(|s| *s >= INODE_BUCKETS) {
                return Err("extender element needs at least 2 segments below 32");
            }
            let levels = u8::try_from(segments.len()).map_err(|_| "extender element too long")?;
            if u16::from(depth) + u16::from(levels) > u16::from(MAX_INODE_DEPTH) {
                return Err("extender element deeper than the inode depth limit");
            }
            // Build the chain from its end: the inode at depth + k - 1 points to the next one.
            let mut below = PInode::Blinded(*proof);
            let mut below_hash = *proof;
            let mut chain = Vec::with_capacity(segments.len());
            for (k, segment) in segments.iter().enumerate().rev() {
                let level = depth + k as u8;
                let hash = tree_inode_hash(level, *length, 1, core::iter::once((*segment, below_hash)));
                let mut children = BTreeMap::new();
                children.insert(*segment, below);
                below = PInode::Tree(PTree { depth: level, length: *length, children });
                below_hash = hash;
                if k > 0 {
                    chain.push(((hash, level), below.clone()));
                }
            }
            Ok((below_hash, below, chain))
        }
    }
}

fn check_inode_length(length: u64, depth: u8) -> Result<(), &'static str> {
    let min = if depth == 0 { STABLE_HASH_MAX } else { INODE_VALUES_MAX } as u64;
    if length <= min {
        return Err("inode element with too few entries for an inner inode");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Production.

/// Loads through a [`Source`] and records every object the first time its hash is read, in
/// order: Irmin 3.7.2's `Proof.Env` in stream `Produce` mode keeps one `set` of hashes for
/// values, directories and inner inodes alike (`add_contents_from_store`, `add_node_from_store`,
/// `add_recnode_from_store` push an element only when the hash is not in it).
struct StreamRecorder<'a> {
    source: &'a mut dyn Source,
    seen: BTreeSet<Hash>,
    /// (hash, element), in the order read.
    elts: Vec<(Hash, Elt)>,
}

impl StreamRecorder<'_> {
    fn record_dir(&mut self, hash: &Hash, inode: &PInode) -> Result<(), VerifyError> {
        if !self.seen.insert(*hash) {
            return Ok(());
        }
        let elt = dehydrate(inode)?;
        self.elts.push((*hash, elt));
        Ok(())
    }
}

impl Resolver for StreamRecorder<'_> {
    fn contents(&mut self, _op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError> {
        let value = self.source.load_contents(hash)?;
        if self.seen.insert(*hash) {
            self.elts.push((*hash, Elt::Contents(value.clone())));
        }
        Ok(value)
    }
    fn node(&mut self, _op: &'static str, hash: &Hash) -> Result<PInode, VerifyError> {
        let node = self.source.load_node(hash)?;
        if self.seen.insert(*hash) {
            let elt = dehydrate(&node)?;
            // A directory of 33 to 256 entries is an inode trie in irmin-pack: listing it whole
            // (Irmin's `head`, to send its entries) reads its inner inodes, recorded after it.
            let trie = match &elt {
                Elt::Node(entries) => stable_trie(entries)?,
                _ => Vec::new(),
            };
            self.elts.push((*hash, elt));
            for (inner, _, inner_elt) in trie {
                if self.seen.insert(inner) {
                    self.elts.push((inner, inner_elt));
                }
            }
        }
        Ok(node)
    }
    fn inode(&mut self, _op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError> {
        let inode = self.source.load_inode(hash, depth)?;
        self.record_dir(hash, &inode)?;
        Ok(inode)
    }
}

/// The element of a loaded inode (children blinded).
fn dehydrate(inode: &PInode) -> Result<Elt, VerifyError> {
    match inode {
        PInode::Blinded(_) => Err(VerifyError::Malformed("source returned a blinded inode")),
        PInode::Values(values) => {
            let mut entries = Vec::with_capacity(values.entries.len());
            for (name, child) in &values.entries {
                let kh = match child {
                    PNode::BlindedContents(hash) => KindedHash { kind: Kind::Contents, hash: *hash },
                    PNode::Contents(value) => {
                        KindedHash { kind: Kind::Contents, hash: hash::contents_hash(value) }
                    }
                    PNode::BlindedNode(hash) => KindedHash { kind: Kind::Node, hash: *hash },
                    PNode::Dir(_) => {
                        return Err(VerifyError::Malformed("source returned an opened directory"));
                    }
                };
                entries.push((name.clone(), kh));
            }
            Ok(Elt::Node(entries))
        }
        PInode::Tree(tree) => {
            let mut proofs = Vec::with_capacity(tree.children.len());
            for (index, child) in &tree.children {
                match child {
                    PInode::Blinded(hash) => proofs.push((*index, *hash)),
                    _ => return Err(VerifyError::Malformed("source returned an opened inode")),
                }
            }
            Ok(Elt::Inode { length: tree.length, proofs })
        }
    }
}

/// Irmin 3.7.2's `Proof.Env.post_processing`: every recorded single-pointer inode is a link
/// `hash → (bucket, child)` (`singleton_inodes`, by hash). Going through the elements in order, one
/// whose hash an earlier extender absorbed is dropped (`skips`); an inode with a single pointer
/// whose child is a recorded single-pointer inode becomes an `Inode_extender` following the links
/// as far as they go (`forward_lookup`, whatever order the chain was read in), and the chain's
/// inodes but its last target are absorbed.
fn compress(elts: Vec<(Hash, Elt)>) -> Vec<Elt> {
    let mut singletons: BTreeMap<Hash, (u8, Hash)> = BTreeMap::new();
    for (hash, elt) in &elts {
        if let Elt::Inode { proofs, .. } = elt
            && let [(index, child)] = proofs.as_slice()
        {
            singletons.insert(*hash, (*index, *child));
        }
    }
    let mut skips: BTreeSet<Hash> = BTreeSet::new();
    let mut out = Vec::with_capacity(elts.len());
    for (hash, elt) in elts {
        if skips.contains(&hash) {
            continue;
        }
        let Elt::Inode { length, proofs } = elt else {
            out.push(elt);
            continue;
        };
        let [(first, child)] = proofs.as_slice() else {
            out.push(Elt::Inode { length, proofs });
            continue;
        };
        // Hashes are acyclic (a link goes one inode level down), and the links are at most the
        // number of elements: the walk ends.
        let mut segments = alloc::vec![*first];
        let mut target = *child;
        let mut absorbed = Vec::new();
        while let Some((index, next)) = singletons.get(&target).copied() {
            if segments.len() > singletons.len() {
                break;
            }
            absorbed.push(target);
            segments.push(index);
            target = next;
        }
        if segments.len() >= 2 {
            skips.extend(absorbed);
            out.push(Elt::InodeExtender { length, segments, proof: target });
        } else {
            out.push(Elt::Inode { length, proofs });
        }
    }
    out
}

/// Produces the stream proof of `ops` run on the tree `root` of `source`.
pub fn produce_stream(
    source: &mut dyn Source,
    root: KindedHash,
    ops: &[Op],
) -> Result<ProducedStream, VerifyError> {
    let (proof, results) = produce_stream_with(source, root, |context| context.apply_all(ops))?;
    Ok(ProducedStream { proof, results })
}

/// Produces the stream proof of the computation `f` run on the tree `root` of `source` (Irmin's
/// `produce_stream`): every object `f` (and the after hash) reads is recorded the first time, in
/// order; chains of single-pointer inodes are compressed into extenders.
pub fn produce_stream_with<T>(
    source: &mut dyn Source,
    root: KindedHash,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(StreamProof, T), VerifyError> {
    let mut recorder = StreamRecorder { source, seen: BTreeSet::new(), elts: Vec::new() };
    let mut context = Context::new(blinded_root(root), &mut recorder, Some(root));
    let value = f(&mut context)?;
    let after = context.hash()?;
    let elts = compress(core::mem::take(&mut recorder.elts));
    Ok((StreamProof { version: STREAM_VERSION, before: root, after, elts }, value))
}
