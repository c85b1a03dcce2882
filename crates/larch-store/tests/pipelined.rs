//! `SyncPolicy::Pipelined`: commits published on a publisher thread. When a commit returns, every
//! commit before it is durable and visible to readers in other handles; `wait_durable` waits for
//! the last one; the same records, hashes and sync calls as `SyncPolicy::Commit`; a publish that
//! fails poisons the writer and is reported by the next call. (Crashes and power losses at every
//! write and sync: `tests/crash_sim.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use std::path::Path;

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

fn writer(dir: &Path, sync: SyncPolicy) -> Repo {
    Repo::open_with(dir, RepoOptions { sync, ..RepoOptions::default() }).unwrap()
}

/// Commits level `i` (`k/<i>` = `v<i>`, plus a 4 KiB value every third level) on `tree`.
fn commit_level(repo: &mut Repo, tree: &mut larch_core::Tree, parent: Option<Hash>, i: usize) -> Hash {
    tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
    if i.is_multiple_of(3) {
        tree.add(&["big", &format!("{i}")], vec![i as u8; 4096]).unwrap();
    }
    repo.commit(tree, &parent.into_iter().collect::<Vec<_>>(), info(i as i64)).unwrap()
}

#[test]
fn a_commit_returns_with_every_earlier_commit_durable_and_visible_to_readers() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = writer(dir.path(), SyncPolicy::Pipelined);
    let mut tree = repo.empty_tree();
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..8 {
        let hash = commit_level(&mut repo, &mut tree, hashes.last().copied(), i);
        hashes.push(hash);
        // The writer sees its commit at once.
        assert_eq!(repo.head(), Some(hash));
        // A reader sees at least the commit before (it may already see this one).
        let reader = Repo::open_read_only(dir.path()).unwrap();
        let seen = reader.head().map(|head| hashes.iter().position(|h| *h == head).unwrap() + 1);
        let seen = seen.unwrap_or(0);
        assert!(seen >= i && seen <= i + 1, "commit {i}: a reader sees {seen} commits");
        assert_eq!(reader.commit_count(), seen);
        // Continue from a lazy checkout of the commit in flight every other level.
        if i % 2 == 1 {
            tree = repo.checkout(&hash).unwrap();
            assert_eq!(tree.length(&["k"]).unwrap(), i as u64 + 1);
        }
    }
    repo.wait_durable().unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), hashes.last().copied());
    assert_eq!(reader.commit_count(), hashes.len());
    let last = reader.checkout(&hashes[7]).unwrap();
    for i in 0..8 {
        assert_eq!(
            last.find(&["k", &format!("{i:04}")]).unwrap().unwrap().as_bytes(),
            format!("v{i}").as_bytes()
        );
    }
    assert!(reader.fsck().is_clean());
    repo.close().unwrap();
}

#[test]
fn the_same_store_and_the_same_sync_calls_as_syncing_every_commit() {
    let mut runs = Vec::new();
    for sync in [SyncPolicy::Commit, SyncPolicy::Pipelined] {
        let dir = tempfile::tempdir().unwrap();
        let mut repo = writer(dir.path(), sync);
        let mut tree = repo.empty_tree();
        let mut hashes: Vec<Hash> = Vec::new();
        for i in 0..12 {
            let hash = commit_level(&mut repo, &mut tree, hashes.last().copied(), i);
            hashes.push(hash);
        }
        repo.wait_durable().unwrap();
        let syncs = repo.stats().syncs;
        repo.close().unwrap();
        let pack: Vec<u8> = std::fs::read(dir.path().join("chunk.000000")).unwrap();
        let index: Vec<u8> = std::fs::read(dir.path().join("commits")).unwrap();
        runs.push((sync, hashes, syncs, pack, index));
    }
    let (commit, pipelined) = (&runs[0], &runs[1]);
    assert_eq!(commit.1, pipelined.1, "commit hashes");
    assert_eq!(commit.2, pipelined.2, "sync calls: {} against {}", commit.2, pipelined.2);
    assert_eq!(commit.2, 2 * 12, "two syncs per commit");
    assert!(commit.3 == pipelined.3, "the pack files differ");
    assert!(commit.4 == pipelined.4, "the commit indexes differ");
}

/// A pipelined writer with one durable commit, whose control file is then replaced under it:
/// the next publish refuses to write into the unlinked file (it would be lost), on the publisher
/// thread. Returns the writer, its tree and the commit.
fn writer_losing_its_control_file(dir: &Path) -> (Repo, larch_core::Tree, Hash) {
    let mut repo = writer(dir, SyncPolicy::Pipelined);
    let mut tree = repo.empty_tree();
    let first = commit_level(&mut repo, &mut tree, None, 0);
    repo.wait_durable().unwrap();
    let control = dir.join("control");
    let copy = dir.join("control.copy");
    std::fs::copy(&control, &copy).unwrap();
    std::fs::rename(&copy, &control).unwrap();
    (repo, tree, first)
}

#[test]
fn a_failed_publish_poisons_the_writer_and_is_reported_once_then_as_poisoned() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut tree, first) = writer_losing_its_control_file(dir.path());
    // The commit itself is staged and returns; its publish fails beside the caller.
    let second = commit_level(&mut repo, &mut tree, Some(first), 1);
    let error = repo.wait_durable().unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
    assert!(matches!(repo.wait_durable(), Err(StoreError::Poisoned)));
    let mut next = repo.checkout(&second).unwrap();
    next.add(&["k", "0002"], b"v2".to_vec()).unwrap();
    assert!(matches!(repo.commit(&next, &[second], info(2)), Err(StoreError::Poisoned)));
    drop(repo);
    // The store stands on the last durable commit.
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(first));
    assert_eq!(repo.commit_count(), 1);
    assert!(repo.fsck().is_clean());
}

#[test]
fn the_next_commit_reports_a_publish_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut tree, first) = writer_losing_its_control_file(dir.path());
    let second = commit_level(&mut repo, &mut tree, Some(first), 1);
    tree.add(&["k", "0002"], b"v2".to_vec()).unwrap();
    let error = repo.commit(&tree, &[second], info(2)).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
    assert!(matches!(repo.flush(), Ok(())), "flush of a poisoned writer does nothing");
    assert!(matches!(repo.wait_durable(), Err(StoreError::Poisoned)));
}

#[test]
fn a_gc_waits_for_the_publish_in_flight_and_collects_from_a_durable_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = writer(dir.path(), SyncPolicy::Pipelined);
    let mut tree = repo.empty_tree();
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..6 {
        let hash = commit_level(&mut repo, &mut tree, hashes.last().copied(), i);
        hashes.push(hash);
    }
    // The last commit is (perhaps) in flight: GC on it waits for its publish.
    repo.gc_start(&hashes[5]).unwrap();
    repo.gc_wait().unwrap();
    for i in 6..9 {
        let hash = commit_level(&mut repo, &mut tree, hashes.last().copied(), i);
        hashes.push(hash);
    }
    repo.close().unwrap();
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), hashes.last().copied());
    assert!(repo.checkout(&hashes[2]).is_err(), "collected");
    assert_eq!(repo.checkout(&hashes[8]).unwrap().length(&["k"]).unwrap(), 9);
    assert!(repo.fsck().is_clean());
}
