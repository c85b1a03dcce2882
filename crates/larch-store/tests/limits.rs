//! The format's limits are enforced on write (issue 9, point 5): a too-large input is a typed
//! error and the store stays at its previous commit; paths of any depth commit, reopen, read back
//! and check clean without overflowing a stack.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::info;
use larch_core::Hash;
use larch_store::INLINE_MAX;
use larch_store::{Repo, StoreError};

fn deep_path(depth: usize) -> Vec<Vec<u8>> {
    (0..depth).map(|i| format!("p{}", i % 5).into_bytes()).collect()
}

fn deep_store(depth: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = deep_path(depth);
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&path, vec![5u8; INLINE_MAX + 8]).unwrap();
    tree.add(&["top"], b"t".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    // A second commit rewrites the whole chain (patches of the first one's records).
    let mut next = repo.checkout(&first).unwrap();
    next.add(&path, b"changed".to_vec()).unwrap();
    let second = repo.commit(&next, &[first], info(2)).unwrap();
    repo.close().unwrap();

    let repo = Repo::open_read_only(dir.path()).unwrap();
    let tree = repo.checkout(&first).unwrap();
    assert_eq!(tree.find(&path).unwrap().unwrap().as_bytes(), &[5u8; INLINE_MAX + 8][..]);
    let next = repo.checkout(&second).unwrap();
    assert_eq!(next.find(&path).unwrap().unwrap().as_bytes(), b"changed");
    assert_eq!(next.hash(), repo.commit_details(&second).unwrap().tree_hash);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    // The root and the directories of the path but its last step (a value).
    assert_eq!(report.stats.max_depth, depth as u32);
}

#[test]
fn a_path_of_10_000_steps_through_the_store() {
    deep_store(10_000);
}

#[test]
fn a_path_of_100_000_steps_through_the_store() {
    deep_store(100_000);
}

#[test]
fn a_value_over_the_record_limit_is_refused_before_anything_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["small"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    let pack_len = std::fs::metadata(dir.path().join("chunk.000000")).unwrap().len();
    // 1 GiB + 1 zero bytes: allocated zeroed (untouched pages cost no memory), hashed by reading.
    let limit = larch_store::testing::codec::MAX_BODY_LEN as usize;
    tree.add(&["huge"], vec![0u8; limit + 1]).unwrap();
    let error = repo.commit(&tree, &[first], info(2)).unwrap_err();
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    assert_eq!(repo.head(), Some(first));
    assert_eq!(repo.commit_count(), 1);
    // Nothing of it reached the pack (the buffer never held it).
    assert_eq!(std::fs::metadata(dir.path().join("chunk.000000")).unwrap().len(), pack_len);
    // The handle still works: the tree without the value commits.
    tree.remove(&["huge"]).unwrap();
    tree.add(&["after"], b"2".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(3)).unwrap();
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(second));
    assert!(repo.checkout(&second).unwrap().find(&["huge"]).unwrap().is_none());
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn too_many_parents_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    let parents: Vec<Hash> = vec![first; larch_store::testing::codec::MAX_PARENTS + 1];
    let error = repo.commit(&tree, &parents, info(2)).unwrap_err();
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    assert_eq!(repo.commit_count(), 1);
    // The most parents the format allows are accepted.
    let parents: Vec<Hash> = vec![first; larch_store::testing::codec::MAX_PARENTS];
    let merge = repo.commit(&tree, &parents, info(3)).unwrap();
    assert_eq!(repo.commit_details(&merge).unwrap().parents.len(), larch_store::testing::codec::MAX_PARENTS);
    drop(repo);
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}
