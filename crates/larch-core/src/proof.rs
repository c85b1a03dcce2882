//! Producing Merkle proofs of a context tree (Irmin's `Tree.produce_proof`, spec
//! `merkle-proofs.md` §2): the operations run on `larch_proof`'s partial tree, which loads from
//! this tree (in memory or in a store, through its [`ObjectSource`]) exactly the objects they read;
//! the proof is the before tree restricted to those objects, in Irmin's shape.
//!
//! ```
//! use larch_core::{CommitInfo, MemoryRepo, proof};
//! use larch_proof::{Op, OpResult};
//!
//! let mut repo = MemoryRepo::new();
//! let mut tree = repo.empty_tree();
//! tree.add(&["a", "b"], b"value".to_vec())?;
//! let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, ""))?;
//! let tree = repo.checkout(&commit)?;
//! let produced = proof::produce(&tree, &[Op::Find(vec![b"a".to_vec(), b"b".to_vec()])])?;
//! let verified = larch_proof::verify(&produced.proof, &[Op::Find(vec![b"a".to_vec(), b"b".to_vec()])])?;
//! assert_eq!(verified.results, vec![OpResult::Value(Some(b"value".to_vec()))]);
//! assert_eq!(verified.before.hash.0, *tree.hash().as_bytes());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::hash::Hash;
use crate::schema::{Kind, STABLE_HASH_MAX};
use crate::tree::node::{ContentsRef, Entries, Entry, NodeBody, NodeRef};
use crate::tree::source::ObjectSource;
use crate::tree::{Tree, TreeError, dir};
use larch_proof::model::{PInode, PNode, PTree, PValues};
use larch_proof::{
    Context, KindedHash, Op, OpResult, Produced, ProducedStream, Proof, StreamProof, VerifyError,
};
use std::collections::{BTreeMap, HashMap};

/// Why a proof could not be produced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// The tree could not be read (a load failed, or a malformed node).
    #[error("reading the tree: {0}")]
    Tree(#[from] TreeError),
    /// The computation failed (its own error, or a limit of the proof model).
    #[error("running the computation: {0}")]
    Proof(VerifyError),
}

fn proof_hash(hash: &Hash) -> larch_proof::Hash {
    larch_proof::Hash(*hash.as_bytes())
}

fn core_hash(hash: &larch_proof::Hash) -> Hash {
    Hash(hash.0)
}

fn proof_kind(kind: Kind) -> larch_proof::Kind {
    match kind {
        Kind::Contents => larch_proof::Kind::Contents,
        Kind::Node => larch_proof::Kind::Node,
    }
}

/// A [`larch_proof::Source`] over a larch tree: knows the references of every object it has
/// handed out (by hash) and loads them through the tree's object source.
struct TreeSource<'a> {
    source: &'a dyn ObjectSource,
    nodes: HashMap<Hash, NodeRef>,
    contents: HashMap<Hash, ContentsRef>,
    /// The first load failure, reported instead of the proof model's summary of it.
    failure: Option<TreeError>,
}

impl TreeSource<'_> {
    fn blinded(&mut self, entry: &Entry) -> PNode {
        match entry {
            Entry::Contents(contents) => {
                let hash = contents.hash();
                self.contents.entry(hash).or_insert_with(|| contents.clone());
                PNode::BlindedContents(proof_hash(&hash))
            }
            Entry::Node(node) => {
                let hash = node.hash();
                self.nodes.entry(hash).or_insert_with(|| node.clone());
                PNode::BlindedNode(proof_hash(&hash))
            }
        }
    }

    fn values(&mut self, depth: u8, entries: &Entries) -> PInode {
        let entries =
            entries.iter().map(|(name, entry)| (name.as_bytes().to_vec(), self.blinded(entry))).collect();
        PInode::Values(PValues { depth, entries })
    }

    fn fail(&mut self, what: larch_proof::Kind, hash: &larch_proof::Hash, error: TreeError) -> VerifyError {
        if self.failure.is_none() {
            self.failure = Some(error);
        }
        VerifyError::Source { what, hash: *hash }
    }

    fn load(&mut self, hash: &larch_proof::Hash) -> Result<std::sync::Arc<crate::Node>, VerifyError> {
        let node = self.nodes.get(&core_hash(hash)).cloned();
        let Some(node) = node else {
            return Err(self.fail(larch_proof::Kind::Node, hash, TreeError::Malformed("unknown node hash")));
        };
        dir::load(&node, self.source).map_err(|error| self.fail(larch_proof::Kind::Node, hash, error))
    }
}

impl larch_proof::Source for TreeSource<'_> {
    fn load_node(&mut self, hash: &larch_proof::Hash) -> Result<PInode, VerifyError> {
        let node = self.load(hash)?;
        match node.body() {
            NodeBody::Flat(entries) => Ok(self.values(0, entries)),
            NodeBody::Tree(tree) if tree.length > STABLE_HASH_MAX as u64 => {
                let mut children = BTreeMap::new();
                for (index, child) in &tree.children {
                    let child_hash = child.hash();
                    self.nodes.entry(child_hash).or_insert_with(|| child.clone());
                    children.insert(*index, PInode::Blinded(proof_hash(&child_hash)));
                }
                Ok(PInode::Tree(PTree { depth: 0, length: tree.length, children }))
            }
            NodeBody::Tree(_) => {
                // A stable directory kept as an inode trie (as Irmin stores those of 33 to 256
                // entries): its proof lists every entry, like a flat one.
                let entries = dir::entries(&node, self.source)
                    .map_err(|error| self.fail(larch_proof::Kind::Node, hash, error))?;
                Ok(self.values(0, &entries))
            }
            NodeBody::Values(_) => Err(self.fail(
                larch_proof::Kind::Node,
                hash,
                TreeError::Malformed("an inode leaf used as a directory"),
            )),
        }
    }

    fn load_inode(&mut self, hash: &larch_proof::Hash, depth: u8) -> Result<PInode, VerifyError> {
        let node = self.load(hash)?;
        match node.body() {
            NodeBody::Values(entries) => Ok(self.values(depth, entries)),
            NodeBody::Tree(tree) if tree.depth == depth => {
                let mut children = BTreeMap::new();
                for (index, child) in &tree.children {
                    let child_hash = child.hash();
                    self.nodes.entry(child_hash).or_insert_with(|| child.clone());
                    children.insert(*index, PInode::Blinded(proof_hash(&child_hash)));
                }
                Ok(PInode::Tree(PTree { depth, length: tree.length, children }))
            }
            _ => Err(self.fail(
                larch_proof::Kind::Node,
                hash,
                TreeError::Malformed("inode of an unexpected shape"),
            )),
        }
    }

    fn load_contents(&mut self, hash: &larch_proof::Hash) -> Result<Vec<u8>, VerifyError> {
        let contents = self.contents.get(&core_hash(hash)).cloned();
        match contents {
            Some(ContentsRef::Mem(contents)) => Ok(contents.as_bytes().to_vec()),
            Some(ContentsRef::Inline(value)) => Ok(value.as_bytes().to_vec()),
            Some(ContentsRef::Stored { hash: stored, key }) => {
                match self.source.load_contents(key, &stored) {
                    Ok(contents) => Ok(contents.as_bytes().to_vec()),
                    Err(error) => Err(self.fail(larch_proof::Kind::Contents, hash, error.into())),
                }
            }
            None => Err(self.fail(
                larch_proof::Kind::Contents,
                hash,
                TreeError::Malformed("unknown contents hash"),
            )),
        }
    }
}

/// Produces the proof of the computation `f` run on `tree` (Irmin's `produce_proof`): `f` works on
/// a [`Context`] whose reads load from `tree`; the proof reveals exactly what they read (and, beyond
/// Irmin 3.7.2, what hashing a directory that shrinks to 256 entries or fewer needs, so that such
/// proofs verify). Returns the proof and `f`'s result.
pub fn produce_with<T>(
    tree: &Tree,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(Proof, T), ProduceError> {
    with_source(tree, |source, root| larch_proof::produce_with(source, root, f))
}

/// Runs a `larch_proof` producer over `tree`'s objects, reporting a load failure as such.
fn with_source<R>(
    tree: &Tree,
    run: impl FnOnce(&mut TreeSource<'_>, KindedHash) -> Result<R, VerifyError>,
) -> Result<R, ProduceError> {
    let mut source = TreeSource {
        source: &**tree.source(),
        nodes: HashMap::new(),
        contents: HashMap::new(),
        failure: None,
    };
    let root_hash = tree.hash();
    let root = KindedHash { kind: proof_kind(tree.kind()), hash: proof_hash(&root_hash) };
    match tree.root() {
        Entry::Node(node) => {
            source.nodes.insert(root_hash, node.clone());
        }
        Entry::Contents(contents) => {
            source.contents.insert(root_hash, contents.clone());
        }
    }
    let outcome = run(&mut source, root);
    match (outcome, source.failure.take()) {
        (Ok(done), _) => Ok(done),
        (Err(_), Some(failure)) => Err(ProduceError::Tree(failure)),
        (Err(error), None) => Err(ProduceError::Proof(error)),
    }
}

/// Produces the stream proof of the computation `f` run on `tree` (Irmin's `produce_stream`,
/// Octez's `produce_stream_proof`): the objects `f` reads from `tree`, in the order it reads them
/// (see `larch_proof::stream`). Returns the proof and `f`'s result.
pub fn produce_stream_with<T>(
    tree: &Tree,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(StreamProof, T), ProduceError> {
    with_source(tree, |source, root| larch_proof::produce_stream_with(source, root, f))
}

/// Produces the stream proof of `ops` run on `tree`, with their results.
pub fn produce_stream(tree: &Tree, ops: &[Op]) -> Result<ProducedStream, ProduceError> {
    let (proof, results) = produce_stream_with(tree, |context| context.apply_all(ops))?;
    Ok(ProducedStream { proof, results })
}

/// Produces the proof of `ops` run on `tree`, with their results.
pub fn produce(tree: &Tree, ops: &[Op]) -> Result<Produced, ProduceError> {
    let (proof, results) = produce_with(tree, |context| context.apply_all(ops))?;
    Ok(Produced { proof, results })
}

/// Octez's `Proof.merkle_leaf_kind`: what [`merkle_tree_v2`] reveals at its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafKind {
    /// `Hole`: nothing is read (Octez's `get_data` returns the key without reading it).
    Hole,
    /// `Raw_context`: the value at `data/key`, or the whole directory there.
    RawContext,
}

/// The key under which Octez keeps the protocol's data (`Tezos_context_sigs.Context.data_key`).
pub const DATA_KEY: &[u8] = b"data";

/// Octez's `Context.merkle_tree_v2 ctxt leaf_kind key`: the tree proof (version 0) of Octez's
/// `get_data leaf_kind [key]` run on `tree` (`Tezos_context_sigs.Context.With_get_data`).
///
/// - [`LeafKind::Hole`] reads nothing, so the proof reveals nothing: its state is the blinded
///   root (`Blinded_node` of the root hash, or `Blinded_value` for a contents tree), as Irmin's
///   `produce_proof` gives for a computation that reads nothing.
/// - [`LeafKind::RawContext`] runs `find` and `find_tree` on `data/key` and, when a directory is
///   there, `unshallow`s it (reads every directory, inode and value below it): the proof reveals
///   the path to `data/key`, the value there, or the whole directory there; the rest is blinded.
///
/// `before` and `after` are both the hash of `tree` (nothing is modified). Paths deeper than
/// [`larch_proof::ops::MAX_PATH_LEN`] below the root are an error.
pub fn merkle_tree_v2<P: AsRef<[u8]>>(
    tree: &Tree,
    leaf_kind: LeafKind,
    key: &[P],
) -> Result<Proof, ProduceError> {
    let root = KindedHash { kind: proof_kind(tree.kind()), hash: proof_hash(&tree.hash()) };
    match leaf_kind {
        LeafKind::Hole => {
            let state = match root.kind {
                larch_proof::Kind::Node => larch_proof::Tree::BlindedNode(root.hash),
                larch_proof::Kind::Contents => larch_proof::Tree::BlindedContents(root.hash),
            };
            Ok(Proof { version: 0, before: root, after: root, state })
        }
        LeafKind::RawContext => {
            let mut path = vec![DATA_KEY.to_vec()];
            path.extend(key.iter().map(|step| step.as_ref().to_vec()));
            let (proof, ()) = produce_with(tree, |context| read_subtree(context, path))?;
            Ok(proof)
        }
    }
}

/// Reads the value at `path`, or every directory and value below it (Octez's `find` and
/// `find_tree`, then `unshallow` of a directory).
fn read_subtree(context: &mut Context<'_>, path: Vec<Vec<u8>>) -> Result<(), VerifyError> {
    context.apply(&Op::Find(path.clone()))?;
    let mut directories = vec![path];
    while let Some(directory) = directories.pop() {
        let OpResult::List(entries) = context.apply(&Op::List(directory.clone()))? else {
            continue;
        };
        for (name, kind) in entries {
            let mut child = directory.clone();
            child.push(name);
            match kind {
                larch_proof::Kind::Contents => {
                    context.apply(&Op::Find(child))?;
                }
                larch_proof::Kind::Node => directories.push(child),
            }
        }
    }
    Ok(())
}
