//! The cache primed by a commit holds what decoding the records just written gives: the same
//! entries, children as stored references into this store, the same patch chain lengths. Nodes
//! that can enter the cache as they are (no in-memory child, no contents record of their own)
//! are the tree's own in-memory nodes, not copies.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use crate::Repo;
use crate::format::codec::INLINE_MAX;
use larch_core::{CommitInfo, ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, StoreId, Tree};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Adds `count` values below `prefix`: a directory of `count` entries (an inode trie past 256),
/// short values (inline) and, every seventh, a long one (a contents record of its own).
fn fill(tree: &mut Tree, prefix: &[&str], count: usize, salt: u8) {
    for i in 0..count {
        let name = format!("k{i:05}");
        let value = if i % 7 == 0 { vec![salt ^ i as u8; INLINE_MAX + 8] } else { vec![salt, i as u8, 1] };
        let mut path: Vec<&str> = prefix.to_vec();
        path.push(&name);
        tree.add(&path, value).unwrap();
    }
}

/// Asserts that `primed` (from the writer's cache) and `decoded` (read back by another handle)
/// are the same record: `ours`/`theirs` are the two handles' store identities.
fn assert_same_record(primed: &Node, decoded: &Node, ours: StoreId, theirs: StoreId, at: u64) {
    let same_ref = |a: &NodeRef, b: &NodeRef| match (a, b) {
        (NodeRef::Stored { hash: ha, key: ka }, NodeRef::Stored { hash: hb, key: kb }) => {
            assert_eq!(ha, hb, "child hash at {at}");
            assert!(ka.offset_in(ours).is_some(), "a primed child key of another store at {at}");
            assert_eq!(ka.offset_in(ours), kb.offset_in(theirs), "child offset at {at}");
        }
        _ => panic!("a primed node at {at} holds an in-memory child node"),
    };
    assert_eq!(primed.hash(), decoded.hash());
    match (primed.body(), decoded.body()) {
        (NodeBody::Flat(a), NodeBody::Flat(b)) | (NodeBody::Values(a), NodeBody::Values(b)) => {
            assert_eq!(a.len(), b.len(), "entries at {at}");
            for ((name_a, entry_a), (name_b, entry_b)) in a.iter().zip(b) {
                assert_eq!(name_a.as_bytes(), name_b.as_bytes(), "names at {at}");
                match (entry_a, entry_b) {
                    (Entry::Node(a), Entry::Node(b)) => same_ref(a, b),
                    (
                        Entry::Contents(a @ (ContentsRef::Mem(_) | ContentsRef::Inline(_))),
                        Entry::Contents(b @ ContentsRef::Inline(_)),
                    ) => {
                        let (a, b) = (a.held_bytes().unwrap_or_default(), b.held_bytes().unwrap_or_default());
                        assert!(a.len() <= INLINE_MAX, "a primed contents value not inline at {at}");
                        assert_eq!(a, b, "inline value at {at}");
                    }
                    (
                        Entry::Contents(ContentsRef::Stored { hash: ha, key: ka }),
                        Entry::Contents(ContentsRef::Stored { hash: hb, key: kb }),
                    ) => {
                        assert_eq!(ha, hb, "contents hash at {at}");
                        assert_eq!(ka.offset_in(ours), kb.offset_in(theirs), "contents offset at {at}");
                    }
                    _ => panic!("entries of different kinds at {at}"),
                }
            }
        }
        (NodeBody::Tree(a), NodeBody::Tree(b)) => {
            assert_eq!((a.depth, a.length, a.children.len()), (b.depth, b.length, b.children.len()));
            for ((bucket_a, child_a), (bucket_b, child_b)) in a.children.iter().zip(&b.children) {
                assert_eq!(bucket_a, bucket_b, "buckets at {at}");
                same_ref(child_a, child_b);
            }
        }
        _ => panic!("records of different kinds at {at}"),
    }
}

/// What [`check_primed`] saw.
#[derive(Default, Debug)]
struct Seen {
    /// Written nodes checked.
    nodes: usize,
    /// Of them, primed as the tree's own node.
    shared: usize,
    /// Of them, written as patches.
    patches: usize,
}

/// Walks the in-memory part of `tree` just committed to `repo`; every node written (with a key of
/// `repo`'s store) must be a cache hit in `repo` and the same record as `reader` decodes.
fn check_primed(repo: &Repo, reader: &Repo, tree: &Tree) -> Seen {
    let ours = repo.source.reader.store();
    let theirs = reader.source.reader.store();
    let mut seen = Seen::default();
    let mut stack: Vec<Arc<Node>> = match tree.root() {
        Entry::Node(NodeRef::Mem(root)) => vec![root.clone()],
        _ => Vec::new(),
    };
    while let Some(node) = stack.pop() {
        let mut push = |child: &NodeRef| {
            if let NodeRef::Mem(child) = child {
                stack.push(child.clone());
            }
        };
        match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                entries.iter().for_each(|(_, entry)| {
                    if let Entry::Node(child) = entry {
                        push(child)
                    }
                });
            }
            NodeBody::Tree(inode) => inode.children.iter().for_each(|(_, child)| push(child)),
        }
        let Some(offset) = node.stored_offset_in(ours) else { continue };
        let hash: Hash = node.hash();
        let misses = repo.source.reader.counters.misses.load(Ordering::Relaxed);
        let (primed, chain) = repo.source.reader.node_chained(offset, &hash, u8::MAX).unwrap();
        assert_eq!(
            repo.source.reader.counters.misses.load(Ordering::Relaxed),
            misses,
            "the node written at {offset} was not primed"
        );
        let (decoded, decoded_chain) = reader.source.reader.node_chained(offset, &hash, u8::MAX).unwrap();
        assert_eq!(chain, decoded_chain, "patch chain length at {offset}");
        assert_same_record(&primed, &decoded, ours, theirs, offset);
        seen.nodes += 1;
        seen.shared += usize::from(Arc::ptr_eq(&primed, &node));
        seen.patches += usize::from(chain > 0);
    }
    seen
}

#[test]
fn the_primed_cache_holds_what_the_records_decode_to() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    fill(&mut tree, &["big"], 600, 1);
    fill(&mut tree, &["small", "a"], 40, 2);
    fill(&mut tree, &["small", "b"], 5, 3);
    let first = repo.commit(&tree, &[], CommitInfo::tezos(1, "first")).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let seen = check_primed(&repo, &reader, &tree);
    assert!(seen.nodes >= 20, "{seen:?}");
    assert!(seen.shared > 0 && seen.shared < seen.nodes, "{seen:?}");

    // A second commit on a checkout: rewritten nodes are patches of the first commit's.
    let mut tree = repo.checkout(&first).unwrap();
    tree.add(&["big", "k00003"], b"changed".to_vec()).unwrap();
    tree.add(&["big", "k00014"], vec![9; INLINE_MAX + 1]).unwrap();
    tree.add(&["small", "a", "k00010"], b"changed".to_vec()).unwrap();
    tree.remove(&["small", "b", "k00001"]).unwrap();
    repo.commit(&tree, &[first], CommitInfo::tezos(2, "second")).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let seen = check_primed(&repo, &reader, &tree);
    assert!(seen.nodes >= 5 && seen.patches > 0 && seen.shared > 0, "{seen:?}");
}

/// The patch chain length of the record of the directory at `path` of `tree` (just committed).
fn chain_at(repo: &Repo, tree: &Tree, path: &[&str]) -> u8 {
    let sub = tree.find_tree(path).unwrap().unwrap();
    let node = match sub.root() {
        Entry::Node(NodeRef::Mem(node)) => node.clone(),
        _ => panic!("{path:?} is not a node in memory"),
    };
    let offset = node.stored_offset_in(repo.source.reader.store()).unwrap();
    repo.source.reader.node_chained(offset, &node.hash(), u8::MAX).unwrap().1
}

#[test]
fn a_commit_of_a_burst_does_not_grow_the_encoder_tables() {
    use crate::commit::writer::tables::RESERVED_NODES;
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["first"], b"one".to_vec()).unwrap();
    let parent = repo.commit(&tree, &[], CommitInfo::tezos(1, "first")).unwrap();
    let reserved = repo.encoder_tables.as_ref().map(|tables| tables.node_capacity()).unwrap();
    assert!(reserved >= RESERVED_NODES, "{reserved}");

    // Half the reserve's worth of accounts, each a directory of two entries, under one
    // directory: about as many nodes as a Tezos cycle's end writes.
    let mut tree = repo.checkout(&parent).unwrap();
    let accounts = RESERVED_NODES / 2;
    for i in 0..accounts {
        let account = format!("{i:08}");
        tree.add(&["index", account.as_str(), "balance"], b"1".to_vec()).unwrap();
        tree.add(&["index", account.as_str(), "counter"], b"2".to_vec()).unwrap();
    }
    let last = repo.commit(&tree, &[parent], CommitInfo::tezos(2, "burst")).unwrap();
    let tables = repo.encoder_tables.as_ref().expect("tables kept after the burst");
    assert_eq!(tables.node_capacity(), reserved, "the tables grew");
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let tree = reader.checkout(&last).unwrap();
    let account = format!("{:08}", accounts - 1);
    assert_eq!(tree.find(&["index", account.as_str(), "counter"]).unwrap().unwrap().as_bytes(), b"2");
}

#[test]
fn a_small_directory_patch_chain_stops_at_its_bound() {
    use crate::format::patch::{MAX_CHAIN, OLD_BASE_MAX_ENTRIES, SMALL_MAX_CHAIN};
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    fill(&mut tree, &["small"], OLD_BASE_MAX_ENTRIES - 8, 1);
    fill(&mut tree, &["large"], OLD_BASE_MAX_ENTRIES + 4, 2);
    let mut parent = repo.commit(&tree, &[], CommitInfo::tezos(1, "first")).unwrap();

    // Rewritten commit after commit (one entry each time, soon after): the small directory's
    // chain goes back to a full record past `SMALL_MAX_CHAIN` patches, the large one's past
    // `MAX_CHAIN`.
    let mut chains = Vec::new();
    for i in 0..usize::from(MAX_CHAIN) + 1 {
        let mut tree = repo.checkout(&parent).unwrap();
        let value = format!("v{i}").into_bytes();
        tree.add(&["small", "k00001"], value.clone()).unwrap();
        tree.add(&["large", "k00001"], value).unwrap();
        parent = repo.commit(&tree, &[parent], CommitInfo::tezos(2 + i as i64, "again")).unwrap();
        chains.push((chain_at(&repo, &tree, &["small"]), chain_at(&repo, &tree, &["large"])));
    }
    let small: Vec<u8> = chains.iter().map(|(small, _)| *small).collect();
    let large: Vec<u8> = chains.iter().map(|(_, large)| *large).collect();
    let period = usize::from(SMALL_MAX_CHAIN) + 1;
    let expected_small: Vec<u8> = (0..chains.len()).map(|i| ((i + 1) % period) as u8).collect();
    let expected_large: Vec<u8> =
        (0..chains.len()).map(|i| ((i + 1) % (usize::from(MAX_CHAIN) + 1)) as u8).collect();
    assert_eq!(small, expected_small, "small directory chains");
    assert_eq!(large, expected_large, "large directory chains");

    // Read back as written by a reader with a cold cache.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let tree = reader.checkout(&parent).unwrap();
    let last = format!("v{}", MAX_CHAIN).into_bytes();
    assert_eq!(tree.find(&["small", "k00001"]).unwrap().unwrap().as_bytes(), last.as_slice());
    assert_eq!(tree.find(&["large", "k00001"]).unwrap().unwrap().as_bytes(), last.as_slice());
}

#[test]
fn a_small_directory_on_an_old_base_is_written_in_full() {
    use crate::format::patch::{OLD_BASE_BYTES, OLD_BASE_MAX_ENTRIES};
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    fill(&mut tree, &["small"], OLD_BASE_MAX_ENTRIES - 10, 1);
    fill(&mut tree, &["large"], OLD_BASE_MAX_ENTRIES + 4, 2);
    let mut parent = repo.commit(&tree, &[], CommitInfo::tezos(1, "first")).unwrap();

    // Rewritten soon after: both directories are patches on their first records.
    let mut tree = repo.checkout(&parent).unwrap();
    tree.add(&["small", "k00001"], b"one".to_vec()).unwrap();
    tree.add(&["large", "k00001"], b"one".to_vec()).unwrap();
    parent = repo.commit(&tree, &[parent], CommitInfo::tezos(2, "soon")).unwrap();
    assert_eq!((chain_at(&repo, &tree, &["small"]), chain_at(&repo, &tree, &["large"])), (1, 1));

    // More than `OLD_BASE_BYTES` of pack later: the small directory is written in full, the large
    // one is still a patch.
    let mut tree = repo.checkout(&parent).unwrap();
    let pieces = OLD_BASE_BYTES / (1 << 20) + 2;
    for i in 0..pieces {
        tree.add(&["filler", format!("{i}").as_str()], vec![i as u8; 1 << 20]).unwrap();
    }
    parent = repo.commit(&tree, &[parent], CommitInfo::tezos(3, "filler")).unwrap();
    let mut tree = repo.checkout(&parent).unwrap();
    tree.add(&["small", "k00002"], b"two".to_vec()).unwrap();
    tree.add(&["large", "k00002"], b"two".to_vec()).unwrap();
    let last = repo.commit(&tree, &[parent], CommitInfo::tezos(4, "late")).unwrap();
    assert_eq!((chain_at(&repo, &tree, &["small"]), chain_at(&repo, &tree, &["large"])), (0, 2));

    // Inode leaves (parts of large directories) are not concerned.
    use crate::format::patch::entries_patch_allowed;
    assert!(!entries_patch_allowed(true, OLD_BASE_MAX_ENTRIES - 1, 0, OLD_BASE_BYTES + 1));
    assert!(entries_patch_allowed(false, OLD_BASE_MAX_ENTRIES - 1, 0, OLD_BASE_BYTES + 1));
    assert!(entries_patch_allowed(true, OLD_BASE_MAX_ENTRIES - 1, 0, OLD_BASE_BYTES));

    // Both read back as written.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let tree = reader.checkout(&last).unwrap();
    assert_eq!(tree.find(&["small", "k00002"]).unwrap().unwrap().as_bytes(), b"two");
    assert_eq!(tree.find(&["large", "k00001"]).unwrap().unwrap().as_bytes(), b"one");
}
