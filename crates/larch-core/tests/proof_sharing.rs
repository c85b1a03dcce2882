//! Objects met twice in a proof, against sequences built here from the spec and Irmin 3.7.2's
//! rules, not by larch's producer:
//! - stream proofs: Irmin's stream environment (`Proof.Env`, `Stream.produce.set`, one set of
//!   hashes for values, directories and inodes; `add_contents_from_store`, `add_node_from_store`,
//!   `add_recnode_from_store`) sends an object the first time its **hash** is read, never again:
//!   not a value held under two keys, not a directory met at two paths, not an inode leaf met at
//!   two inode depths (a `Values` hash does not include its depth);
//! - tree proofs: Irmin's `produce_proof` imports the tree lazily (`import_with_env` →
//!   `Node.of_key`), so a computation that reads nothing gives the blinded root.
//!
//! The expected hashes come from larch-core's `schema` and `ocaml_hash` (another code path than
//! larch-proof's hashing), and the test's own inode partition (spec §4.2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::ocaml_hash::inode_index;
use larch_core::schema::{contents_hash, flat_node_hash, tree_inode_hash, values_inode_hash};
use larch_core::{CommitInfo, MemoryRepo, Tree, proof};
use larch_proof::{Elt, Hash, Kind, KindedHash, Op, OpResult, VerifyError, verify_stream};

type Entries = Vec<(Vec<u8>, KindedHash)>;

fn core_kind(kind: Kind) -> larch_core::Kind {
    match kind {
        Kind::Contents => larch_core::Kind::Contents,
        Kind::Node => larch_core::Kind::Node,
    }
}

fn value_entry(name: &[u8], value: &[u8]) -> (Vec<u8>, KindedHash) {
    (name.to_vec(), KindedHash { kind: Kind::Contents, hash: Hash(contents_hash(value).0) })
}

/// The entries of `entries` (sorted by name) that fall in bucket `index` at `depth`.
fn bucket(entries: &[(Vec<u8>, KindedHash)], depth: u8, index: u8) -> Entries {
    entries.iter().filter(|(name, _)| inode_index(depth, name) == index).cloned().collect()
}

/// The hash and the stream element of the inode at `depth` holding `entries` (spec §4.2): a
/// `Values` leaf (`Node` element) of ≤ 32 entries below depth 0, else a `Tree` (`Inode`
/// element) with one pointer per non-empty bucket.
fn inode(depth: u8, entries: &[(Vec<u8>, KindedHash)]) -> (Hash, Elt) {
    let refs =
        || entries.iter().map(|(n, kh)| (n.as_slice(), core_kind(kh.kind), larch_core::Hash(kh.hash.0)));
    if depth > 0 && entries.len() <= 32 {
        return (Hash(values_inode_hash(entries.len(), refs()).0), Elt::Node(entries.to_vec()));
    }
    assert!(depth > 0 || entries.len() > 256, "a directory of ≤ 256 entries is hashed flat");
    let mut proofs = Vec::new();
    for index in 0..32u8 {
        let below = bucket(entries, depth, index);
        if !below.is_empty() {
            proofs.push((index, inode(depth + 1, &below).0));
        }
    }
    let core: Vec<(u8, larch_core::Hash)> = proofs.iter().map(|(i, h)| (*i, larch_core::Hash(h.0))).collect();
    let hash = tree_inode_hash(depth, entries.len() as u64, core.len(), core.into_iter());
    (Hash(hash.0), Elt::Inode { length: entries.len() as u64, proofs })
}

fn flat(entries: &[(Vec<u8>, KindedHash)]) -> Hash {
    let refs = entries.iter().map(|(n, kh)| (n.as_slice(), core_kind(kh.kind), larch_core::Hash(kh.hash.0)));
    Hash(flat_node_hash(entries.len(), refs).0)
}

fn names(filter: impl Fn(&[u8]) -> bool, count: usize, prefix: &str) -> Vec<Vec<u8>> {
    (0..).map(|i| format!("{prefix}{i}").into_bytes()).filter(|n| filter(n)).take(count).collect()
}

fn sorted(mut entries: Entries) -> Entries {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

fn commit(entries: &[(&str, &[Vec<u8>])]) -> (MemoryRepo, Tree) {
    let mut repo = MemoryRepo::new();
    let mut tree = repo.empty_tree();
    for (dir, names) in entries {
        for name in *names {
            let name = String::from_utf8(name.clone()).unwrap();
            tree.add(&[*dir, name.as_str()], name.as_bytes().to_vec()).unwrap();
        }
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    let tree = repo.checkout(&commit).unwrap();
    (repo, tree)
}

/// Two directories of more than 256 entries hold the same 3 entries `shared` (same names, same
/// values) in one inode leaf: at depth 1 in `a` (its only names in bucket 3 at depth 0), at
/// depth 2 in `b` (whose bucket 3 holds 40 more names, spread at depth 1, none in bucket 9).
/// The leaf has one hash; Irmin sends it once, with the value, when `a` is read, and not again
/// for `b`.
#[test]
fn an_inode_leaf_met_at_two_depths_is_streamed_once() {
    let shared = names(|n| inode_index(0, n) == 3 && inode_index(1, n) == 9, 3, "s");
    let more = names(|n| inode_index(0, n) == 3 && inode_index(1, n) != 9, 40, "m");
    let others = names(|n| inode_index(0, n) != 3, 300, "o");
    let a_names: Vec<Vec<u8>> = shared.iter().chain(&others).cloned().collect();
    let b_names: Vec<Vec<u8>> = shared.iter().chain(&more).chain(&others).cloned().collect();
    let (_repo, tree) = commit(&[("a", &a_names), ("b", &b_names)]);

    // The independent expectation.
    let entries = |names: &[Vec<u8>]| sorted(names.iter().map(|n| value_entry(n, n)).collect());
    let (a_entries, b_entries) = (entries(&a_names), entries(&b_names));
    let (a_hash, a_root) = inode(0, &a_entries);
    let (b_hash, b_root) = inode(0, &b_entries);
    let (a_leaf_hash, a_leaf) = inode(1, &bucket(&a_entries, 0, 3));
    let b_mid_entries = bucket(&b_entries, 0, 3);
    let (_, b_mid) = inode(1, &b_mid_entries);
    let (b_leaf_hash, b_leaf) = inode(2, &bucket(&b_mid_entries, 1, 9));
    assert_eq!((a_leaf_hash, &a_leaf), (b_leaf_hash, &b_leaf), "one leaf, two depths");
    let root_entries = vec![
        (b"a".to_vec(), KindedHash { kind: Kind::Node, hash: a_hash }),
        (b"b".to_vec(), KindedHash { kind: Kind::Node, hash: b_hash }),
    ];
    assert_eq!(flat(&root_entries).0, tree.hash().0, "the test's construction gives larch's root hash");
    let s0 = shared[0].clone();
    let find = |dir: &[u8]| Op::Find(vec![dir.to_vec(), s0.clone()]);
    let ops = [find(b"a"), find(b"b")];
    let irmin = vec![Elt::Node(root_entries), a_root, a_leaf, Elt::Contents(s0.clone()), b_root, b_mid];

    let produced = proof::produce_stream(&tree, &ops).unwrap();
    assert_eq!(produced.proof.elts, irmin);
    let verified = verify_stream(&produced.proof, &ops).unwrap();
    assert_eq!(verified.results, vec![OpResult::Value(Some(s0.clone())); 2]);
    // The leaf sent a second time (for `b`) is one element too many, as for Irmin's consumer,
    // which finds the hash in its table.
    let mut twice = produced.proof.clone();
    twice.elts.push(b_leaf);
    assert!(matches!(verify_stream(&twice, &ops), Err(VerifyError::StreamTooLong { used: 6, len: 7 })));

    // The verifier reuses the leaf at depth 2: adding a name to it in `b` (the leaf's bucket at
    // depths 0 and 1) gives larch-core's after hash.
    let new = names(|n| inode_index(0, n) == 3 && inode_index(1, n) == 9, 1, "new").remove(0);
    let add = [find(b"a"), Op::Add(vec![b"b".to_vec(), new.clone()], new.clone())];
    let produced = proof::produce_stream(&tree, &add).unwrap();
    assert_eq!(produced.proof.elts, irmin, "the add reads the leaf again, by its hash");
    let mut after = tree.clone();
    let new_name = String::from_utf8(new.clone()).unwrap();
    after.add(&["b", new_name.as_str()], new.clone()).unwrap();
    let verified = verify_stream(&produced.proof, &add).unwrap();
    assert_eq!(verified.after.hash.0, after.hash().0);
}

/// The same directory at two paths and the same value under two keys: each sent once (Irmin's
/// set holds hashes, not paths).
#[test]
fn a_directory_and_a_value_met_twice_are_streamed_once() {
    let small = vec![b"k".to_vec(), b"l".to_vec()];
    let (_repo, tree) = commit(&[("d1", &small), ("d2", &small)]);
    let dir = sorted(small.iter().map(|n| value_entry(n, n)).collect());
    let dir_hash = flat(&dir);
    let root = vec![
        (b"d1".to_vec(), KindedHash { kind: Kind::Node, hash: dir_hash }),
        (b"d2".to_vec(), KindedHash { kind: Kind::Node, hash: dir_hash }),
    ];
    assert_eq!(flat(&root).0, tree.hash().0);
    let ops = [
        Op::Find(vec![b"d1".to_vec(), b"k".to_vec()]),
        Op::Find(vec![b"d2".to_vec(), b"k".to_vec()]),
        Op::Find(vec![b"d2".to_vec(), b"l".to_vec()]),
    ];
    let produced = proof::produce_stream(&tree, &ops).unwrap();
    let irmin =
        vec![Elt::Node(root), Elt::Node(dir), Elt::Contents(b"k".to_vec()), Elt::Contents(b"l".to_vec())];
    assert_eq!(produced.proof.elts, irmin);
    assert!(verify_stream(&produced.proof, &ops).is_ok());
}

/// Irmin's `produce_proof` of a computation that reads nothing: the state is the blinded root
/// (`import_with_env` does not load it, `hash` of the untouched tree reads its key's hash, and
/// `Proof.of_tree` blinds a node the environment never recorded); its stream proof is empty.
#[test]
fn a_computation_that_reads_nothing_proves_the_blinded_root() {
    let (_repo, tree) = commit(&[("d", &[b"k".to_vec()])]);
    let root = KindedHash { kind: Kind::Node, hash: Hash(tree.hash().0) };
    let produced = proof::produce(&tree, &[]).unwrap();
    assert_eq!(produced.proof.state, larch_proof::Tree::BlindedNode(root.hash));
    assert_eq!((produced.proof.before, produced.proof.after), (root, root));
    let (proof, ()) = proof::produce_with(&tree, |_| Ok(())).unwrap();
    assert_eq!(proof.state, larch_proof::Tree::BlindedNode(root.hash));
    assert!(larch_proof::verify(&proof, &[]).is_ok());
    // The same bytes Octez would write for Irmin's proof (V2: `d0` blinded node).
    let bytes = larch_proof::encoding::v2::encode(&proof).unwrap();
    assert!(bytes.windows(33).any(|w| w[0] == 0xd0 && w[1..] == root.hash.0));
    // Reading anything through it needs the root.
    assert!(larch_proof::verify(&proof, &[Op::Find(vec![b"d".to_vec()])]).is_err());
    let stream = proof::produce_stream(&tree, &[]).unwrap();
    assert!(stream.proof.elts.is_empty());
    assert!(verify_stream(&stream.proof, &[]).is_ok());
}
