//! The per-thread front of the decoded-node cache (`src/pack_front.rs`) serves what the shared
//! cache serves, keeps the checks of a cache hit, and never serves one store's node for another
//! store's key at the same offset.

mod common;

use common::info;
use larch_core::{Entry, Hash, Node, NodeBody, NodeRef, ObjectKey, Tree};
use larch_store::Repo;
use std::path::Path;
use std::sync::Arc;

/// A store with one commit: a root with two directories, `a` (50 values) and `b` (one).
fn store_with_two_dirs(dir: &Path) -> Hash {
    let mut repo = Repo::open(dir).expect("open");
    let mut tree = repo.empty_tree();
    for i in 0..50 {
        tree.add(&["a", &format!("k{i:02}")], format!("v{i}").into_bytes()).expect("add");
    }
    tree.add(&["b", "x"], b"y".to_vec()).expect("add");
    repo.commit(&tree, &[], info(0)).expect("commit")
}

/// The references of the root's two directories, `a` and `b`.
fn root_children(tree: &Tree) -> [(Hash, ObjectKey); 2] {
    let Entry::Node(root) = tree.root() else { panic!("the root is a directory") };
    let root: Arc<Node> = match root {
        NodeRef::Stored { hash, key } => tree.source().load_node(*key, hash).expect("load the root"),
        NodeRef::Mem(node) => node.clone(),
    };
    let NodeBody::Flat(entries) = root.body() else { panic!("a flat root") };
    let stored = |index: usize| match entries.get(index) {
        Some((_, Entry::Node(NodeRef::Stored { hash, key }))) => (*hash, *key),
        other => panic!("entry {index} is not a stored directory: {other:?}"),
    };
    [stored(0), stored(1)]
}

#[test]
fn a_node_read_again_is_the_same_node_and_a_reference_with_another_hash_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let commit = store_with_two_dirs(dir.path());
    let repo = Repo::open_read_only(dir.path()).expect("reopen");
    let tree = repo.checkout(&commit).expect("checkout");
    let [(hash_a, key_a), (hash_b, _)] = root_children(&tree);
    let source = tree.source().clone();

    let first = source.load_node(key_a, &hash_a).expect("first load");
    let again = source.load_node(key_a, &hash_a).expect("second load");
    assert!(Arc::ptr_eq(&first, &again), "a second read on the same thread decodes again");
    assert_eq!(again.hash(), hash_a);
    assert_eq!(again.length(), 50);

    // Another thread has a front of its own: the shared cache serves the same node there.
    let other_source = source.clone();
    let other = std::thread::spawn(move || other_source.load_node(key_a, &hash_a).expect("load"))
        .join()
        .expect("thread");
    assert!(Arc::ptr_eq(&first, &other));

    // A reference to the same record with `b`'s hash is corruption, on both threads.
    let refused = source.load_node(key_a, &hash_b);
    assert!(refused.is_err(), "a cached node served for a reference with another hash");
    let other_source = source.clone();
    let refused =
        std::thread::spawn(move || other_source.load_node(key_a, &hash_b).is_err()).join().expect("thread");
    assert!(refused, "a cached node served for a reference with another hash on another thread");
}

#[test]
fn two_stores_with_records_at_the_same_offsets_do_not_share_nodes() {
    let (one, two) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let commit = store_with_two_dirs(one.path());
    assert_eq!(store_with_two_dirs(two.path()), commit);
    let (repo_one, repo_two) =
        (Repo::open_read_only(one.path()).expect("open"), Repo::open_read_only(two.path()).expect("open"));
    let (tree_one, tree_two) =
        (repo_one.checkout(&commit).expect("checkout"), repo_two.checkout(&commit).expect("checkout"));
    let [(hash, key_one), _] = root_children(&tree_one);
    let [(_, key_two), _] = root_children(&tree_two);
    // Same record at the same offset, in two stores.
    assert_eq!(key_one.offset(), key_two.offset());
    assert_ne!(key_one.store(), key_two.store());

    let node_one = tree_one.source().load_node(key_one, &hash).expect("load from one");
    let node_two = tree_two.source().load_node(key_two, &hash).expect("load from two");
    assert!(!Arc::ptr_eq(&node_one, &node_two), "store two served store one's node");
    assert_eq!(node_one.stored_key(), Some(key_one));
    assert_eq!(node_two.stored_key(), Some(key_two));
    // A store refuses the other's key, even right after the other loaded it on this thread.
    assert!(tree_two.source().load_node(key_one, &hash).is_err());
}
