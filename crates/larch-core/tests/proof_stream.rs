//! Stream proofs (`larch_proof::stream`) produced from larch trees, checked by properties (no
//! stream-proof vectors from Irmin exist in the shared material; replay a failure with
//! `LARCH_SEED=<seed> cargo test -p larch-core --test proof_stream`):
//! - on random trees and operation sequences, the stream verifies with larch-core's results and
//!   before/after hashes, and survives Octez's V1 and V2 stream encodings;
//! - its values are exactly the values the tree proof of the same operations reveals, each once;
//! - its elements follow the structural rules (sorted entries, increasing indices, extenders of
//!   ≥ 2 segments), and a chain of single-pointer inodes becomes an extender;
//! - dropping, adding, reordering or altering any element, and flipping any byte of its
//!   encodings, is rejected (with the typed error the case calls for).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod proof_helpers;

use larch_core::ocaml_hash::inode_index;
use larch_core::{CommitInfo, MemoryRepo, proof};
use larch_proof::encoding::stream::{v1, v2};
use larch_proof::{Elt, Op, OpResult, StreamProof, Tree, VerifyError, verify_stream};
use larch_testkit::rand::Rng;
use larch_testkit::seeded_rng;
use proof_helpers::{apply_to_larch, random_op, random_tree};
use std::collections::BTreeSet;

/// The values a tree proof reveals (by value, deduplicated).
fn revealed_values(tree: &Tree, out: &mut BTreeSet<Vec<u8>>) {
    use larch_proof::InodeTree;
    fn inode(tree: &InodeTree, out: &mut BTreeSet<Vec<u8>>) {
        match tree {
            InodeTree::Blinded(_) => {}
            InodeTree::Values(entries) => entries.iter().for_each(|(_, t)| revealed_values(t, out)),
            InodeTree::Tree(i) => i.proofs.iter().for_each(|(_, t)| inode(t, out)),
            InodeTree::Extender(e) => inode(&e.proof, out),
        }
    }
    match tree {
        Tree::Contents(value) => {
            out.insert(value.clone());
        }
        Tree::BlindedContents(_) | Tree::BlindedNode(_) => {}
        Tree::Node(entries) => entries.iter().for_each(|(_, t)| revealed_values(t, out)),
        Tree::Inode(i) => i.proofs.iter().for_each(|(_, t)| inode(t, out)),
        Tree::Extender(e) => inode(&e.proof, out),
    }
}

fn check_structure(proof: &StreamProof, context: &str) {
    for elt in &proof.elts {
        match elt {
            Elt::Contents(_) => {}
            Elt::Node(entries) => {
                assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "{context}: node entries sorted");
                assert!(entries.len() <= 256, "{context}: node of ≤ 256 entries");
            }
            Elt::Inode { length, proofs } => {
                assert!(!proofs.is_empty() && *length > 32, "{context}: inode shape");
                assert!(proofs.windows(2).all(|w| w[0].0 < w[1].0), "{context}: inode indices sorted");
                assert!(proofs.iter().all(|(i, _)| *i < 32), "{context}: inode indices < 32");
            }
            Elt::InodeExtender { segments, .. } => {
                assert!(segments.len() >= 2, "{context}: extender of ≥ 2 segments");
            }
        }
    }
}

#[test]
fn stream_proofs_verify_round_trip_and_agree_with_larch_core() {
    let (mut rng, seed) = seeded_rng("stream_proofs_verify_round_trip_and_agree_with_larch_core", 2026);
    let mut repo = MemoryRepo::new();
    for round in 0..30 {
        let context = format!("seed {seed} round {round}");
        let (tree, paths) = random_tree(&mut rng, &mut repo);
        let ops: Vec<Op> = (0..rng.random_range(1..25)).map(|_| random_op(&mut rng, &paths)).collect();
        let mut expected_tree = tree.clone();
        let expected: Vec<OpResult> = ops.iter().map(|op| apply_to_larch(&mut expected_tree, op)).collect();
        let produced =
            proof::produce_stream(&tree, &ops).unwrap_or_else(|e| panic!("{context}: {e}; {ops:?}"));
        assert_eq!(produced.results, expected, "{context}: results");
        assert_eq!(produced.proof.version, 1, "{context}: Octez's stream version");
        assert_eq!(produced.proof.before.hash.0, tree.hash().0, "{context}: before");
        assert_eq!(produced.proof.after.hash.0, expected_tree.hash().0, "{context}: after");
        check_structure(&produced.proof, &context);
        for bytes_and_back in [
            v1::decode(&v1::encode(&produced.proof).unwrap()).unwrap(),
            v2::decode(&v2::encode(&produced.proof).unwrap()).unwrap(),
        ] {
            assert_eq!(bytes_and_back, produced.proof, "{context}: encoding round trip");
            let verified = verify_stream(&bytes_and_back, &ops)
                .unwrap_or_else(|e| panic!("{context}: rejected: {e}; {ops:?}"));
            assert_eq!(verified.results, expected, "{context}: verified results");
        }
        // The values in the stream are those the tree proof reveals, each once.
        let tree_proof = proof::produce(&tree, &ops).unwrap();
        let mut in_tree_proof = BTreeSet::new();
        revealed_values(&tree_proof.proof.state, &mut in_tree_proof);
        let in_stream: Vec<&Vec<u8>> = produced
            .proof
            .elts
            .iter()
            .filter_map(|e| if let Elt::Contents(v) = e { Some(v) } else { None })
            .collect();
        let distinct: BTreeSet<Vec<u8>> = in_stream.iter().map(|v| (*v).clone()).collect();
        assert_eq!(distinct, in_tree_proof, "{context}: values read");
        assert_eq!(distinct.len(), in_stream.len(), "{context}: each value once");
        tamper(&produced.proof, &ops, &context, &mut rng);
    }
}

fn tamper(proof: &StreamProof, ops: &[Op], context: &str, rng: &mut larch_testkit::TestRng) {
    let n = proof.elts.len();
    // Too long: any extra element.
    let mut longer = proof.clone();
    longer.elts.push(Elt::Contents(b"extra".to_vec()));
    assert!(
        matches!(verify_stream(&longer, ops), Err(VerifyError::StreamTooLong { used, len }) if used == n && len == n + 1),
        "{context}: extra element"
    );
    if n == 0 {
        return;
    }
    // Too short: the last element dropped.
    let mut shorter = proof.clone();
    shorter.elts.pop();
    assert!(
        matches!(verify_stream(&shorter, ops), Err(VerifyError::StreamTooShort { .. })),
        "{context}: last dropped"
    );
    // Any element dropped, or altered, is rejected.
    for index in 0..n {
        let mut dropped = proof.clone();
        dropped.elts.remove(index);
        assert!(verify_stream(&dropped, ops).is_err(), "{context}: element {index} dropped");
        let mut altered = proof.clone();
        match &mut altered.elts[index] {
            Elt::Contents(v) => v.push(0),
            Elt::Node(entries) => entries.push((b"\xffzz".to_vec(), proof.before)),
            Elt::Inode { length, .. } | Elt::InodeExtender { length, .. } => *length += 1,
        }
        assert!(
            matches!(verify_stream(&altered, ops), Err(VerifyError::StreamMismatch { index: i, .. }) if i == index),
            "{context}: element {index} altered"
        );
    }
    if n >= 2 {
        let mut swapped = proof.clone();
        swapped.elts.swap(0, 1);
        assert!(verify_stream(&swapped, ops).is_err(), "{context}: elements 0 and 1 swapped");
    }
    let mut wrong_version = proof.clone();
    wrong_version.version = 0;
    assert_eq!(verify_stream(&wrong_version, ops), Err(VerifyError::UnsupportedVersion(0)));
    // Byte flips in either encoding never verify and never panic.
    type Codec = (
        fn(&StreamProof) -> Result<Vec<u8>, larch_proof::EncodeError>,
        fn(&[u8]) -> Result<StreamProof, larch_proof::DecodeError>,
    );
    let codecs: [Codec; 2] = [(v1::encode, v1::decode), (v2::encode, v2::decode)];
    for (encode, decode) in codecs {
        let bytes = encode(proof).unwrap();
        for _ in 0..40 {
            let mut bad = bytes.clone();
            let at = rng.random_range(0..bad.len());
            bad[at] ^= 1 << rng.random_range(0..8);
            if let Ok(decoded) = decode(&bad) {
                assert!(verify_stream(&decoded, ops).is_err(), "{context}: byte {at} flipped still verifies");
            }
        }
    }
}

#[test]
fn a_chain_of_single_pointer_inodes_is_an_extender() {
    // 300 names sharing their buckets at depths 0 and 1: `ext`'s root inode and the one below it
    // have a single pointer each.
    let names: Vec<String> = (0..)
        .map(|i| format!("x{i}"))
        .filter(|s| inode_index(0, s.as_bytes()) == 5 && inode_index(1, s.as_bytes()) == 7)
        .take(300)
        .collect();
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    for name in &names {
        tree.add(&["ext", name.as_str()], name.as_bytes().to_vec()).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    let tree = repo.checkout(&commit).unwrap();
    let ops = [Op::Find(vec![b"ext".to_vec(), names[42].as_bytes().to_vec()])];
    let produced = proof::produce_stream(&tree, &ops).unwrap();
    assert_eq!(produced.results, vec![OpResult::Value(Some(names[42].as_bytes().to_vec()))]);
    let extenders: Vec<&Elt> =
        produced.proof.elts.iter().filter(|e| matches!(e, Elt::InodeExtender { .. })).collect();
    assert!(
        matches!(extenders.as_slice(), [Elt::InodeExtender { length: 300, segments, .. }] if segments == &[5, 7]),
        "{:?}",
        produced.proof.elts
    );
    // Root node, extender, the inode it ends on, the leaf, the value.
    assert!(matches!(produced.proof.elts.first(), Some(Elt::Node(_))));
    assert!(matches!(produced.proof.elts.last(), Some(Elt::Contents(v)) if v == names[42].as_bytes()));
    let verified = verify_stream(&produced.proof, &ops).unwrap();
    assert_eq!(verified.results, produced.results);
    assert_eq!(verified.after.hash.0, tree.hash().0);
    // A second find in the same inode reuses what the stream gave; a longer stream for it.
    let ops2 = [ops[0].clone(), Op::Find(vec![b"ext".to_vec(), names[43].as_bytes().to_vec()])];
    let two = proof::produce_stream(&tree, &ops2).unwrap();
    assert!(two.proof.elts.starts_with(&produced.proof.elts[..2]));
    assert!(verify_stream(&two.proof, &ops2).is_ok());
    assert!(matches!(verify_stream(&produced.proof, &ops2), Err(VerifyError::StreamTooShort { .. })));
}
