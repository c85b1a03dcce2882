//! A node that a change of a pipeline's carried tree lets go of enters the cache as its record
//! decodes (`pack/reader/offer.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // test code

use crate::format::patch::MAX_CHAIN;
use crate::pack::reader::PackReader;
use crate::{PipelinedRepo, Repo, RepoOptions};
use larch_core::{
    CommitInfo, ContentsRef, ContextRepo, Entry, Hash, Node, NodeBody, NodeRef, ObjectKey, StoreId, Tree,
};
use std::sync::Arc;

/// What a directory entry or inode child is, comparable across a decoded record and a node made
/// from memory: its name (or bucket), and its target's key and hash, or its value's bytes.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Node(Hash, ObjectKey),
    Stored(Hash, ObjectKey),
    Value(Vec<u8>),
    /// A child held in memory: what a decoded record never has.
    InMemory,
}

fn targets(node: &Node) -> Vec<(Vec<u8>, Target)> {
    let child = |child: &NodeRef| match child {
        NodeRef::Stored { hash, key } => Target::Node(*hash, *key),
        NodeRef::Mem(_) => Target::InMemory,
    };
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => entries
            .iter()
            .map(|(name, entry)| {
                let target = match entry {
                    Entry::Node(node) => child(node),
                    Entry::Contents(ContentsRef::Stored { hash, key }) => Target::Stored(*hash, *key),
                    Entry::Contents(ContentsRef::Mem(contents)) => {
                        Target::Value(contents.as_bytes().to_vec())
                    }
                    Entry::Contents(ContentsRef::Inline(value)) => Target::Value(value.as_bytes().to_vec()),
                };
                (name.as_bytes().to_vec(), target)
            })
            .collect(),
        NodeBody::Tree(tree) => {
            tree.children.iter().map(|(bucket, node)| (vec![*bucket], child(node))).collect()
        }
    }
}

/// The in-memory child `name` of directory `dir`.
fn mem_child(dir: &Node, name: &str) -> Arc<Node> {
    let NodeBody::Flat(entries) = dir.body() else { panic!("not a flat directory") };
    match entries.iter().find(|(n, _)| n.as_bytes() == name.as_bytes()) {
        Some((_, Entry::Node(NodeRef::Mem(node)))) => node.clone(),
        other => panic!("{name}: not an in-memory directory: {other:?}"),
    }
}

fn root(tree: &Tree) -> Arc<Node> {
    match tree.root() {
        Entry::Node(NodeRef::Mem(root)) => root.clone(),
        _ => panic!("the root is not in memory"),
    }
}

/// Whether `reader`'s cache holds the record of `node` (stored in `store`) as the record decodes:
/// the same entries, patch chain and hash.
fn cached_as_decoded(reader: &PackReader, store: StoreId, node: &Node) -> bool {
    let offset = node.stored_offset_in(store).expect("a stored node");
    let hash = node.cached_hash().expect("a hashed node");
    let Some((cached, chain)) = reader.cached_node(offset, &hash, MAX_CHAIN).unwrap() else {
        return false;
    };
    let (decoded, decoded_chain) = reader.node_read(offset, &hash, MAX_CHAIN, false).unwrap();
    assert_eq!(targets(&cached), targets(&decoded), "the entries of the record at {offset}");
    assert_eq!(chain, decoded_chain, "the chain of the record at {offset}");
    assert_eq!(Node::new(cached.body().clone()).hash(), hash, "the hash of the record at {offset}");
    true
}

/// A pipeline on a new store in `dir`, and the store's id. Its cache's priming budget (a
/// pipelined writer's 1/1024 of it) holds no record: what the cache holds after a change, the
/// change put there. No node is kept in memory for being recent: every stored one is let go of
/// at a copy.
fn letting_go(dir: &std::path::Path) -> (PipelinedRepo, StoreId) {
    let options = RepoOptions { cache_bytes: 256 << 10, ..RepoOptions::default() };
    let repo = Repo::open_with(dir, options).unwrap();
    let store = repo.source.reader.store();
    let pipeline =
        PipelinedRepo::with_depth(repo, 1).unwrap().with_recent_in_memory(0).with_recent_inodes_in_memory(0);
    (pipeline, store)
}

#[test]
fn the_nodes_a_change_lets_go_of_enter_the_cache_as_their_records_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (mut pipeline, store) = letting_go(dir.path());
    let mut tree = pipeline.empty_tree();
    // `a` holds two directories, `b` a value larger than a record's inline values, `c` a
    // chain of directories, `s` values only, `big` an inode trie (more than 256 entries).
    for (path, value) in [
        (vec!["a", "x", "v"], vec![1u8; 8]),
        (vec!["a", "y", "v"], vec![2u8; 8]),
        (vec!["b", "large"], vec![3u8; 4096]),
        (vec!["b", "small"], vec![4u8; 8]),
        (vec!["c", "d", "e", "v"], vec![5u8; 8]),
        (vec!["s", "v"], vec![7u8; 8]),
        (vec!["s", "w"], vec![8u8; 8]),
    ] {
        tree.add(&path, value).unwrap();
    }
    for i in 0..600u32 {
        tree.add(&["big".to_string(), format!("k{i:04}")], vec![6, i as u8]).unwrap();
    }
    let h1 = pipeline.commit(&tree, &[], CommitInfo::tezos(1, "one")).unwrap();
    pipeline.wait_durable().unwrap();
    let mut carried = pipeline.checkout(&h1).unwrap();
    let top = root(&carried);
    let [a, b, c, s, big] = ["a", "b", "c", "s", "big"].map(|name| mem_child(&top, name));
    let NodeBody::Tree(trie) = big.body() else { panic!("`big` is not an inode trie") };
    assert!(
        trie.children.iter().all(|(_, child)| matches!(child, NodeRef::Mem(_))),
        "`big`'s inodes in memory"
    );
    let reader = pipeline.reader();
    for (name, node) in [("a", &a), ("b", &b), ("c", &c), ("s", &s), ("big", &big)] {
        assert!(
            !reader.is_cached(node.stored_offset_in(store).unwrap()),
            "`{name}` not cached before the change"
        );
    }
    // A new value at the top copies the root, which refers to its other children by key.
    carried.add(&["z"], b"new".to_vec()).unwrap();
    let h2 = pipeline.commit(&carried, &[h1], CommitInfo::tezos(2, "two")).unwrap();
    pipeline.wait_durable().unwrap();
    let repo = pipeline.into_inner().unwrap();
    // Directories and an inode trie holding nodes in memory: copies referring to them by key.
    for (name, node) in [("a", &a), ("c", &c), ("big", &big)] {
        assert!(cached_as_decoded(&repo.source.reader, store, node), "`{name}` in the cache");
    }
    // A directory of values only: the node itself.
    assert!(cached_as_decoded(&repo.source.reader, store, &s), "`s` in the cache");
    let offset = s.stored_offset_in(store).unwrap();
    let (cached, _) =
        repo.source.reader.cached_node(offset, &s.cached_hash().unwrap(), MAX_CHAIN).unwrap().unwrap();
    assert!(Arc::ptr_eq(&cached, &s), "`s` cached as it was in memory");
    // Not `b`: its large value is a record of its own, whose key the node in memory lacks.
    assert!(!repo.source.reader.is_cached(b.stored_offset_in(store).unwrap()), "`b` not in the cache");
    // And the tree reads the same.
    let read = repo.checkout(&h2).unwrap();
    assert_eq!(read.find(&["a", "y", "v"]).unwrap().map(|v| v.as_bytes().to_vec()), Some(vec![2u8; 8]));
    assert_eq!(read.find(&["s", "w"]).unwrap().map(|v| v.as_bytes().to_vec()), Some(vec![8u8; 8]));
    assert!(read.mem_tree(&["c", "d", "e"]).unwrap());
}

#[test]
fn a_patch_enters_the_cache_with_its_chain_and_is_patched_again_soundly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut pipeline, store) = letting_go(dir.path());
    let mut tree = pipeline.empty_tree();
    for i in 0..10u8 {
        tree.add(&["p".to_string(), format!("k{i:02}")], vec![i; 8]).unwrap();
    }
    let h1 = pipeline.commit(&tree, &[], CommitInfo::tezos(1, "one")).unwrap();
    pipeline.wait_durable().unwrap();
    // One value of `p` changed: `p` is written as a patch on its first version.
    let mut carried = pipeline.checkout(&h1).unwrap();
    carried.add(&["p", "k03"], b"second".to_vec()).unwrap();
    let h2 = pipeline.commit(&carried, &[h1], CommitInfo::tezos(2, "two")).unwrap();
    pipeline.wait_durable().unwrap();
    let mut carried = pipeline.checkout(&h2).unwrap();
    let p = mem_child(&root(&carried), "p");
    assert_eq!(p.record_chain(), Some(1), "`p` written as a patch");
    let offset = p.stored_offset_in(store).unwrap();
    assert!(!pipeline.reader().is_cached(offset), "`p` not cached before the change");
    // A change at the top lets go of `p`: in the cache with its chain.
    carried.add(&["z"], b"new".to_vec()).unwrap();
    let h3 = pipeline.commit(&carried, &[h2], CommitInfo::tezos(3, "three")).unwrap();
    pipeline.wait_durable().unwrap();
    assert!(cached_as_decoded(pipeline.reader(), store, &p), "`p` in the cache");
    // `p` changed again, on the version the cache holds: a patch on a patch.
    let mut carried = pipeline.checkout(&h3).unwrap();
    carried.add(&["p", "k05"], b"third".to_vec()).unwrap();
    let h4 = pipeline.commit(&carried, &[h3], CommitInfo::tezos(4, "four")).unwrap();
    pipeline.wait_durable().unwrap();
    drop(pipeline.into_inner().unwrap());
    // Read from the files alone.
    let repo = Repo::open_with(dir.path(), RepoOptions::default()).unwrap();
    let read = repo.checkout(&h4).unwrap();
    for (name, value) in [("k03", b"second".to_vec()), ("k05", b"third".to_vec()), ("k07", vec![7u8; 8])] {
        assert_eq!(read.find(&["p", name]).unwrap().map(|v| v.as_bytes().to_vec()), Some(value), "p/{name}");
    }
}
