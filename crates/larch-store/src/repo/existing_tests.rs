//! A tree committed again gets the keys of the stored nodes (`commit/existing.rs`), and a
//! pipeline carries such a tree by key.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use crate::format::patch::MAX_CHAIN;
use crate::{PipelinedRepo, Repo, RepoOptions};
use larch_core::{CommitInfo, ContextRepo, Entry, Hash, Node, NodeBody, NodeRef, StoreId, Tree};

/// How many in-memory nodes `tree` has (a walk through `NodeRef::Mem` children only), and how
/// many of them have a key in `repo`'s store whose record is their value: the record's entries
/// hash to the node's hash, and its patch chain is the one noted on the node; and how many of
/// those records are patches.
fn mem_nodes(tree: &Tree, repo: &Repo) -> (usize, usize, usize) {
    let store: StoreId = repo.source.reader.store();
    let (mut nodes, mut keyed, mut patches) = (0, 0, 0);
    let mut pending = Vec::new();
    if let Entry::Node(NodeRef::Mem(root)) = tree.root() {
        pending.push(root.clone());
    }
    while let Some(node) = pending.pop() {
        nodes += 1;
        if let Some(offset) = node.stored_offset_in(store) {
            let hash = node.cached_hash().expect("a committed node has its hash");
            let (stored, chain) = repo.source.reader.node_chained(offset, &hash, MAX_CHAIN).unwrap();
            assert_eq!(Node::new(stored.body().clone()).hash(), hash, "the record at {offset}");
            assert_eq!(node.record_chain(), Some(chain), "the chain of the record at {offset}");
            keyed += 1;
            patches += usize::from(chain > 0);
        }
        let children: Vec<&NodeRef> = match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => entries
                .iter()
                .filter_map(|(_, entry)| match entry {
                    Entry::Node(child) => Some(child),
                    Entry::Contents(_) => None,
                })
                .collect(),
            NodeBody::Tree(tree) => tree.children.iter().map(|(_, child)| child).collect(),
        };
        pending.extend(children.into_iter().filter_map(|child| match child {
            NodeRef::Mem(node) => Some(node.clone()),
            NodeRef::Stored { .. } => None,
        }));
    }
    (nodes, keyed, patches)
}

/// The same edits (a large directory, an inode trie past 256 entries, and small ones) on
/// `tree`.
fn edit(tree: &mut Tree, salt: u8) {
    for i in 0..700u32 {
        tree.add(&["big".to_string(), format!("k{i:04}")], vec![salt, i as u8]).unwrap();
    }
    for d in 0..20u32 {
        tree.add(&["dirs".to_string(), format!("d{d}"), "v".to_string()], vec![salt; 300]).unwrap();
    }
}

/// A few changes on a tree holding [`edit`]'s paths: two values of the large directory, one
/// new value in a small one.
fn touch(tree: &mut Tree) {
    tree.add(&["big", "k0005"], b"changed".to_vec()).unwrap();
    tree.add(&["big", "k0300"], b"changed".to_vec()).unwrap();
    tree.add(&["dirs", "d3", "w"], b"new".to_vec()).unwrap();
}

/// The commit information of every commit of these tests, at `date`.
fn info(date: i64) -> CommitInfo {
    CommitInfo::tezos(date, "again")
}

#[test]
fn a_tree_committed_again_gets_the_keys_of_the_stored_nodes_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), RepoOptions::default()).unwrap();
    let mut base = repo.empty_tree();
    edit(&mut base, 1);
    let h0 = repo.commit(&base, &[], info(0)).unwrap();
    // The first time, from a checkout of h0 (stored children beside in-memory ones; the few
    // nodes changed are written as patches of their versions in h0).
    let mut first = repo.checkout(&h0).unwrap();
    touch(&mut first);
    let h1 = repo.commit(&first, &[h0], info(1)).unwrap();
    let end = repo.source.reader.end();
    // The same tree built again from the same checkout, and from nothing.
    let mut again = repo.checkout(&h0).unwrap();
    touch(&mut again);
    let mut rebuilt = repo.empty_tree();
    edit(&mut rebuilt, 1);
    touch(&mut rebuilt);
    for tree in [&again, &rebuilt] {
        let (nodes, keyed, _) = mem_nodes(tree, &repo);
        assert_eq!(keyed, 0, "no key before the commit");
        assert_eq!(repo.commit(tree, &[h0], info(1)).unwrap(), h1);
        let (after, keyed, patches) = mem_nodes(tree, &repo);
        assert!(nodes >= 5, "{nodes} in-memory nodes");
        assert_eq!((after, keyed), (nodes, nodes), "every in-memory node keyed");
        assert!(patches > 0, "the patches' chains noted");
    }
    assert_eq!(repo.source.reader.end(), end, "nothing written");
}

#[test]
fn a_pipeline_carries_a_tree_committed_again_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), RepoOptions::default()).unwrap();
    let mut tree = repo.empty_tree();
    let mut commits: Vec<Hash> = Vec::new();
    for block in 0..3u8 {
        edit(&mut tree, block);
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(repo.commit(&tree, &parents, info(block.into())).unwrap());
    }
    // The same blocks again through a pipeline, each from the checkout of the one before.
    let mut pipeline = PipelinedRepo::with_depth(repo, 2).unwrap();
    let mut tree = pipeline.empty_tree();
    for block in 0..3u8 {
        if block > 0 {
            tree = pipeline.checkout(&commits[usize::from(block) - 1]).unwrap();
        }
        edit(&mut tree, block);
        let parents: Vec<Hash> = if block == 0 { vec![] } else { vec![commits[usize::from(block) - 1]] };
        assert_eq!(
            pipeline.commit(&tree, &parents, info(block.into())).unwrap(),
            commits[usize::from(block)]
        );
    }
    pipeline.wait_durable().unwrap();
    // The last one, served from memory, refers to its nodes by key.
    let carried = pipeline.checkout(&commits[2]).unwrap();
    let repo = pipeline.into_inner().unwrap();
    let (nodes, keyed, _) = mem_nodes(&carried, &repo);
    assert_eq!(keyed, nodes, "{keyed} of {nodes} in-memory nodes keyed");
}
