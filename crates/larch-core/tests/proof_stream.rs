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

/// The stream Irmin produces for a read in a directory of 33 to 256 entries, built here from the
/// spec with larch-core's own hashing (`schema`, `ocaml_hash`: another code path than
/// larch-proof's): irmin-pack keeps such a directory as an inode trie, and reading it whole (to
/// send all its entries in one `Node` element) reads its inner inodes, which follow that element
/// depth first, buckets by increasing index (`Inode` for an inner tree, `Node` for a leaf).
fn expected_trie(
    depth: u8,
    entries: &[(Vec<u8>, larch_proof::KindedHash)],
    out: &mut Vec<Elt>,
) -> larch_core::Hash {
    use larch_core::schema::{tree_inode_hash, values_inode_hash};
    let core = |kind: larch_proof::Kind| match kind {
        larch_proof::Kind::Contents => larch_core::Kind::Contents,
        larch_proof::Kind::Node => larch_core::Kind::Node,
    };
    if depth > 0 && entries.len() <= 32 {
        out.push(Elt::Node(entries.to_vec()));
        let refs = entries.iter().map(|(n, kh)| (n.as_slice(), core(kh.kind), larch_core::Hash(kh.hash.0)));
        return values_inode_hash(entries.len(), refs);
    }
    let at = out.len();
    if depth > 0 {
        out.push(Elt::Contents(Vec::new())); // replaced below, once the pointers are known
    }
    let mut buckets: Vec<Vec<(Vec<u8>, larch_proof::KindedHash)>> = vec![Vec::new(); 32];
    for entry in entries {
        buckets[usize::from(inode_index(depth, &entry.0))].push(entry.clone());
    }
    let mut proofs = Vec::new();
    for (index, bucket) in buckets.iter().enumerate() {
        if !bucket.is_empty() {
            proofs.push((index as u8, expected_trie(depth + 1, bucket, out)));
        }
    }
    let hash = tree_inode_hash(depth, entries.len() as u64, proofs.len(), proofs.iter().copied());
    if depth > 0 {
        out[at] = Elt::Inode {
            length: entries.len() as u64,
            proofs: proofs.iter().map(|(i, h)| (*i, larch_proof::Hash(h.0))).collect(),
        };
    }
    hash
}

#[test]
fn a_directory_of_33_to_256_entries_streams_its_inner_inodes_as_irmin_does() {
    use larch_proof::{Kind, KindedHash};
    for n in [33usize, 40, 100, 200, 256] {
        let mut repo = MemoryRepo::new();
        let mut tree = repo.empty_tree();
        for i in 0..n {
            tree.add(&["dir".to_string(), format!("k{i}")], format!("v{i}").into_bytes()).unwrap();
        }
        tree.add(&["x"], b"beside".to_vec()).unwrap();
        let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
        let tree = repo.checkout(&commit).unwrap();
        let ops = [Op::Find(vec![b"dir".to_vec(), b"k7".to_vec()])];
        let produced = proof::produce_stream(&tree, &ops).unwrap();
        // The independent expectation: root, the directory in full, its trie, the value.
        let kh = |t: &larch_core::Tree| KindedHash {
            kind: match t.kind() {
                larch_core::Kind::Contents => Kind::Contents,
                larch_core::Kind::Node => Kind::Node,
            },
            hash: larch_proof::Hash(t.hash().0),
        };
        let listing = |path: &[&str]| -> Vec<(Vec<u8>, KindedHash)> {
            tree.list_sorted(path, 0, None).unwrap().iter().map(|(name, t)| (name.to_vec(), kh(t))).collect()
        };
        let dir_entries = listing(&["dir"]);
        assert_eq!(dir_entries.len(), n);
        let mut expected = vec![Elt::Node(listing(&[])), Elt::Node(dir_entries.clone())];
        let root_hash = expected_trie(0, &dir_entries, &mut expected);
        assert_ne!(
            root_hash.0,
            tree.find_tree(&["dir"]).unwrap().unwrap().hash().0,
            "{n}: a stable directory hashes flat"
        );
        expected.push(Elt::Contents(b"v7".to_vec()));
        assert_eq!(produced.proof.elts, expected, "{n} entries");
        assert!(expected.len() > 4, "{n}: the trie has inner inodes");
        // larch verifies it (it reads the trie back after the directory), and refuses it
        // without its inner inodes, or with them in another order.
        let verified = verify_stream(&produced.proof, &ops).unwrap();
        assert_eq!(verified.results, vec![OpResult::Value(Some(b"v7".to_vec()))]);
        let mut short = produced.proof.clone();
        short.elts.drain(2..expected.len() - 1);
        assert!(verify_stream(&short, &ops).is_err(), "{n}: without the trie");
        let mut swapped = produced.proof.clone();
        swapped.elts.swap(2, 3);
        assert!(verify_stream(&swapped, &ops).is_err(), "{n}: trie reordered");
        // Encodings and JSON carry it.
        assert_eq!(v2::decode(&v2::encode(&produced.proof).unwrap()).unwrap(), produced.proof);
        let json = larch_proof::json::write_stream(&produced.proof).unwrap();
        assert_eq!(larch_proof::json::read_stream(&json).unwrap(), produced.proof);
    }
    // At most 32 entries: one leaf, no trie.
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    for i in 0..32 {
        tree.add(&["dir".to_string(), format!("k{i}")], b"v".to_vec()).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    let tree = repo.checkout(&commit).unwrap();
    let ops = [Op::Find(vec![b"dir".to_vec(), b"k7".to_vec()])];
    let produced = proof::produce_stream(&tree, &ops).unwrap();
    assert_eq!(produced.proof.elts.len(), 3, "root, dir, value");
}
