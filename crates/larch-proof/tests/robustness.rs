//! Bad input never crashes the verifier: random corruption of the vectors' encodings, absurd
//! sizes, nesting beyond the limits and malformed proof trees all give typed errors. Random tests
//! replay with `LARCH_SEED=<seed> cargo test -p larch-proof --test robustness`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_proof::encoding::{v1, v2};
use larch_proof::model::MAX_NESTING;
use larch_proof::{
    DecodeError, Extender, Hash, Inode, InodeTree, Kind, KindedHash, Op, Proof, Tree, VerifyError, json,
    verify,
};
use larch_testkit::rand::Rng;
use larch_testkit::seeded_rng;
use serde_json::Value;

fn vector_encodings() -> Vec<(Vec<u8>, Vec<u8>, Vec<Op>)> {
    let vectors: Value = serde_json::from_str(include_str!("data/irmin-3.7.2-proofs.json")).unwrap();
    vectors["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let enc = &case["proof"]["octez_encodings"];
            let ops = match case["operation"]["kind"].as_str().unwrap() {
                "find" => case["operation"]["keys"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| {
                        Op::Find(
                            k.as_array()
                                .unwrap()
                                .iter()
                                .map(|s| s.as_str().unwrap().as_bytes().to_vec())
                                .collect(),
                        )
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (
                hex::decode(enc["v1_tree32_hex"].as_str().unwrap()).unwrap(),
                hex::decode(enc["v2_tree32_hex"].as_str().unwrap()).unwrap(),
                ops,
            )
        })
        .collect()
}

#[test]
fn random_corruption_is_an_error_or_a_rejection_never_a_panic() {
    let (mut rng, _) = seeded_rng("random_corruption_is_an_error_or_a_rejection_never_a_panic", 7);
    let mut undecodable = 0;
    let mut rejected = 0;
    for (v1_bytes, v2_bytes, ops) in vector_encodings() {
        for _ in 0..150 {
            for (is_v1, original) in [(true, &v1_bytes), (false, &v2_bytes)] {
                let mut bytes = original.clone();
                let flips = rng.random_range(1..4);
                for _ in 0..flips {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] ^= 1 << rng.random_range(0..8);
                }
                let decoded = if is_v1 { v1::decode(&bytes) } else { v2::decode(&bytes) };
                match decoded {
                    Err(_) => undecodable += 1,
                    Ok(proof) => {
                        // A flip in the version field is not hashed (spec §7.8): that proof is the
                        // original one. Any other change must be rejected for the original ops.
                        let original =
                            if is_v1 { v1::decode(original) } else { v2::decode(original) }.unwrap();
                        let mut same = proof.clone();
                        same.version = original.version;
                        if same != original && !ops.is_empty() {
                            assert!(verify(&proof, &ops).is_err(), "a corrupted proof verified");
                            rejected += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(undecodable > 100 && rejected > 100, "undecodable {undecodable}, rejected {rejected}");
}

#[test]
fn absurd_sizes_are_truncation_errors_without_allocating() {
    // V1: a Value claiming 2^30 - 1 bytes; a node list claiming 2^30 - 1 bytes; a size above Uint30.
    let head = |tag: u8| {
        let mut b = vec![0, 0, 1];
        b.extend([7u8; 32]);
        b.push(1);
        b.extend([7u8; 32]);
        b.push(tag);
        b
    };
    let mut value = head(0);
    value.extend([0x3f, 0xff, 0xff, 0xff, 1, 2, 3]);
    assert!(matches!(v1::decode(&value), Err(DecodeError::Truncated { .. })));
    let mut list = head(2);
    list.extend([0x3f, 0xff, 0xff, 0xff]);
    assert!(matches!(v1::decode(&list), Err(DecodeError::Truncated { .. })));
    let mut over = head(2);
    over.extend([0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(v1::decode(&over), Err(DecodeError::Invalid { .. })));
    // V1: a negative inode length.
    let mut negative = head(4);
    negative.extend((-5i64).to_be_bytes());
    negative.extend([0, 0, 0, 0, 0]);
    assert!(matches!(v1::decode(&negative), Err(DecodeError::Invalid { what: "negative length", .. })));
    // V2: a long node list claiming 2^30 - 1 bytes.
    let mut v2_list = vec![3, 0, 0];
    v2_list.extend([7u8; 64]);
    v2_list.extend([0xbf, 0x3f, 0xff, 0xff, 0xff]);
    assert!(matches!(v2::decode(&v2_list), Err(DecodeError::Truncated { .. })));
    // V2: bad tags.
    for tag in [0x44u8, 0x7f, 0xc2, 0xc4, 0xd4, 0xdc, 0xe0, 0xff] {
        let mut bad = vec![3, 0, 0];
        bad.extend([7u8; 64]);
        bad.push(tag);
        bad.extend([0u8; 40]);
        assert!(v2::decode(&bad).is_err(), "tag {tag:#x}");
    }
}

#[test]
fn nesting_beyond_the_limit_is_an_error_not_a_stack_overflow() {
    // 100 000 nested one-entry Nodes in V2: 0x81, step "a", …
    let mut bytes = vec![3, 0, 0];
    bytes.extend([7u8; 64]);
    for _ in 0..100_000 {
        bytes.extend([0x81, 1, b'a']);
    }
    bytes.extend([0xc0, 0]);
    assert!(matches!(v2::decode(&bytes), Err(DecodeError::TooDeep { .. })));
    // The same in V1 (each level: 02, u32 size, step).
    let mut inner = vec![0u8, 0, 0, 0, 0];
    for _ in 0..10_000 {
        let mut level = vec![2u8];
        level.extend(((inner.len() + 2) as u32).to_be_bytes());
        level.extend([1, b'a']);
        level.extend(inner);
        inner = level;
    }
    let mut v1_bytes = vec![0, 0, 1];
    v1_bytes.extend([7u8; 32]);
    v1_bytes.push(1);
    v1_bytes.extend([7u8; 32]);
    v1_bytes.extend(inner);
    assert!(matches!(v1::decode(&v1_bytes), Err(DecodeError::TooDeep { .. })));
    // A proof tree built in memory beyond the limit is rejected by the verifier too.
    let mut tree = Tree::Contents(b"v".to_vec());
    for _ in 0..MAX_NESTING + 5 {
        tree = Tree::Node(vec![(b"a".to_vec(), tree)]);
    }
    let proof = Proof {
        version: 0,
        before: KindedHash { kind: Kind::Node, hash: Hash::default() },
        after: KindedHash { kind: Kind::Node, hash: Hash::default() },
        state: tree,
    };
    assert!(matches!(verify(&proof, &[]), Err(VerifyError::TooDeep { .. })));
    // A path longer than the limit is an error.
    let small = Proof { state: Tree::Node(Vec::new()), ..proof };
    let mut small = small;
    small.before.hash = larch_proof::hash::empty_node_hash();
    small.after = small.before;
    assert!(verify(&small, &[]).is_ok());
    assert!(matches!(
        verify(&small, &[Op::Find(vec![b"a".to_vec(); 1000])]),
        Err(VerifyError::TooDeep { .. })
    ));
}

fn proof_of(state: Tree) -> Proof {
    let key = KindedHash { kind: Kind::Node, hash: Hash::default() };
    Proof { version: 0, before: key, after: key, state }
}

#[test]
fn malformed_proof_trees_are_rejected_with_typed_errors() {
    let leaf = |n: usize| {
        InodeTree::Values(
            (0..n).map(|i| (format!("k{i:03}").into_bytes(), Tree::BlindedContents(Hash([1; 32])))).collect(),
        )
    };
    let blinded = InodeTree::Blinded(Hash([2; 32]));
    let cases: Vec<(&str, Tree)> = vec![
        ("inode without pointers", Tree::Inode(Inode { length: 300, proofs: vec![] })),
        ("index out of range", Tree::Inode(Inode { length: 300, proofs: vec![(32, blinded.clone())] })),
        (
            "indices not increasing",
            Tree::Inode(Inode { length: 300, proofs: vec![(3, blinded.clone()), (3, blinded.clone())] }),
        ),
        (
            "empty values",
            Tree::Inode(Inode { length: 300, proofs: vec![(1, leaf(0)), (2, blinded.clone())] }),
        ),
        ("33 values", Tree::Inode(Inode { length: 300, proofs: vec![(1, leaf(33)), (2, blinded.clone())] })),
        (
            "length below the revealed entries",
            Tree::Inode(Inode { length: 3, proofs: vec![(1, leaf(5)), (2, blinded.clone())] }),
        ),
        ("exact length mismatch", Tree::Inode(Inode { length: 300, proofs: vec![(1, leaf(5))] })),
        (
            "unsorted values",
            Tree::Inode(Inode {
                length: 300,
                proofs: vec![
                    (
                        1,
                        InodeTree::Values(vec![
                            (b"b".to_vec(), Tree::Contents(vec![])),
                            (b"a".to_vec(), Tree::Contents(vec![])),
                        ]),
                    ),
                    (2, blinded.clone()),
                ],
            }),
        ),
        (
            "extender segment out of range",
            Tree::Extender(Extender { length: 300, segments: vec![40, 1], proof: Box::new(blinded.clone()) }),
        ),
        (
            "values at depth 0",
            Tree::Extender(Extender { length: 3, segments: vec![], proof: Box::new(leaf(3)) }),
        ),
    ];
    for (what, state) in cases {
        let outcome = verify(&proof_of(state), &[]);
        assert!(matches!(outcome, Err(VerifyError::Malformed(_))), "{what}: {outcome:?}");
    }
    // A flat-hashed inode (length ≤ 256) with a blinded bucket needs it to hash: rejected.
    let small_inode = Tree::Inode(Inode { length: 40, proofs: vec![(1, leaf(5)), (2, blinded)] });
    assert!(matches!(verify(&proof_of(small_inode), &[]), Err(VerifyError::Blinded { what: "inode", .. })));
    // Kinds are hashed: a contents hash presented as a node is a before mismatch.
    let text = include_str!("data/small_find_one.json");
    let mut proof = json::read(text).unwrap();
    assert!(verify(&proof, &[]).is_ok());
    // Versions other than 0 (stream proofs, binary-tree contexts) are refused, as Octez does.
    for version in [1, 2, 3, -1] {
        let other = Proof { version, ..proof.clone() };
        assert_eq!(verify(&other, &[]), Err(VerifyError::UnsupportedVersion(version)));
    }
    proof.before.kind = Kind::Contents;
    assert!(matches!(verify(&proof, &[]), Err(VerifyError::BeforeMismatch { .. })));
}

#[test]
fn the_verifier_crate_is_no_std() {
    let lib = include_str!("../src/lib.rs");
    assert!(lib.lines().any(|line| line.trim() == "#![no_std]"), "src/lib.rs must be #![no_std]");
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    let required: Vec<&str> =
        deps.lines().filter(|l| !l.trim().is_empty() && !l.contains("optional = true")).collect();
    assert_eq!(
        required,
        ["blake2b_simd.workspace = true", "larch-varint.workspace = true"],
        "only hashing (and the workspace's dependency-free LEB128) is required"
    );
    let workspace = include_str!("../../../Cargo.toml");
    assert!(workspace.contains("blake2b_simd = { version = \"1\", default-features = false }"));
    let varint = include_str!("../../larch-varint/src/lib.rs");
    assert!(varint.lines().any(|line| line.trim() == "#![no_std]"), "larch-varint must be #![no_std]");
    let varint_manifest = include_str!("../../larch-varint/Cargo.toml");
    let varint_deps = varint_manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    assert!(varint_deps.trim().is_empty(), "larch-varint has no dependencies");
}

/// A directory root in inode form with ≤ 256 entries is hashed flat, so the buckets its entries sit
/// in are not authenticated: a prover must not be able to hide an entry by misplacing it.
#[test]
fn a_misplaced_entry_of_a_small_inode_directory_cannot_fake_an_absence() {
    use larch_proof::hash::{contents_hash, flat_node_hash, inode_index};
    let names: Vec<Vec<u8>> = (0..40).map(|i| format!("n{i}").into_bytes()).collect();
    let mut sorted: Vec<(&[u8], Kind, Hash)> =
        names.iter().map(|n| (n.as_slice(), Kind::Contents, contents_hash(n))).collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let root = flat_node_hash(sorted.len(), sorted.iter().copied());
    // Put every entry in bucket 0 (Values of ≤ 32) and bucket 1: wrong buckets for most names.
    let leaf = |part: &[(&[u8], Kind, Hash)]| {
        InodeTree::Values(part.iter().map(|(n, _, h)| (n.to_vec(), Tree::BlindedContents(*h))).collect())
    };
    let state =
        Tree::Inode(Inode { length: 40, proofs: vec![(0, leaf(&sorted[..20])), (1, leaf(&sorted[20..]))] });
    let key = KindedHash { kind: Kind::Node, hash: root };
    let proof = Proof { version: 0, before: key, after: key, state };
    let target = sorted.iter().find(|(n, _, _)| inode_index(0, n) > 1).unwrap().0.to_vec();
    // The hash matches (flat), and the lookup finds the entry wherever it was put.
    let verified = verify(&proof, &[Op::MemTree(vec![target])]).unwrap();
    assert_eq!(verified.results, vec![larch_proof::OpResult::Bool(true)]);
}

/// The repr JSON is bounded both ways by `json::MAX_JSON_DEPTH`: the deepest proof `write` takes
/// reads back, one level more is a typed error, and far deeper proofs (in memory or as text) are
/// the same error, never a stack overflow.
#[test]
fn json_nesting_is_bounded_both_ways() {
    use larch_proof::json::{JsonError, MAX_JSON_DEPTH};
    let key = KindedHash { kind: Kind::Node, hash: Hash::default() };
    let proof = |state| Proof { version: 0, before: key, after: key, state };
    let too_deep = |err: Option<JsonError>| matches!(err, Some(JsonError::TooDeep { limit: MAX_JSON_DEPTH }));
    // The limit is serde_json's own: it parses 127 nested arrays, not 128.
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH)).is_ok());
    assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH + 1)).is_err());

    let directories = |n: usize| {
        let mut tree = Tree::Contents(vec![0xff, 0xfe]); // not UTF-8: `{"base64": …}`, one more level
        for _ in 0..n {
            tree = Tree::Node(vec![(b"d".to_vec(), tree)]);
        }
        tree
    };
    let inodes = |n: usize| {
        let mut inode = InodeTree::Blinded(Hash::default());
        for i in 0..n {
            inode = if i % 2 == 0 {
                InodeTree::Tree(Inode { length: 300, proofs: vec![(3, inode)] })
            } else {
                InodeTree::Extender(Extender { length: 300, segments: vec![1, 2], proof: Box::new(inode) })
            };
        }
        Tree::Inode(Inode { length: 300, proofs: vec![(0, inode)] })
    };
    for (what, shape) in [("directories", &directories as &dyn Fn(usize) -> Tree), ("inodes", &inodes)] {
        let deepest = (0..200).take_while(|n| json::write(&proof(shape(*n))).is_ok()).last().unwrap();
        assert!(deepest > 25, "{what}: {deepest}");
        let text = json::write(&proof(shape(deepest))).unwrap();
        assert_eq!(json::read(&text).unwrap(), proof(shape(deepest)), "{what}: read back at the limit");
        assert!(too_deep(json::write(&proof(shape(deepest + 1))).err()), "{what}");
        assert!(too_deep(json::write(&proof(shape(1_000))).err()), "{what}");
    }
    // 3 levels a directory, 4 for the proof object and the value: 41 directories fit in 127.
    assert!(json::write(&proof(Tree::Node(vec![(b"v".to_vec(), directories(40))]))).is_ok());

    // Text deeper than the limit is the same error when read, however deep.
    let text = |n: usize| {
        let hash = json::hash_to_b58(&Hash::default());
        format!(
            "{{\"before\":{{\"Node\":\"{hash}\"}},\"after\":{{\"Node\":\"{hash}\"}},\"state\":{}{{\"Contents\":[\"v\",{{}}]}}{}}}",
            "{\"Node\":[[\"d\",".repeat(n),
            "]]}".repeat(n)
        )
    };
    assert!(json::read(&text(41)).is_ok());
    assert!(too_deep(json::read(&text(42)).err()));
    assert!(too_deep(json::read(&text(100_000)).err()));
}
