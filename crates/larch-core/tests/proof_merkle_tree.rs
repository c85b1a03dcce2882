//! `larch_core::proof::merkle_tree_v2` (Octez's `Context.merkle_tree_v2`): what each leaf kind
//! reveals, checked by walking the proof tree against the larch tree it was produced from (a code
//! path of its own: no replay of operations), and that every proof verifies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::proof::{LeafKind, merkle_tree_v2};
use larch_core::{CommitInfo, MemoryRepo, Tree};
use larch_proof::{InodeTree, Kind, KindedHash, Op, OpResult, Tree as PTree};

/// A committed tree: `data/{a/{v, w, sub/x}, big/<300 entries>, mid/<100 entries>, leaf}` and a
/// sibling `other/z` of `data`.
fn sample() -> Tree {
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "a", "v"], b"v-value".to_vec()).unwrap();
    tree.add(&["data", "a", "w"], b"w-value".to_vec()).unwrap();
    tree.add(&["data", "a", "sub", "x"], b"x-value".to_vec()).unwrap();
    for i in 0..300 {
        tree.add(&["data".to_string(), "big".to_string(), format!("k{i}")], format!("b{i}").into_bytes())
            .unwrap();
    }
    for i in 0..100 {
        tree.add(&["data".to_string(), "mid".to_string(), format!("m{i}")], format!("m{i}").into_bytes())
            .unwrap();
    }
    tree.add(&["data", "leaf"], b"leaf-value".to_vec()).unwrap();
    tree.add(&["other", "z"], b"z-value".to_vec()).unwrap();
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    repo.checkout(&commit).unwrap()
}

/// The entry `step` of a revealed directory of the proof (a `Node`, or an `Inode` trie).
fn entry<'a>(dir: &'a PTree, step: &[u8]) -> Option<&'a PTree> {
    fn in_inode<'a>(inode: &'a InodeTree, step: &[u8]) -> Option<&'a PTree> {
        match inode {
            InodeTree::Values(entries) => entries.iter().find(|(name, _)| name == step).map(|(_, t)| t),
            InodeTree::Tree(inode) => inode.proofs.iter().find_map(|(_, child)| in_inode(child, step)),
            InodeTree::Extender(ext) => in_inode(&ext.proof, step),
            InodeTree::Blinded(_) => None,
        }
    }
    match dir {
        PTree::Node(entries) => entries.iter().find(|(name, _)| name == step).map(|(_, t)| t),
        PTree::Inode(inode) => inode.proofs.iter().find_map(|(_, child)| in_inode(child, step)),
        PTree::Extender(ext) => in_inode(&ext.proof, step),
        _ => None,
    }
}

/// Checks that `proof` holds the whole subtree `tree` (every entry revealed, every value equal).
fn assert_full(proof: &PTree, tree: &Tree, at: &str) {
    let listing = tree.list_sorted::<&[u8]>(&[], 0, None).unwrap();
    assert!(!matches!(proof, PTree::BlindedNode(_)), "{at}: blinded");
    for (name, child) in listing {
        let sub = entry(proof, &name).unwrap_or_else(|| panic!("{at}/{name:?}: missing"));
        match child.kind() {
            larch_core::Kind::Contents => {
                let value = tree.find(&[&name[..]]).unwrap().unwrap();
                assert_eq!(sub, &PTree::Contents(value.as_bytes().to_vec()), "{at}/{name:?}");
            }
            larch_core::Kind::Node => assert_full(sub, &child, &format!("{at}/{name:?}")),
        }
    }
}

fn root_hash(tree: &Tree) -> KindedHash {
    KindedHash { kind: Kind::Node, hash: larch_proof::Hash(*tree.hash().as_bytes()) }
}

#[test]
fn hole_reveals_nothing() {
    let tree = sample();
    let proof = merkle_tree_v2(&tree, LeafKind::Hole, &["a"]).unwrap();
    assert_eq!(proof.version, 0);
    assert_eq!(proof.before, root_hash(&tree));
    assert_eq!(proof.after, root_hash(&tree));
    assert_eq!(proof.state, PTree::BlindedNode(root_hash(&tree).hash));
    // It verifies for a computation that reads nothing, and for nothing else.
    assert!(larch_proof::verify(&proof, &[]).is_ok());
    assert!(larch_proof::verify(&proof, &[Op::Find(vec![b"data".to_vec()])]).is_err());
}

#[test]
fn raw_context_reveals_the_whole_directory_at_data_key() {
    let tree = sample();
    for key in [&["a"][..], &["big"], &["mid"], &[]] {
        let proof = merkle_tree_v2(&tree, LeafKind::RawContext, key).unwrap();
        assert_eq!((proof.before, proof.after), (root_hash(&tree), root_hash(&tree)));
        let data = entry(&proof.state, b"data").expect("data revealed");
        let mut at = data;
        for step in key {
            at = entry(at, step.as_bytes()).unwrap_or_else(|| panic!("{key:?}: {step} revealed"));
        }
        let mut path = vec!["data"];
        path.extend_from_slice(key);
        let sub = tree.find_tree(&path).unwrap().unwrap();
        assert_full(at, &sub, &format!("{key:?}"));
        // The sibling of `data` stays blinded.
        assert!(matches!(entry(&proof.state, b"other"), Some(PTree::BlindedNode(_))), "{key:?}");
        // Every value below verifies through the proof.
        let finds: Vec<Op> = ["v", "w"]
            .iter()
            .filter(|_| key == ["a"])
            .map(|name| Op::Find(vec![b"data".to_vec(), b"a".to_vec(), name.as_bytes().to_vec()]))
            .collect();
        let verified = larch_proof::verify(&proof, &finds).unwrap();
        assert!(verified.results.iter().all(|r| matches!(r, OpResult::Value(Some(_)))), "{key:?}");
    }
    // `mid` and `big`'s siblings are blinded in a proof of `a`.
    let proof = merkle_tree_v2(&tree, LeafKind::RawContext, &["a"]).unwrap();
    let data = entry(&proof.state, b"data").unwrap();
    assert!(matches!(entry(data, b"big"), Some(PTree::BlindedNode(_))));
    assert!(matches!(entry(data, b"leaf"), Some(PTree::BlindedContents(_))));
}

#[test]
fn raw_context_of_a_value_or_a_missing_key() {
    let tree = sample();
    // A value: the proof of `find data/leaf`, nothing more.
    let proof = merkle_tree_v2(&tree, LeafKind::RawContext, &["leaf"]).unwrap();
    let expected =
        larch_core::proof::produce(&tree, &[Op::Find(vec![b"data".to_vec(), b"leaf".to_vec()])]).unwrap();
    assert_eq!(proof, expected.proof);
    let data = entry(&proof.state, b"data").unwrap();
    assert_eq!(entry(data, b"leaf"), Some(&PTree::Contents(b"leaf-value".to_vec())));
    assert!(matches!(entry(data, b"a"), Some(PTree::BlindedNode(_))));
    // Missing, and through a value: the path is revealed as far as it goes, no value is read.
    for key in [&["nope"][..], &["leaf", "below"], &["a", "v", "below"]] {
        let proof = merkle_tree_v2(&tree, LeafKind::RawContext, key).unwrap();
        assert_eq!(proof.state.stats().contents, 0, "{key:?}");
        let mut path = vec![b"data".to_vec()];
        path.extend(key.iter().map(|s| s.as_bytes().to_vec()));
        let verified = larch_proof::verify(&proof, &[Op::Find(path)]).unwrap();
        assert_eq!(verified.results, vec![OpResult::Value(None)], "{key:?}");
    }
}

#[test]
fn raw_context_through_encodings() {
    let tree = sample();
    let proof = merkle_tree_v2(&tree, LeafKind::RawContext, &["big"]).unwrap();
    for bytes in [
        larch_proof::encoding::v1::encode(&proof).unwrap(),
        larch_proof::encoding::v2::encode(&proof).unwrap(),
    ] {
        let decoded = larch_proof::encoding::v2::decode(&bytes)
            .or_else(|_| larch_proof::encoding::v1::decode(&bytes))
            .unwrap();
        assert_eq!(decoded, proof);
    }
    // 300 values revealed, no blinded inode under data/big.
    assert_eq!(proof.state.stats().contents, 300);
}
