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
use larch_proof::encoding::{stream, v1, v2};
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

fn encode(proof: &Proof, v2: bool) -> Outcome<Vec<u8>> {
    let encoded = if v2 { v2::encode(proof) } else { v1::encode(proof) };
    encoded.map_err(|err| format!("larch: encoding the proof: {err}"))
}

fn decode(bytes: &[u8], v2: bool) -> Outcome<Proof> {
    let decoded = if v2 { v2::decode(bytes) } else { v1::decode(bytes) };
    decoded.map_err(|err| format!("larch: decoding the proof: {err}"))
}

/// Produces the tree proof of `ops` on `tree`, encoded in V2 (`v2`) or V1: `(proof, before
/// hash, after hash, results)`.
#[ocaml::func]
#[ocaml::sig(
    "tree -> (int * string array * string) array -> bool -> ((bytes * bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_produce_tree_proof(
    tree: &OTree,
    ops: Vec<OpArg>,
    v2: bool,
) -> Outcome<(Bytes, Bytes, Bytes, ResultsOut)> {
    let tree = tree.0.clone();
    guard(|| {
        let ops = ops_of(ops)?;
        let produced =
            larch_core::proof::produce(&tree, &ops).map_err(|err| format!("larch: proof: {err}"))?;
        let bytes = encode(&produced.proof, v2)?;
        Ok(produced_out(bytes, &produced.proof.before, &produced.proof.after, produced.results))
    })
}

/// Verifies an encoded tree proof for `ops`: `(before hash, after hash, results)`, or an error
/// when the proof is rejected.
#[ocaml::func]
#[ocaml::sig(
    "string -> bool -> (int * string array * string) array -> ((bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_verify_tree_proof(
    proof: &[u8],
    v2: bool,
    ops: Vec<OpArg>,
) -> Outcome<(Bytes, Bytes, ResultsOut)> {
    let proof = proof.to_vec();
    guard(|| {
        let ops = ops_of(ops)?;
        let proof = decode(&proof, v2)?;
        let verified = larch_proof::verify(&proof, &ops)
            .map_err(|err| format!("larch: the proof is rejected: {err}"))?;
        Ok(verified_out(&verified.before, &verified.after, verified.results))
    })
}

fn encode_stream(proof: &StreamProof, v2: bool) -> Outcome<Vec<u8>> {
    let encoded = if v2 { stream::v2::encode(proof) } else { stream::v1::encode(proof) };
    encoded.map_err(|err| format!("larch: encoding the stream proof: {err}"))
}

fn decode_stream(bytes: &[u8], v2: bool) -> Outcome<StreamProof> {
    let decoded = if v2 { stream::v2::decode(bytes) } else { stream::v1::decode(bytes) };
    decoded.map_err(|err| format!("larch: decoding the stream proof: {err}"))
}

/// Produces the stream proof of `ops` on `tree` (Octez `produce_stream_proof`), encoded in V2
/// (`v2`) or V1: `(proof, before hash, after hash, results)`.
#[ocaml::func]
#[ocaml::sig(
    "tree -> (int * string array * string) array -> bool -> ((bytes * bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_produce_stream_proof(
    tree: &OTree,
    ops: Vec<OpArg>,
    v2: bool,
) -> Outcome<(Bytes, Bytes, Bytes, ResultsOut)> {
    let tree = tree.0.clone();
    guard(|| {
        let ops = ops_of(ops)?;
        let produced = larch_core::proof::produce_stream(&tree, &ops)
            .map_err(|err| format!("larch: stream proof: {err}"))?;
        let bytes = encode_stream(&produced.proof, v2)?;
        Ok(produced_out(bytes, &produced.proof.before, &produced.proof.after, produced.results))
    })
}

/// Verifies an encoded stream proof for `ops` (Octez `verify_stream_proof`): `(before hash,
/// after hash, results)`, or an error when the proof is rejected.
#[ocaml::func]
#[ocaml::sig(
    "string -> bool -> (int * string array * string) array -> ((bytes * bytes * (bytes option * bool) array), string) result"
)]
pub fn larch_verify_stream_proof(
    proof: &[u8],
    v2: bool,
    ops: Vec<OpArg>,
) -> Outcome<(Bytes, Bytes, ResultsOut)> {
    let proof = proof.to_vec();
    guard(|| {
        let ops = ops_of(ops)?;
        let proof = decode_stream(&proof, v2)?;
        let verified = larch_proof::verify_stream(&proof, &ops)
            .map_err(|err| format!("larch: the stream proof is rejected: {err}"))?;
        Ok(verified_out(&verified.before, &verified.after, verified.results))
    })
}
