//! Seeded random cross-checks of proofs against larch-core's own tree (replay a failure with
//! `LARCH_SEED=<seed> cargo test -p larch-core --test proof_random`):
//! - larch-proof's copy of the hashing rules agrees with larch-core's `schema` and `ocaml_hash`;
//! - on random trees (flat, inode tries, directories around 256 entries) and random operation
//!   sequences, the produced proof verifies, its results are larch-core's, its before/after hashes
//!   are larch-core's tree hashes before/after the same operations, and it survives V1, V2 and
//!   repr JSON round trips.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod proof_helpers;

use larch_core::ocaml_hash::{inode_index, ocaml_seeded_hash};
use larch_core::{Kind, MemoryRepo, Tree, proof, schema};
use larch_proof::encoding::{v1, v2};
use larch_proof::{Op, OpResult, json, verify};
use larch_testkit::rand::Rng;
use larch_testkit::seeded_rng;
use proof_helpers::{apply_to_larch, random_bytes, random_op, random_tree};

#[test]
fn proof_hashing_agrees_with_larch_core() {
    let (mut rng, _) = seeded_rng("proof_hashing_agrees_with_larch_core", 14);
    for _ in 0..500 {
        let name = random_bytes(&mut rng, 40);
        let seed = rng.random_range(0..12u32);
        assert_eq!(larch_proof::hash::ocaml_seeded_hash(seed, &name), ocaml_seeded_hash(seed, &name));
        assert_eq!(larch_proof::hash::inode_index(seed as u8, &name), inode_index(seed as u8, &name));
        let value = random_bytes(&mut rng, 300);
        assert_eq!(larch_proof::hash::contents_hash(&value).0, schema::contents_hash(&value).0);
        let mut entries: Vec<(Vec<u8>, Kind, [u8; 32])> = (0..rng.random_range(0..40))
            .map(|_| (random_bytes(&mut rng, 12), Kind::Node, rng.random()))
            .collect();
        for entry in &mut entries {
            if rng.random_bool(0.5) {
                entry.1 = Kind::Contents;
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        let core = entries.iter().map(|(n, k, h)| (n.as_slice(), *k, larch_core::Hash(*h)));
        let kind =
            |k: Kind| if k == Kind::Node { larch_proof::Kind::Node } else { larch_proof::Kind::Contents };
        let ours = || entries.iter().map(|(n, k, h)| (n.as_slice(), kind(*k), larch_proof::Hash(*h)));
        assert_eq!(
            schema::flat_node_hash(entries.len(), core.clone()).0,
            larch_proof::hash::flat_node_hash(entries.len(), ours()).0
        );
        assert_eq!(
            schema::values_inode_hash(entries.len(), core).0,
            larch_proof::hash::values_inode_hash(entries.len(), ours()).0
        );
        let pointers: Vec<(u8, [u8; 32])> =
            (0..rng.random_range(1..32u8)).map(|i| (i, rng.random())).collect();
        let (depth, length) = (rng.random_range(0..10u8), rng.random_range(0..100_000u64));
        assert_eq!(
            schema::tree_inode_hash(
                depth,
                length,
                pointers.len(),
                pointers.iter().map(|(i, h)| (*i, larch_core::Hash(*h)))
            )
            .0,
            larch_proof::hash::tree_inode_hash(
                depth,
                length,
                pointers.len(),
                pointers.iter().map(|(i, h)| (*i, larch_proof::Hash(*h)))
            )
            .0
        );
    }
}

/// Directory names and sizes that exercise flat nodes, inode tries and the 256/257 boundary.
#[test]
fn produced_proofs_verify_and_agree_with_larch_core() {
    let (mut rng, _) = seeded_rng("produced_proofs_verify_and_agree_with_larch_core", 2026);
    let mut repo = MemoryRepo::new();
    for round in 0..40 {
        let (tree, paths) = random_tree(&mut rng, &mut repo);
        let ops: Vec<Op> = (0..rng.random_range(1..25)).map(|_| random_op(&mut rng, &paths)).collect();
        let mut expected_tree = tree.clone();
        let expected: Vec<OpResult> = ops.iter().map(|op| apply_to_larch(&mut expected_tree, op)).collect();
        let produced =
            proof::produce(&tree, &ops).unwrap_or_else(|e| panic!("round {round}: {e}; ops {ops:?}"));
        assert_eq!(produced.results, expected, "round {round}: results; ops {ops:?}");
        assert_eq!(produced.proof.before.hash.0, tree.hash().0, "round {round}");
        assert_eq!(produced.proof.after.hash.0, expected_tree.hash().0, "round {round}: after; ops {ops:?}");
        let verified = verify(&produced.proof, &ops)
            .unwrap_or_else(|e| panic!("round {round}: rejected: {e}; ops {ops:?}"));
        assert_eq!(verified.results, expected, "round {round}");
        let v1_bytes = v1::encode(&produced.proof).unwrap();
        assert_eq!(v1::decode(&v1_bytes).unwrap(), produced.proof);
        let v2_bytes = v2::encode(&produced.proof).unwrap();
        assert_eq!(v2::decode(&v2_bytes).unwrap(), produced.proof);
        assert_eq!(json::read(&json::write(&produced.proof).unwrap()).unwrap(), produced.proof);
        // A proof of fewer operations must not verify the whole sequence unless it reads nothing more.
        if ops.len() > 1 {
            let short = proof::produce(&tree, &ops[..1]).unwrap();
            if short.proof.state != produced.proof.state {
                assert!(verify(&short.proof, &ops).is_err(), "round {round}: a smaller proof verified more");
            }
        }
    }
}

#[test]
fn proofs_of_uncommitted_in_memory_trees_and_of_contents_roots() {
    let mut tree = Tree::empty();
    for i in 0..300 {
        tree.add(&["dir".to_string(), format!("k{i}")], format!("v{i}").into_bytes()).unwrap();
    }
    tree.add(&["file"], b"top".to_vec()).unwrap();
    let ops = vec![
        Op::Find(vec![b"dir".to_vec(), b"k7".to_vec()]),
        Op::Remove(vec![b"dir".to_vec(), b"k8".to_vec()]),
        Op::Add(vec![b"file".to_vec(), b"now-a-dir".to_vec()], b"x".to_vec()),
    ];
    let produced = proof::produce(&tree, &ops).unwrap();
    let verified = verify(&produced.proof, &ops).unwrap();
    assert_eq!(verified.results[0], OpResult::Value(Some(b"v7".to_vec())));
    let mut expected = tree.clone();
    expected.remove(&["dir", "k8"]).unwrap();
    expected.add(&["file", "now-a-dir"], b"x".to_vec()).unwrap();
    assert_eq!(verified.after.hash.0, expected.hash().0);
    // The value `file` was replaced without being read: it stays blinded.
    assert_eq!(produced.proof.state.stats().contents, 1);

    let contents = Tree::of_contents(b"just a value".to_vec());
    let produced = proof::produce(&contents, &[Op::Find(Vec::new())]).unwrap();
    assert_eq!(produced.proof.state, larch_proof::Tree::Contents(b"just a value".to_vec()));
    let verified = verify(&produced.proof, &[Op::Find(Vec::new())]).unwrap();
    assert_eq!(verified.results, vec![OpResult::Value(Some(b"just a value".to_vec()))]);
}
