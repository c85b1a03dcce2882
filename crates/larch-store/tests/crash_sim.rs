//! Crash safety, simulated: a scripted sequence of commits runs on a fault-injecting storage that
//! cuts at every write and sync in turn (tearing the cut write), under each sync policy. After each
//! cut the store "reboots" with what survives: everything written (a process crash), only synced
//! bytes, or seeded subsets of the unsynced 4 KiB pages of every file (power losses that keep,
//! lose and reorder unsynced writes across files; lost pages keep their old bytes, or read as zeros
//! in files that keep their written length). Reopened, as a reader and as the writer, it must
//! stand on a published commit at least as new as the last one the policy made durable, hold
//! exactly the commits up to it (compared with the model), pass fsck, and accept new commits.
//! Never re-initialised, never wrong data. Also: a full disk fails a commit cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, try_random_op};
use larch_core::Hash;
use larch_store::testing::fault::{FaultController, Survival};
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

const COMMITS: u64 = 5;
/// Seeded power-loss variants tried at every cut.
const POWER_SEEDS: u64 = 4;

/// A sync policy and a chunk size: the script runs under each.
#[derive(Clone, Copy, Debug)]
struct Cfg {
    sync: SyncPolicy,
    chunk_bytes: u64,
}

impl Cfg {
    /// `sync` with the default chunk size (the script never rolls).
    fn of(sync: SyncPolicy) -> Cfg {
        Cfg { sync, chunk_bytes: larch_store::DEFAULT_CHUNK_BYTES }
    }
}

impl std::fmt::Display for Cfg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, chunks of {} bytes", self.sync, self.chunk_bytes)
    }
}

fn options(cfg: Cfg) -> RepoOptions {
    RepoOptions {
        sync: cfg.sync,
        chunk_bytes: cfg.chunk_bytes,
        cache_bytes: 1 << 20,
        ..RepoOptions::default()
    }
}

/// Opens the store on `controller`'s files (as the writer when `writable`), syncing every commit.
fn open(controller: &Arc<FaultController>, writable: bool) -> Repo {
    Repo::open_files(controller.files(), writable, options(Cfg::of(SyncPolicy::Commit)), None).unwrap()
}

/// What a run of the script acknowledged.
struct Run {
    /// Acknowledged commits with their models.
    acked: Vec<(Hash, Model)>,
    /// How many of them the policy had published (made durable) when the run stopped.
    published: usize,
    /// The same, at the publish before.
    previous: usize,
}

/// Runs the script (commits, then `close`) until it ends or fails.
fn run_script(files: StoreFiles, sync: Cfg) -> Run {
    let (mut rng, _) = seeded_rng("crash_script", 42);
    let mut run = Run { acked: Vec::new(), published: 0, previous: 0 };
    let Ok(mut repo) = Repo::open_files(files, true, options(sync), None) else {
        return run;
    };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut parents = vec![];
    for block in 0..COMMITS {
        for _ in 0..25 {
            // (Under `pipelined` a crash on the publisher thread may make a lazy load the first
            // call to fail: the process is dead.)
            if try_random_op(&mut rng, &mut tree, &mut model).is_err() {
                return run;
            }
        }
        match repo.commit(&tree, &parents, info(block)) {
            Ok(hash) => {
                run.acked.push((hash, model.clone()));
                let durable = match sync.sync {
                    SyncPolicy::Commit => true,
                    SyncPolicy::Every(n) => run.acked.len().is_multiple_of(n as usize),
                    SyncPolicy::Never => false,
                    // The commit before this one is durable; this one is in flight.
                    SyncPolicy::Pipelined => {
                        run.previous = run.published;
                        run.published = run.acked.len() - 1;
                        false
                    }
                };
                if durable {
                    run.previous = run.published;
                    run.published = run.acked.len();
                }
                parents = vec![hash];
                // Continue from a lazy checkout every other block, as a node does.
                if block % 2 == 0 {
                    // (Under `pipelined` a crash on the publisher thread may be the first to
                    // fail: the process is dead, this read fails too.)
                    match repo.checkout(&hash) {
                        Ok(checked_out) => tree = checked_out,
                        Err(_) => return run,
                    }
                }
            }
            Err(_) => return run,
        }
    }
    if repo.close().is_ok() && run.published < run.acked.len() {
        run.previous = run.published;
        run.published = run.acked.len();
    }
    run
}

/// Checks a reopened store against the clean run `all`: its head is `all[i]` for `i + 1` in
/// `floor..=ceiling` (or no head when `floor` is 0 and so allows), with exactly the commits up to
/// it, each reading back as its model, and fsck is clean.
fn check_state(repo: &Repo, all: &[(Hash, Model)], floor: usize, ceiling: usize, what: &str) -> usize {
    let count = match repo.head() {
        None => 0,
        Some(head) => {
            let position = all.iter().position(|(hash, _)| *hash == head);
            position.unwrap_or_else(|| panic!("{what}: head {head} was never committed")) + 1
        }
    };
    assert!(floor <= count && count <= ceiling, "{what}: {count} commits, expected {floor}..={ceiling}");
    assert_eq!(repo.commit_count(), count, "{what}");
    for (hash, model) in &all[..count] {
        assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "{what}");
    }
    let report = repo.fsck();
    // A reader may find a slot or the confirmation torn by the crash: reported as damage that lost
    // nothing (the writer's open rewrites it). Anything else is a problem.
    let torn_control = |problem: &larch_store::Problem| {
        !repo.is_writable()
            && problem.file == larch_store::FileKind::Control
            && problem.what.contains("nothing published was lost")
    };
    assert!(report.problems.iter().all(torn_control), "{what}: {report}");
    count
}

fn check_after_crash(
    controller: &Arc<FaultController>,
    all: &[(Hash, Model)],
    run: &Run,
    sync: Cfg,
    what: &str,
) {
    let ceiling = (run.acked.len() + 1).min(all.len());
    // A reader first (it changes nothing): a published commit. Through `open_files` (no directory
    // to probe for a live writer) it trusts only confirmed slots, and a power loss may have lost
    // the newest confirmation: it may then stand one publish behind (docs/store.md).
    match Repo::open_files(controller.files(), false, options(sync), None) {
        Ok(reader) => {
            check_state(&reader, all, run.previous, ceiling, &format!("{what}: reader"));
        }
        Err(StoreError::NotAStore { .. }) => assert_eq!(run.published, 0, "{what}: reader: store lost"),
        Err(e) => panic!("{what}: reader: {e}"),
    }
    let mut repo = Repo::open_files(controller.files(), true, options(sync), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let count = check_state(&repo, all, run.published, ceiling, what);
    // New commits succeed over whatever garbage the crash left past the published end.
    let mut tree = match count {
        0 => repo.empty_tree(),
        n => repo.checkout(&all[n - 1].0).unwrap(),
    };
    tree.add(&["after", "crash"], vec![5; 50]).unwrap();
    let parents: Vec<Hash> = all[..count].last().map(|(hash, _)| *hash).into_iter().collect();
    let next = repo.commit(&tree, &parents, info(1000)).unwrap();
    repo.close().unwrap();
    let repo = Repo::open_files(controller.files(), false, options(sync), None).unwrap();
    assert_eq!(repo.head(), Some(next), "{what}");
    assert_eq!(
        repo.checkout(&next).unwrap().find(&["after", "crash"]).unwrap().unwrap().as_bytes(),
        &[5; 50][..]
    );
    assert!(repo.fsck().is_clean(), "{what}: after new commit");
}

/// After a process crash every acknowledged commit is whole in the pack, published or staged:
/// `recover` finds the newest (or the one in flight, when its records were all written), publishes
/// it, and the store then holds exactly the commits up to it.
fn check_recovery_after_process_crash(
    controller: &Arc<FaultController>,
    all: &[(Hash, Model)],
    run: &Run,
    sync: Cfg,
    cut: u64,
) {
    let what = format!("{sync}, cut {cut}, recover");
    let plan = match larch_store::testing::plan_recovery_files(controller.files()) {
        Ok(plan) => plan,
        Err(StoreError::NotAStore { .. }) if run.acked.is_empty() => return,
        Err(e) => panic!("{what}: {e}"),
    };
    let Some(chosen) = plan.chosen.clone() else {
        assert!(run.acked.is_empty(), "{what}: nothing found: {plan:?}");
        return;
    };
    let count = all.iter().position(|(hash, _)| *hash == chosen.hash).expect("a script commit") + 1;
    assert!(
        run.acked.len() <= count && count <= (run.acked.len() + 1).min(all.len()),
        "{what}: chose commit {count} of {}",
        run.acked.len()
    );
    plan.apply_to(&controller.files()).unwrap();
    let repo = Repo::open_files(controller.files(), true, options(sync), None).unwrap();
    check_state(&repo, all, count, count, &what);
}

fn cut_everywhere(sync: Cfg) {
    let clean = FaultController::new();
    let all = run_script(clean.files(), sync);
    assert_eq!(all.acked.len() as u64, COMMITS);
    assert_eq!(all.published as u64, COMMITS);
    let total_ops = clean.ops();
    assert!(total_ops >= 3 * COMMITS, "only {total_ops} operations");
    let chunks = clean.names().iter().filter(|name| name.starts_with("chunk.")).count();
    if sync.chunk_bytes <= 1024 {
        assert!(chunks as u64 >= COMMITS - 1, "{sync}: only {chunks} chunk files");
    } else {
        assert_eq!(chunks, 1, "{sync}");
    }
    let mut survivals = vec![Survival::Written, Survival::Durable];
    survivals.extend((0..POWER_SEEDS).map(|seed| Survival::Pages(seed * 7919 + 1)));
    survivals.extend((0..2).map(|seed| Survival::PagesZeroed(seed * 104_729 + 3)));
    for cut in 0..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let run = run_script(controller.files(), sync);
        assert!(controller.has_crashed(), "cut {cut} never happened");
        assert_eq!(
            &all.acked[..run.acked.len()].iter().map(|c| c.0).collect::<Vec<_>>(),
            &run.acked.iter().map(|c| c.0).collect::<Vec<_>>()
        );
        for survival in &survivals {
            let what = format!("{sync}, cut {cut} of {total_ops}, {survival:?}");
            check_after_crash(&controller.restart(*survival), &all.acked, &run, sync, &what);
        }
        check_recovery_after_process_crash(
            &controller.restart(Survival::Written),
            &all.acked,
            &run,
            sync,
            cut,
        );
    }
}

#[test]
fn every_cut_and_power_loss_with_sync_at_every_commit() {
    cut_everywhere(Cfg::of(SyncPolicy::Commit));
}

#[test]
fn every_cut_and_power_loss_with_sync_every_2_commits() {
    cut_everywhere(Cfg::of(SyncPolicy::Every(2)));
}

#[test]
fn every_cut_and_power_loss_without_sync() {
    cut_everywhere(Cfg::of(SyncPolicy::Never));
}

/// Publishes on a publisher thread: the cuts fall on its syncs and slot writes while the script
/// writes the next commit's records, in an order that changes from run to run.
#[test]
fn every_cut_and_power_loss_with_pipelined_publishes() {
    cut_everywhere(Cfg::of(SyncPolicy::Pipelined));
}

#[test]
fn every_cut_and_power_loss_across_chunk_rolls_with_pipelined_publishes() {
    cut_everywhere(Cfg { sync: SyncPolicy::Pipelined, chunk_bytes: 1024 });
}

/// The same cuts with chunks of 1 KiB: every commit of the script rolls to a new chunk file, so
/// cuts fall on chunk creations, their first writes, the syncs of two chunks and the directory,
/// and power losses may lose a chunk file whose creation was not followed by a directory sync.
#[test]
fn every_cut_and_power_loss_across_chunk_rolls() {
    cut_everywhere(Cfg { sync: SyncPolicy::Commit, chunk_bytes: 1024 });
}

#[test]
fn every_cut_and_power_loss_across_chunk_rolls_with_sync_every_2_commits() {
    cut_everywhere(Cfg { sync: SyncPolicy::Every(2), chunk_bytes: 1024 });
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
