//! Merkle tree proofs and stream proofs in Octez's encodings (`Merkle_proof_encoding.V1.Tree32` /
//! `V2.Tree32`, docs/proofs.md): produced from a tree for a list of operations, verified against
//! them.
//!
//! Octez passes a closure over a tree to `produce_tree_proof`; across the language boundary the
//! computation is a list of operations instead, each `(kind, path, value)` (the path an array of steps): kind 0 `find`, 1
//! `mem`, 2 `mem_tree`, 3 `add path value`, 4 `remove`. Each result is `(value, flag)`: the value
//! of a `find`, the answer of a `mem` / `mem_tree`.

use crate::tree::OTree;
use crate::{Bytes, Outcome, guard};
use larch_proof::encoding::{stream, tree2, v1, v2};
use larch_proof::{KindedHash, Op, OpResult, Proof, StreamProof};

/// One operation from OCaml: `(kind, path, value)`.
type OpArg = (ocaml::Int, Vec<Bytes2>, Bytes2);

/// Bytes read from an OCaml string (an owned copy).
pub struct Bytes2(pub Vec<u8>);

// SAFETY: reads an OCaml string's bytes (copied).
unsafe impl ocaml::FromValue for Bytes2 {
    fn from_value(value: ocaml::Value) -> Self {
        Bytes2(<&[u8]>::from_value(value).to_vec())
    }
}

/// The results of a proof's operations, for OCaml.
type ResultsOut = Vec<(Option<Bytes>, bool)>;

fn ops_of(ops: Vec<OpArg>) -> Outcome<Vec<Op>> {
    ops.into_iter()
        .map(|(kind, path, value)| {
            let path: Vec<Vec<u8>> = path.into_iter().map(|step| step.0).collect();
            Ok(match kind {
                0 => Op::Find(path),
                1 => Op::Mem(path),
                2 => Op::MemTree(path),
                3 => Op::Add(path, value.0),
                4 => Op::Remove(path),
                _ => return Err(format!("larch: proof: unknown operation kind {kind}")),
            })
        })
        .collect()
}

fn results_of(results: Vec<OpResult>) -> ResultsOut {
    results
        .into_iter()
        .map(|result| match result {
            OpResult::Value(value) => (value.map(Bytes), false),
            OpResult::Bool(flag) => (None, flag),
            _ => (None, false),
        })
        .collect()
}

/// What a producing external returns: `(proof, before hash, after hash, results)`.
fn produced_out(
    bytes: Vec<u8>,
    before: &KindedHash,
    after: &KindedHash,
    results: Vec<OpResult>,
) -> (Bytes, Bytes, Bytes, ResultsOut) {
    (Bytes(bytes), Bytes(before.hash.0.to_vec()), Bytes(after.hash.0.to_vec()), results_of(results))
}

/// What a verifying external returns: `(before hash, after hash, results)`.
fn verified_out(
    before: &KindedHash,
    after: &KindedHash,
    results: Vec<OpResult>,
) -> (Bytes, Bytes, ResultsOut) {
    (Bytes(before.hash.0.to_vec()), Bytes(after.hash.0.to_vec()), results_of(results))
}

/// The encoding chosen on the OCaml side (`Larch_context.Proof.encoding`): 0 `V1`, 1 `V2`
/// (`Merkle_proof_encoding.V1/V2.Tree32`), 2 `V1_tree2`, 3 `V2_tree2` (`V1/V2.Tree2`, proofs of
/// the binary-tree context, verified only: larch's contexts are 32-ary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    V1,
    V2,
    V1Tree2,
    V2Tree2,
}

fn encoding_of(code: ocaml::Int) -> Outcome<Encoding> {
    match code {
        0 => Ok(Encoding::V1),
        1 => Ok(Encoding::V2),
        2 => Ok(Encoding::V1Tree2),
        3 => Ok(Encoding::V2Tree2),
        _ => Err(format!("larch: proof: unknown encoding {code}")),
    }
}

/// `V1` or `V2` (`Tree32`): whether `V2`. A `Tree2` encoding is an error for `what`.
fn tree32(encoding: Encoding, what: &str) -> Outcome<bool> {
    match encoding {
        Encoding::V1 => Ok(false),
        Encoding::V2 => Ok(true),
        Encoding::V1Tree2 | Encoding::V2Tree2 => Err(format!(
            "larch: {what}: no Tree2 encoding here (Tree2 is the binary-tree context's; larch verifies its tree proofs only, its own contexts being 32-ary)"
        )),
    }
}

fn encode(proof: &Proof, encoding: Encoding, what: &str) -> Outcome<Vec<u8>> {
    let encoded = if tree32(encoding, what)? { v2::encode(proof) } else { v1::encode(proof) };
    encoded.map_err(|err| format!("larch: encoding the proof: {err}"))
}

fn decode(bytes: &[u8], encoding: Encoding) -> Outcome<Proof> {
    let decoded = match encoding {
        Encoding::V1 => v1::decode(bytes),
        Encoding::V2 => v2::decode(bytes),
        Encoding::V1Tree2 => tree2::v1::decode(bytes),
        Encoding::V2Tree2 => tree2::v2::decode(bytes),
    };
    decoded.map_err(|err| format!("larch: decoding the proof: {err}"))
}

/// Produces the tree proof of `ops` on `tree`, in `encoding` ([`Encoding`]; `Tree32` only):
/// `(proof, before hash, after hash, results)`.
#[ocaml::func]
#[ocaml::sig(
    "tree -> (int * string array * string) array -> int -> ((bytes * bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_produce_tree_proof(
    tree: &OTree,
    ops: Vec<OpArg>,
    encoding: ocaml::Int,
) -> Outcome<(Bytes, Bytes, Bytes, ResultsOut)> {
    let tree = tree.0.clone();
    guard(|| {
        let ops = ops_of(ops)?;
        let encoding = encoding_of(encoding)?;
        tree32(encoding, "produce_tree_proof")?;
        let produced =
            larch_core::proof::produce(&tree, &ops).map_err(|err| format!("larch: proof: {err}"))?;
        let bytes = encode(&produced.proof, encoding, "produce_tree_proof")?;
        Ok(produced_out(bytes, &produced.proof.before, &produced.proof.after, produced.results))
    })
}

/// Verifies an encoded tree proof for `ops`: `(before hash, after hash, results)`, or an error
/// when the proof is rejected. A `Tree2` encoding verifies a proof of the binary-tree context
/// (`larch_proof::verify_tree2`).
#[ocaml::func]
#[ocaml::sig(
    "string -> int -> (int * string array * string) array -> ((bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_verify_tree_proof(
    proof: &[u8],
    encoding: ocaml::Int,
    ops: Vec<OpArg>,
) -> Outcome<(Bytes, Bytes, ResultsOut)> {
    let proof = proof.to_vec();
    guard(|| {
        let ops = ops_of(ops)?;
        let encoding = encoding_of(encoding)?;
        let proof = decode(&proof, encoding)?;
        let verified = match encoding {
            Encoding::V1 | Encoding::V2 => larch_proof::verify(&proof, &ops),
            Encoding::V1Tree2 | Encoding::V2Tree2 => larch_proof::verify_tree2(&proof, &ops),
        }
        .map_err(|err| format!("larch: the proof is rejected: {err}"))?;
        Ok(verified_out(&verified.before, &verified.after, verified.results))
    })
}

fn encode_stream(proof: &StreamProof, encoding: Encoding) -> Outcome<Vec<u8>> {
    let v2 = tree32(encoding, "stream proofs")?;
    let encoded = if v2 { stream::v2::encode(proof) } else { stream::v1::encode(proof) };
    encoded.map_err(|err| format!("larch: encoding the stream proof: {err}"))
}

fn decode_stream(bytes: &[u8], encoding: Encoding) -> Outcome<StreamProof> {
    let v2 = tree32(encoding, "stream proofs")?;
    let decoded = if v2 { stream::v2::decode(bytes) } else { stream::v1::decode(bytes) };
    decoded.map_err(|err| format!("larch: decoding the stream proof: {err}"))
}

/// Produces the stream proof of `ops` on `tree` (Octez `produce_stream_proof`), in `encoding`
/// (`Tree32` only): `(proof, before hash, after hash, results)`.
#[ocaml::func]
#[ocaml::sig(
    "tree -> (int * string array * string) array -> int -> ((bytes * bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_produce_stream_proof(
    tree: &OTree,
    ops: Vec<OpArg>,
    encoding: ocaml::Int,
) -> Outcome<(Bytes, Bytes, Bytes, ResultsOut)> {
    let tree = tree.0.clone();
    guard(|| {
        let ops = ops_of(ops)?;
        let encoding = encoding_of(encoding)?;
        tree32(encoding, "stream proofs")?;
        let produced = larch_core::proof::produce_stream(&tree, &ops)
            .map_err(|err| format!("larch: stream proof: {err}"))?;
        let bytes = encode_stream(&produced.proof, encoding)?;
        Ok(produced_out(bytes, &produced.proof.before, &produced.proof.after, produced.results))
    })
}

/// Verifies an encoded stream proof for `ops` (Octez `verify_stream_proof`): `(before hash,
/// after hash, results)`, or an error when the proof is rejected.
#[ocaml::func]
#[ocaml::sig(
    "string -> int -> (int * string array * string) array -> ((bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_verify_stream_proof(
    proof: &[u8],
    encoding: ocaml::Int,
    ops: Vec<OpArg>,
) -> Outcome<(Bytes, Bytes, ResultsOut)> {
    let proof = proof.to_vec();
    guard(|| {
        let ops = ops_of(ops)?;
        let encoding = encoding_of(encoding)?;
        let proof = decode_stream(&proof, encoding)?;
        let verified = larch_proof::verify_stream(&proof, &ops)
            .map_err(|err| format!("larch: the stream proof is rejected: {err}"))?;
        Ok(verified_out(&verified.before, &verified.after, verified.results))
    })
}

/// Octez's `Context.merkle_tree_v2` on `tree` (a context's tree): the tree proof of Octez's
/// `get_data leaf_kind [key]`, `raw_context` choosing `Raw_context` (else `Hole`), in `encoding`
/// (`Tree32` only; `larch_core::proof::merkle_tree_v2`).
#[ocaml::func]
#[ocaml::sig("tree -> bool -> string array -> int -> (bytes, string) result")]
pub fn larch_merkle_tree_v2(
    tree: &OTree,
    raw_context: bool,
    key: Vec<Bytes2>,
    encoding: ocaml::Int,
) -> Outcome<Bytes> {
    let tree = tree.0.clone();
    guard(|| {
        let encoding = encoding_of(encoding)?;
        tree32(encoding, "merkle_tree_v2")?;
        let key: Vec<Vec<u8>> = key.into_iter().map(|step| step.0).collect();
        let kind = if raw_context {
            larch_core::proof::LeafKind::RawContext
        } else {
            larch_core::proof::LeafKind::Hole
        };
        let proof = larch_core::proof::merkle_tree_v2(&tree, kind, &key)
            .map_err(|err| format!("larch: merkle_tree_v2: {err}"))?;
        Ok(Bytes(encode(&proof, encoding, "merkle_tree_v2")?))
    })
}
