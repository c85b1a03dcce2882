//! Crash safety, simulated: a scripted sequence of commits runs on a fault-injecting storage that
//! cuts at every write, sync and replace in turn (tearing the cut write). After each cut the store
//! "reboots" with what survives (only synced bytes, or everything written), reopens, and must hold
//! exactly the acknowledged commits (compared with the model), pass fsck, and accept new commits.
//! Also: a full disk fails a commit cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::fault::{FaultController, Survival};
use larch_store::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

const COMMITS: u64 = 5;

fn options(sync: SyncPolicy) -> RepoOptions {
    RepoOptions { sync, cache_bytes: 1 << 20, ..RepoOptions::default() }
}

/// Opens the store on `controller`'s files (as the writer when `writable`), syncing every commit.
fn open(controller: &Arc<FaultController>, writable: bool) -> Repo {
    Repo::open_files(controller.files(), writable, options(SyncPolicy::Commit), None).unwrap()
}

/// Runs the script until it ends or fails; returns the acknowledged commits with their models.
fn run_script(files: StoreFiles, sync: SyncPolicy) -> Vec<(Hash, Model)> {
    let (mut rng, _) = seeded_rng("crash_script", 42);
    let mut acked = Vec::new();
    let Ok(mut repo) = Repo::open_files(files, true, options(sync), None) else {
        return acked;
    };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut parents = vec![];
    for block in 0..COMMITS {
        for _ in 0..25 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        match repo.commit(&tree, &parents, info(block)) {
            Ok(hash) => {
                acked.push((hash, model.clone()));
                parents = vec![hash];
                // Continue from a lazy checkout every other block, as a node does.
                if block % 2 == 0 {
                    tree = repo.checkout(&hash).unwrap();
                }
            }
            Err(_) => return acked,
        }
    }
    acked
}

fn check_after_crash(controller: &Arc<FaultController>, acked: &[(Hash, Model)], sync: SyncPolicy, cut: u64) {
    let files = controller.files();
    let mut repo = Repo::open_files(files, true, options(sync), None)
        .unwrap_or_else(|e| panic!("cut {cut}: reopen failed: {e}"));
    assert_eq!(repo.head(), acked.last().map(|(hash, _)| *hash), "cut {cut}");
    assert_eq!(repo.commit_count(), acked.len(), "cut {cut}");
    for (hash, model) in acked {
        assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "cut {cut}");
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "cut {cut}: {report}");
    // New commits succeed over whatever garbage the crash left past the published end.
    let mut tree = match acked.last() {
        Some((hash, _)) => repo.checkout(hash).unwrap(),
        None => repo.empty_tree(),
    };
    tree.add(&["after", "crash"], vec![5; 50]).unwrap();
    let parents: Vec<Hash> = acked.last().map(|(hash, _)| *hash).into_iter().collect();
    let next = repo.commit(&tree, &parents, info(1000)).unwrap();
    drop(repo);
    let repo = Repo::open_files(controller.files(), false, options(sync), None).unwrap();
    assert_eq!(repo.head(), Some(next));
    assert_eq!(
        repo.checkout(&next).unwrap().find(&["after", "crash"]).unwrap().unwrap().as_bytes(),
        &[5; 50][..]
    );
    assert!(repo.fsck().is_clean(), "cut {cut}: after new commit");
}

fn cut_everywhere(sync: SyncPolicy, survivals: &[Survival]) {
    let clean = FaultController::new();
    let all = run_script(clean.files(), sync);
    assert_eq!(all.len() as u64, COMMITS);
    let total_ops = clean.ops();
    assert!(total_ops >= 3 * COMMITS, "only {total_ops} operations");
    for cut in 0..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let acked = run_script(controller.files(), sync);
        assert!(controller.has_crashed(), "cut {cut} never happened");
        assert_eq!(
            &all[..acked.len()].iter().map(|c| c.0).collect::<Vec<_>>(),
            &acked.iter().map(|c| c.0).collect::<Vec<_>>()
        );
        for survival in survivals {
            check_after_crash(&controller.restart(*survival), &acked, sync, cut);
        }
    }
}

#[test]
fn every_cut_of_durable_commits_recovers() {
    cut_everywhere(SyncPolicy::Commit, &[Survival::Durable, Survival::Written]);
}

#[test]
fn every_cut_without_fsync_recovers_from_process_crashes() {
    cut_everywhere(SyncPolicy::Never, &[Survival::Written]);
}

#[test]
fn full_disk_fails_the_commit_and_keeps_the_store_usable() {
    let controller = FaultController::new();
    let mut repo = open(&controller, true);
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"small".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    controller.set_space_limit(Some(controller.used_bytes() + 100));
    tree.add(&["big"], vec![1; 4000]).unwrap();
    let error = repo.commit(&tree, &[first], info(2)).unwrap_err();
    match &error {
        StoreError::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{error}")
        }
        other => panic!("unexpected error {other}"),
    }
    assert_eq!(repo.head(), Some(first));
    assert_eq!(repo.commit_count(), 1);
    assert!(repo.checkout(&first).unwrap().find(&["big"]).unwrap().is_none());
    // Space returns: the same commit now succeeds on the same handle.
    controller.set_space_limit(None);
    let second = repo.commit(&tree, &[first], info(2)).unwrap();
    drop(repo);
    let repo = open(&controller.restart(Survival::Durable), false);
    assert_eq!(repo.head(), Some(second));
    assert_eq!(repo.checkout(&second).unwrap().find(&["big"]).unwrap().unwrap().as_bytes(), &[1; 4000][..]);
    assert!(repo.fsck().is_clean());
}

#[test]
fn a_failed_sync_poisons_the_handle_until_reopened() {
    let controller = FaultController::new();
    let mut repo = open(&controller, true);
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    // The next commit writes the pack, then the index, then syncs: cut at that sync.
    controller.crash_at(Some(controller.ops() + 2));
    tree.add(&["b"], b"2".to_vec()).unwrap();
    assert!(matches!(repo.commit(&tree, &[first], info(2)), Err(StoreError::Io { op: "sync", .. })));
    assert!(matches!(repo.commit(&tree, &[first], info(2)), Err(StoreError::Poisoned)));
    assert!(matches!(repo.set_branch("x", &first), Err(StoreError::Poisoned)));
    let repo = open(&controller.restart(Survival::Durable), true);
    assert_eq!(repo.head(), Some(first));
}

/// A commit larger than the writer's 8 MiB buffer writes its records in several pieces before
/// publishing. A full disk in the middle of them fails the commit and leaves the store at the
/// previous commit; a crash after the pieces but before the publish loses only that commit; once
/// space returns the commit succeeds and reads back after a restart.
#[test]
fn a_commit_larger_than_the_write_buffer_is_still_all_or_nothing() {
    let controller = FaultController::new();
    let mut repo = open(&controller, true);
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"small".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    let value = |i: usize| -> Vec<u8> { (0..65_536).map(|j| (i * 31 + j * 7) as u8).collect() };
    for i in 0..300 {
        tree.add(&["big", &format!("{i:03}")], value(i)).unwrap();
    }
    // Room for about 12 MB: past the first 8 MiB piece, short of the ~19.7 MB the commit needs.
    controller.set_space_limit(Some(controller.used_bytes() + 12_000_000));
    let error = repo.commit(&tree, &[first], info(2)).unwrap_err();
    assert!(matches!(&error, StoreError::Io { .. }), "{error}");
    assert!(controller.used_bytes() > 8 << 20, "the first piece was not written early");
    assert_eq!(repo.head(), Some(first));
    drop(repo);
    // A crash now: the written pieces are past the published end and ignored.
    let controller = controller.restart(Survival::Written);
    let mut repo = open(&controller, true);
    assert_eq!(repo.head(), Some(first));
    assert!(repo.fsck().is_clean());
    let tree = {
        let mut tree = repo.checkout(&first).unwrap();
        for i in 0..300 {
            tree.add(&["big", &format!("{i:03}")], value(i)).unwrap();
        }
        tree
    };
    let second = repo.commit(&tree, &[first], info(2)).unwrap();
    drop(repo);
    let repo = open(&controller.restart(Survival::Durable), false);
    assert_eq!(repo.head(), Some(second));
    let back = repo.checkout(&second).unwrap();
    for i in [0, 150, 299] {
        assert_eq!(back.find(&["big", &format!("{i:03}")]).unwrap().unwrap().as_bytes(), &value(i)[..]);
    }
    assert!(repo.fsck().is_clean());
}
