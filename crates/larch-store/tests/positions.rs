//! Positions are owned by the store that wrote them (issue 9, point 4): a tree committed to one
//! repository or store and then to another must be copied, not written as pointers into the
//! first one. Every probe commits, reads back exactly, reopens and is fsck-clean, in both
//! directions.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info};
use larch_core::{MemoryRepo, Tree};
use larch_store::Repo;
use std::collections::BTreeMap;
use std::path::Path;

type Contents = BTreeMap<Vec<Vec<u8>>, Vec<u8>>;

/// Adds `count` values under `prefix` (directories of 300 entries: inode tries, and contents
/// records of their own for the long values).
fn fill(tree: &mut Tree, prefix: &str, count: usize) {
    for i in 0..count {
        let dir = format!("d{}", i / 300);
        let name = format!("{i:08x}");
        let value = if i % 3 == 0 { vec![i as u8; 40 + i % 50] } else { format!("v{i}").into_bytes() };
        tree.add(&[prefix, dir.as_str(), name.as_str()], value).unwrap();
    }
}

/// Reopens the store at `dir`, checks `commit` reads back as `expected`, and fsck is clean.
fn check_reopened(dir: &Path, commit: &larch_core::Hash, expected: &Contents) {
    let repo = Repo::open_read_only(dir).unwrap();
    let tree = repo.checkout(commit).unwrap();
    assert_eq!(&contents_of(&tree), expected);
    assert_eq!(tree.hash(), repo.commit_details(commit).unwrap().tree_hash);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_store_tree_committed_to_a_memory_repo_first_then_to_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut memory = MemoryRepo::new();
    // The memory repository already holds other objects: its indexes are valid pack offsets.
    let mut other = memory.empty_tree();
    fill(&mut other, "other", 2000);
    memory.commit(&other, &[], info(0)).unwrap();

    let mut tree = repo.empty_tree();
    fill(&mut tree, "mine", 700);
    let expected = contents_of(&tree);
    let in_memory = memory.commit(&tree, &[], info(1)).unwrap();
    let on_disk = repo.commit(&tree, &[], info(1)).unwrap();
    assert_eq!(in_memory, on_disk);
    assert_eq!(contents_of(&repo.checkout(&on_disk).unwrap()), expected);
    assert_eq!(contents_of(&memory.checkout(&in_memory).unwrap()), expected);
    // Modified and committed again to both, in the other order.
    tree.add(&["mine", "d0", "new"], b"value".to_vec()).unwrap();
    let expected2 = contents_of(&tree);
    let second = repo.commit(&tree, &[on_disk], info(2)).unwrap();
    assert_eq!(memory.commit(&tree, &[in_memory], info(2)).unwrap(), second);
    assert_eq!(contents_of(&memory.checkout(&second).unwrap()), expected2);
    repo.close().unwrap();
    check_reopened(dir.path(), &on_disk, &expected);
    check_reopened(dir.path(), &second, &expected2);
}

#[test]
fn a_memory_repo_tree_committed_to_a_store_then_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut filler = repo.empty_tree();
    fill(&mut filler, "filler", 1500);
    let filler_commit = repo.commit(&filler, &[], info(0)).unwrap();

    let mut memory = MemoryRepo::new();
    let mut tree = memory.empty_tree();
    fill(&mut tree, "mine", 700);
    let first = memory.commit(&tree, &[], info(1)).unwrap();
    // A checked-out (lazy) tree of the memory repository, modified, into the store.
    let mut lazy = memory.checkout(&first).unwrap();
    lazy.add(&["mine", "d1", "extra"], vec![9; 64]).unwrap();
    let expected = contents_of(&lazy);
    let on_disk = repo.commit(&lazy, &[filler_commit], info(2)).unwrap();
    assert_eq!(contents_of(&repo.checkout(&on_disk).unwrap()), expected);
    // And the store's own checkout, modified, back into the memory repository.
    let mut from_store = repo.checkout(&on_disk).unwrap();
    from_store.remove(&["mine", "d0"]).unwrap();
    let expected_back = contents_of(&from_store);
    let back = memory.commit(&from_store, &[first], info(3)).unwrap();
    assert_eq!(contents_of(&memory.checkout(&back).unwrap()), expected_back);
    assert_eq!(memory.checkout(&back).unwrap().hash(), from_store.hash());
    repo.close().unwrap();
    check_reopened(dir.path(), &on_disk, &expected);
}

/// A tree of `owner` committed first to `first` and then to `second` (two stores of different
/// sizes), modified, committed again to both; every commit reads back and both stores are clean.
fn across_two_stores(small_first: bool, tree_of_second: bool) {
    let small_dir = tempfile::tempdir().unwrap();
    let large_dir = tempfile::tempdir().unwrap();
    let mut small = Repo::open(small_dir.path()).unwrap();
    let mut large = Repo::open(large_dir.path()).unwrap();
    let mut filler = large.empty_tree();
    fill(&mut filler, "filler", 3000);
    let large_parent = large.commit(&filler, &[], info(0)).unwrap();
    let (first, second, first_dir, second_dir, parent_first, parent_second) = if small_first {
        (&mut small, &mut large, small_dir.path(), large_dir.path(), None, Some(large_parent))
    } else {
        (&mut large, &mut small, large_dir.path(), small_dir.path(), Some(large_parent), None)
    };
    let mut tree = if tree_of_second { second.empty_tree() } else { first.empty_tree() };
    fill(&mut tree, "mine", 900);
    let expected = contents_of(&tree);
    let parents = |p: Option<larch_core::Hash>| p.into_iter().collect::<Vec<_>>();
    let a = first.commit(&tree, &parents(parent_first), info(1)).unwrap();
    let b = second.commit(&tree, &parents(parent_second), info(1)).unwrap();
    assert_eq!(contents_of(&first.checkout(&a).unwrap()), expected);
    assert_eq!(contents_of(&second.checkout(&b).unwrap()), expected);
    // A checkout of the first store, modified, committed into the second.
    let mut moved = first.checkout(&a).unwrap();
    moved.add(&["mine", "d2", "moved"], vec![7; 50]).unwrap();
    let expected_moved = contents_of(&moved);
    let c = second.commit(&moved, &[b], info(2)).unwrap();
    assert_eq!(contents_of(&second.checkout(&c).unwrap()), expected_moved);
    // The original tree, modified again, into both.
    tree.remove(&["mine", "d1"]).unwrap();
    let expected_later = contents_of(&tree);
    let d = first.commit(&tree, &[a], info(3)).unwrap();
    let e = second.commit(&tree, &[c], info(3)).unwrap();
    small.close().unwrap();
    large.close().unwrap();
    check_reopened(first_dir, &a, &expected);
    check_reopened(first_dir, &d, &expected_later);
    check_reopened(second_dir, &b, &expected);
    check_reopened(second_dir, &c, &expected_moved);
    check_reopened(second_dir, &e, &expected_later);
}

#[test]
fn small_store_first_then_large_store() {
    across_two_stores(true, false);
    across_two_stores(true, true);
}

#[test]
fn large_store_first_then_small_store() {
    across_two_stores(false, false);
    across_two_stores(false, true);
}

#[test]
fn two_handles_on_one_store_do_not_share_positions_blindly() {
    // A reader's checkout committed through the writer of the same files: positions of another
    // handle are copied (correct, if not free), never misread.
    let dir = tempfile::tempdir().unwrap();
    let mut writer = Repo::open(dir.path()).unwrap();
    let mut tree = writer.empty_tree();
    fill(&mut tree, "x", 600);
    let first = writer.commit(&tree, &[], info(1)).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let mut from_reader = reader.checkout(&first).unwrap();
    from_reader.add(&["x", "d0", "r"], b"r".to_vec()).unwrap();
    let expected = contents_of(&from_reader);
    let second = writer.commit(&from_reader, &[first], info(2)).unwrap();
    writer.close().unwrap();
    check_reopened(dir.path(), &second, &expected);
}

/// Serves, for every key, a depth-0 inode whose buckets all point at that same key: a malformed
/// (self-referencing) trie, as a crafted source could serve.
#[derive(Debug)]
struct Loop;

impl larch_core::ObjectSource for Loop {
    fn load_node(
        &self,
        key: larch_core::ObjectKey,
        hash: &larch_core::Hash,
    ) -> Result<std::sync::Arc<larch_core::Node>, larch_core::LoadError> {
        use larch_core::{InodeTree, Node, NodeBody, NodeRef};
        let child = NodeRef::Stored { hash: *hash, key };
        let children = (0..32).map(|bucket| (bucket, child.clone())).collect();
        let body = NodeBody::Tree(InodeTree { depth: 0, length: 300, children });
        Ok(std::sync::Arc::new(Node::with_hash(body, *hash)))
    }
    fn load_contents(
        &self,
        key: larch_core::ObjectKey,
        hash: &larch_core::Hash,
    ) -> Result<std::sync::Arc<larch_core::Contents>, larch_core::LoadError> {
        Err(larch_core::LoadError { what: "contents", key, hash: *hash, reason: "no contents".into() })
    }
}

#[test]
fn copying_a_malformed_tree_of_another_source_fails_and_writes_nothing() {
    use larch_core::{Entry, Hash, NodeRef, ObjectKey, StoreId};
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let root = Entry::Node(NodeRef::Stored { hash: Hash([1; 32]), key: ObjectKey::new(StoreId::fresh(), 7) });
    let tree = Tree::from_entry(root, std::sync::Arc::new(Loop));
    let error = repo.commit(&tree, &[], info(1)).unwrap_err();
    assert!(error.to_string().contains("wrong shape or depth"), "{error}");
    assert_eq!(repo.commit_count(), 0);
    repo.close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}
