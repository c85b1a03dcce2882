//! Verifying a proof (Irmin's `verify_proof`, spec §3) and producing one from a store through a
//! [`Source`] (Irmin's `produce_proof`, spec §2), both by running the operations on the partial tree.

use crate::error::VerifyError;
use crate::hash::{Arity, Hash, Kind};
use crate::model::{self, PInode, PNode, RefuseIn, Resolver};
use crate::ops::{self, Op, OpResult};
use crate::types::{KindedHash, Proof};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// What a verified proof establishes: the results of the operations on the `before` tree and the
/// hash of the tree they leave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The `before` hash (checked).
    pub before: KindedHash,
    /// One result per operation.
    pub results: Vec<OpResult>,
    /// The `after` hash (checked).
    pub after: KindedHash,
}

/// Verifies `proof` for `ops`: rebuilds the hash of the proof tree and checks it against
/// `proof.before`, replays `ops` on the partial tree (a blinded part they need is an error), and
/// checks the resulting hash against `proof.after`.
pub fn verify(proof: &Proof, ops: &[Op]) -> Result<Verified, VerifyError> {
    let (results, before, after) = verify_with(proof, |context| context.apply_all(ops))?;
    Ok(Verified { before, results, after })
}

/// Verifies `proof` for the computation `f` (Irmin's `verify_proof p f`): checks that `version`
/// is 0 (as Octez's protocol environment does for 32-ary tree proofs), checks `before`, runs
/// `f` on the partial tree, checks `after`; returns `f`'s result and the two hashes.
pub fn verify_with<T>(
    proof: &Proof,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(T, KindedHash, KindedHash), VerifyError> {
    verify_in(proof, Arity::TREE32, TREE_VERSION, f)
}

/// The `version` of a tree proof of the 32-ary context (Octez's `encode_proof_version`).
pub const TREE_VERSION: i16 = 0;
/// The `version` of a tree proof of the binary-tree context (bit 1: `is_binary`).
pub const TREE2_VERSION: i16 = 2;

/// Verifies a tree proof of the **binary-tree** context (`Context_binary`: inodes of 2
/// buckets, directories of at most 2 entries hashed flat; Octez's `Tree2` proofs, decoded by
/// [`crate::encoding::tree2`]) for `ops`: as [`verify()`], with `version` 2.
pub fn verify_tree2(proof: &Proof, ops: &[Op]) -> Result<Verified, VerifyError> {
    let (results, before, after) = verify_tree2_with(proof, |context| context.apply_all(ops))?;
    Ok(Verified { before, results, after })
}

/// [`verify_with`] for a tree proof of the binary-tree context (`version` 2).
pub fn verify_tree2_with<T>(
    proof: &Proof,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(T, KindedHash, KindedHash), VerifyError> {
    verify_in(proof, Arity::TREE2, TREE2_VERSION, f)
}

fn verify_in<T>(
    proof: &Proof,
    arity: Arity,
    version: i16,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(T, KindedHash, KindedHash), VerifyError> {
    if proof.version != version {
        return Err(VerifyError::UnsupportedVersion(proof.version));
    }
    let mut root = model::load_in(&proof.state, arity)?;
    let mut refuse = RefuseIn(arity);
    let before = model::kinded_hash(&mut root, &mut refuse)?;
    if before != proof.before {
        return Err(VerifyError::BeforeMismatch { expected: proof.before.hash, computed: before.hash });
    }
    let mut context = Context { root, resolver: &mut refuse, unchanged: Some(before) };
    let value = f(&mut context)?;
    let after = context.hash()?;
    if after != proof.after {
        return Err(VerifyError::AfterMismatch { expected: proof.after.hash, computed: after.hash });
    }
    Ok((value, before, after))
}

/// The tree a computation runs on while a proof is verified or produced: the partial tree, with
/// what loads (production) or refuses (verification) its blinded parts.
pub struct Context<'r> {
    root: PNode,
    resolver: &'r mut dyn Resolver,
    /// The hash of the tree while no operation has modified it (then not recomputed).
    unchanged: Option<KindedHash>,
}

impl<'r> Context<'r> {
    pub(crate) fn new(
        root: PNode,
        resolver: &'r mut dyn Resolver,
        unchanged: Option<KindedHash>,
    ) -> Context<'r> {
        Context { root, resolver, unchanged }
    }
}

impl Context<'_> {
    /// Runs one operation.
    pub fn apply(&mut self, op: &Op) -> Result<OpResult, VerifyError> {
        self.note_modification(core::slice::from_ref(op));
        let mut results = ops::run(&mut self.root, core::slice::from_ref(op), self.resolver)?;
        results.pop().ok_or(VerifyError::Malformed("no result"))
    }

    /// Runs operations in order.
    pub fn apply_all(&mut self, ops: &[Op]) -> Result<Vec<OpResult>, VerifyError> {
        self.note_modification(ops);
        ops::run(&mut self.root, ops, self.resolver)
    }

    /// The value at `path` (Irmin `find`).
    pub fn find(&mut self, path: &[&[u8]]) -> Result<Option<Vec<u8>>, VerifyError> {
        match self.apply(&Op::Find(to_path(path)))? {
            OpResult::Value(value) => Ok(value),
            _ => Err(VerifyError::Malformed("find returned no value")),
        }
    }

    /// Sets the value at `path` (Irmin `add`).
    pub fn add(&mut self, path: &[&[u8]], value: &[u8]) -> Result<(), VerifyError> {
        self.apply(&Op::Add(to_path(path), value.to_vec())).map(|_| ())
    }

    /// Removes `path` (Irmin `remove`).
    pub fn remove(&mut self, path: &[&[u8]]) -> Result<(), VerifyError> {
        self.apply(&Op::Remove(to_path(path))).map(|_| ())
    }

    /// The hash of the tree as it is now.
    pub fn hash(&mut self) -> Result<KindedHash, VerifyError> {
        match self.unchanged {
            Some(hash) => Ok(hash),
            None => model::kinded_hash(&mut self.root, self.resolver),
        }
    }

    fn note_modification(&mut self, ops: &[Op]) {
        if ops.iter().any(|op| matches!(op, Op::Add(..) | Op::Remove(_) | Op::Copy { .. })) {
            self.unchanged = None;
        }
    }
}

fn to_path(path: &[&[u8]]) -> ops::Path {
    path.iter().map(|step| step.to_vec()).collect()
}

/// A store a proof is produced from: loads one object at a time by hash, children blinded.
pub trait Source {
    /// The root inode (depth 0) of the directory `hash`: `PInode::Values` at depth 0 for a
    /// directory of at most 256 entries (every entry, blinded), otherwise its root `Tree` whose
    /// children are `PInode::Blinded`.
    fn load_node(&mut self, hash: &Hash) -> Result<PInode, VerifyError>;
    /// The inode `hash` at `depth` (≥ 1), children blinded.
    fn load_inode(&mut self, hash: &Hash, depth: u8) -> Result<PInode, VerifyError>;
    /// The value whose hash is `hash`.
    fn load_contents(&mut self, hash: &Hash) -> Result<Vec<u8>, VerifyError>;
}

/// Loads through a [`Source`] and records every object an operation read, keyed by hash, as
/// Irmin's producing environment does.
struct Recorder<'a> {
    source: &'a mut dyn Source,
    nodes: BTreeMap<Hash, PInode>,
    inodes: BTreeMap<Hash, PInode>,
    contents: BTreeMap<Hash, Vec<u8>>,
}

impl Resolver for Recorder<'_> {
    fn contents(&mut self, _op: &'static str, hash: &Hash) -> Result<Vec<u8>, VerifyError> {
        let value = self.source.load_contents(hash)?;
        self.contents.insert(*hash, value.clone());
        Ok(value)
    }
    fn node(&mut self, _op: &'static str, hash: &Hash) -> Result<PInode, VerifyError> {
        let node = self.source.load_node(hash)?;
        self.nodes.insert(*hash, node.clone());
        Ok(node)
    }
    fn inode(&mut self, _op: &'static str, hash: &Hash, depth: u8) -> Result<PInode, VerifyError> {
        let inode = self.source.load_inode(hash, depth)?;
        self.inodes.insert(*hash, inode.clone());
        Ok(inode)
    }
}

impl Recorder<'_> {
    /// The before tree restricted to what was recorded (everything else blinded).
    fn reveal(&self, node: &PNode) -> PNode {
        match node {
            PNode::BlindedContents(hash) => match self.contents.get(hash) {
                Some(value) => PNode::Contents(value.clone()),
                None => node.clone(),
            },
            PNode::BlindedNode(hash) => match self.nodes.get(hash) {
                Some(root) => PNode::Dir(Box::new(self.reveal_inode(root))),
                None => node.clone(),
            },
            PNode::Contents(_) => node.clone(),
            PNode::Dir(root) => PNode::Dir(Box::new(self.reveal_inode(root))),
        }
    }

    fn reveal_inode(&self, inode: &PInode) -> PInode {
        match inode {
            PInode::Blinded(hash) => match self.inodes.get(hash) {
                Some(expanded) => self.reveal_inode(expanded),
                None => inode.clone(),
            },
            PInode::Values(values) => PInode::Values(model::PValues {
                depth: values.depth,
                entries: values
                    .entries
                    .iter()
                    .map(|(name, child)| (name.clone(), self.reveal(child)))
                    .collect(),
            }),
            PInode::Tree(tree) => PInode::Tree(model::PTree {
                depth: tree.depth,
                length: tree.length,
                children: tree
                    .children
                    .iter()
                    .map(|(index, child)| (*index, self.reveal_inode(child)))
                    .collect(),
            }),
        }
    }
}

/// A produced proof with the results of its operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produced {
    /// The proof (version 0).
    pub proof: Proof,
    /// One result per operation.
    pub results: Vec<OpResult>,
}

/// Produces the proof of `ops` run on the tree `root` of `source`: the before tree restricted to
/// every object the operations (and the after hash) read, in Irmin's shape.
///
/// Unlike Irmin 3.7.2, the inodes read to hash a directory that shrinks to 256 entries or fewer
/// are revealed too, so that such proofs verify (spec §2, vector `b257_remove`); everywhere else
/// the shape is Irmin's.
pub fn produce(source: &mut dyn Source, root: KindedHash, ops: &[Op]) -> Result<Produced, VerifyError> {
    let (proof, results) = produce_with(source, root, |context| context.apply_all(ops))?;
    Ok(Produced { proof, results })
}

/// Produces the proof of the computation `f` run on the tree `root` of `source` (Irmin's
/// `produce_proof`); returns the proof and `f`'s result.
pub fn produce_with<T>(
    source: &mut dyn Source,
    root: KindedHash,
    f: impl FnOnce(&mut Context<'_>) -> Result<T, VerifyError>,
) -> Result<(Proof, T), VerifyError> {
    let mut recorder =
        Recorder { source, nodes: BTreeMap::new(), inodes: BTreeMap::new(), contents: BTreeMap::new() };
    // The root is opened only when `f` (or the after hash) reads it: Irmin's `produce_proof`
    // imports the tree lazily (`import_with_env` → `Node.of_key`), so a computation that reads
    // nothing gives the blinded root.
    let blinded = match root.kind {
        Kind::Node => PNode::BlindedNode(root.hash),
        Kind::Contents => PNode::BlindedContents(root.hash),
    };
    let mut context = Context { root: blinded.clone(), resolver: &mut recorder, unchanged: Some(root) };
    let value = f(&mut context)?;
    let after = context.hash()?;
    let state = model::to_proof(&recorder.reveal(&blinded));
    Ok((Proof { version: 0, before: root, after, state }, value))
}
