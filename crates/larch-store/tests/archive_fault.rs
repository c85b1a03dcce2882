//! Archive mode under simulated crashes: a store on the fault-injecting backend, with its lower
//! directory on a second fault controller (another disk), moves its sealed chunks with
//! `Repo::archive`, cut at every write, sync, creation, rename and removal of either directory in
//! turn. After each cut both "disks" reboot with what survives (a process crash, a power loss that
//! keeps only synced bytes and directory entries, seeded partial power losses); the store must open
//! as the writer (which cleans up), hold every commit equal to the model, pass fsck, complete the
//! move with a new `archive`, and read back again when reopened. Also: recovery of an archived
//! store whose `control` was lost keeps the archive flag.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::{FaultController, Survival};
use larch_store::testing::layered::LayeredDirectory;
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: 2048, cache_bytes: 1 << 16, ..RepoOptions::default() }
}

/// The store files of the upper controller, its directory layered over the lower controller's.
fn files(upper: &Arc<FaultController>, lower: &Arc<FaultController>) -> StoreFiles {
    let up = upper.files();
    StoreFiles {
        dir: Arc::new(LayeredDirectory::new(up.dir.clone(), lower.files().dir, "upper", "lower")),
        ..up
    }
}

fn open(upper: &Arc<FaultController>, lower: &Arc<FaultController>, writable: bool) -> Repo {
    Repo::open_files(files(upper, lower), writable, options(), None).unwrap()
}

fn check_all(repo: &Repo, commits: &[(Hash, Model)], what: &str) {
    for (i, (hash, model)) in commits.iter().enumerate() {
        let tree = repo.checkout(hash).unwrap_or_else(|e| panic!("{what}: commit {i}: {e}"));
        assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
    }
}

/// The chunk names a controller's directory holds.
fn chunks(controller: &FaultController) -> Vec<String> {
    controller.names().into_iter().filter(|name| name.starts_with("chunk.")).collect()
}

/// The store's two disks, its commits and the seed.
type Before = (Arc<FaultController>, Arc<FaultController>, Vec<(Hash, Model)>, u64);

/// The store before the move: 14 blocks over many 2 KiB chunks, closed.
fn store_before_the_move() -> Before {
    let (upper, lower) = (FaultController::new(), FaultController::new());
    let mut repo = open(&upper, &lower, true);
    let (mut rng, seed) = seeded_rng("archive_fault", 23);
    eprintln!("archive_fault: seed {seed} (replay with LARCH_SEED={seed})");
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut commits: Vec<(Hash, Model)> = Vec::new();
    for block in 0..14 {
        for _ in 0..25 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = commits.last().map(|(hash, _)| *hash).into_iter().collect();
        commits.push((repo.commit(&tree, &parents, info(block)).unwrap(), model.clone()));
    }
    repo.close().unwrap();
    (upper, lower, commits, seed)
}

/// Issue 39, the fault model: a move cut on either disk, the process dying with its page caches
/// kept as page caches (`Survival::ProcessCrash`), then the next writer's open (which cleans up
/// the move: removes `.tmp` copies, syncs lower copies, unlinks upper ones) cut at each of its
/// operations on either disk, then a power loss on both: the store opens with every commit,
/// fsck-clean, and completes the move.
#[test]
fn a_move_cut_then_a_cleanup_cut_by_a_power_loss_loses_nothing() {
    let (upper, lower, commits, seed) = store_before_the_move();
    let target = commits[10].0;
    let losses = [Survival::Durable, Survival::Pages(seed ^ 0x5eed)];
    let (mut images, mut cleanups) = (0, 0);
    // The move cut at every operation of each disk; the open after each cut at every third of its
    // operations, from a phase that turns with the move's cut (0, 1, 2, 0, ...): every operation of
    // the open is cut after one move cut in three, so that the product of the two stays the size of
    // a run that cuts each at every third operation.
    let moving = |side: &str, cut: u64| {
        let (up, low) = (upper.restart(Survival::Written), lower.restart(Survival::Written));
        let mut repo = open(&up, &low, true);
        let controller = if side == "upper" { &up } else { &low };
        controller.crash_at(Some(controller.ops() + cut));
        let failed = repo.archive(&target).is_err();
        drop(repo);
        failed.then(|| (up.restart(Survival::ProcessCrash), low.restart(Survival::ProcessCrash)))
    };
    for side in ["upper", "lower"] {
        for cut in 0.. {
            let Some((up, low)) = moving(side, cut) else { break };
            // The uncut open: its operations on each disk.
            let (u, l) = (up.restart(Survival::ProcessCrash), low.restart(Survival::ProcessCrash));
            drop(open(&u, &l, true));
            for (open_side, open_ops) in [("upper", u.ops()), ("lower", l.ops())] {
                for open_cut in (cut % 3..open_ops).step_by(3) {
                    let (u, l) = (up.restart(Survival::ProcessCrash), low.restart(Survival::ProcessCrash));
                    let controller = if open_side == "upper" { &u } else { &l };
                    controller.crash_at(Some(open_cut));
                    drop(Repo::open_files(files(&u, &l), true, options(), None));
                    if !controller.has_crashed() {
                        continue;
                    }
                    cleanups += 1;
                    for loss in losses {
                        let what = format!(
                            "seed {seed}, move {side} cut {cut}, open {open_side} cut {open_cut}/{open_ops}, {loss:?}"
                        );
                        let (u, l) = (u.restart(loss), l.restart(loss));
                        let mut writer = open(&u, &l, true);
                        check_all(&writer, &commits, &what);
                        assert!(writer.fsck().is_clean(), "{what}: {}", writer.fsck());
                        writer.archive(&target).unwrap_or_else(|e| panic!("{what}: archive again: {e}"));
                        images += 1;
                    }
                }
            }
        }
    }
    assert!(cleanups > 0, "no cut fell inside an open");
    eprintln!("{cleanups} cut opens, {images} images checked");
}

#[test]
fn every_cut_of_a_move_and_every_power_loss_opens_and_completes() {
    let (upper, lower, commits, seed) = store_before_the_move();
    let target = commits[10].0;

    // A clean run: how many operations the move makes on each disk, and what it leaves.
    let (up, low) = (upper.restart(Survival::Written), lower.restart(Survival::Written));
    let mut repo = open(&up, &low, true);
    let (up_start, low_start) = (up.ops(), low.ops());
    let report = repo.archive(&target).unwrap();
    let (up_ops, low_ops) = (up.ops() - up_start, low.ops() - low_start);
    drop(repo);
    assert!(report.chunks_moved >= 3, "seed {seed}: {report:?}");
    let moved: Vec<String> = (0..report.commit_chunk).map(|seq| format!("chunk.{seq:06}")).collect();
    assert_eq!(chunks(&low), moved, "seed {seed}");
    assert!(chunks(&up).iter().all(|name| !moved.contains(name)), "seed {seed}");
    eprintln!("a move of {} chunks: {up_ops} upper and {low_ops} lower operations", report.chunks_moved);

    let mut survivals = vec![Survival::Written, Survival::Durable];
    survivals.extend((0..3).map(|i| Survival::Pages(seed ^ (i * 7919 + 1))));
    let mut cuts = 0;
    for (side, ops) in [("upper", up_ops), ("lower", low_ops)] {
        for cut in 0..ops {
            let (up, low) = (upper.restart(Survival::Written), lower.restart(Survival::Written));
            let mut repo = open(&up, &low, true);
            let controller = if side == "upper" { &up } else { &low };
            controller.crash_at(Some(controller.ops() + cut));
            assert!(repo.archive(&target).is_err(), "{side} cut {cut}: the move went through");
            assert!(controller.has_crashed());
            drop(repo);
            for survival in &survivals {
                let what = format!("seed {seed}, {side} cut {cut}/{ops}, {survival:?}");
                let (up, low) = (up.restart(*survival), low.restart(*survival));
                // Once an upper copy is gone, the newest published state says so: opened without
                // the lower directory, the store refuses with `NeedsLower`, never a missing chunk.
                // (As the writer, which stands on the newest slot; a reader of files without a
                // path cannot tell a dead writer's unconfirmed slot from a live one's: on disk it
                // does, `docs/store.md`.)
                if moved.iter().any(|name| !chunks(&up).contains(name)) {
                    let error = Repo::open_files(up.files(), true, options(), None).unwrap_err();
                    assert!(matches!(error, StoreError::NeedsLower { .. }), "{what}: {error}");
                }
                let mut writer = open(&up, &low, true);
                assert!(
                    chunks(&low).iter().all(|name| !name.ends_with(".tmp")),
                    "{what}: {:?}",
                    chunks(&low)
                );
                check_all(&writer, &commits, &what);
                let fsck = writer.fsck();
                assert!(fsck.is_clean(), "{what}: {fsck}");
                writer.archive(&target).unwrap_or_else(|e| panic!("{what}: archive again: {e}"));
                writer.close().unwrap();
                assert_eq!(chunks(&low), moved, "{what}");
                assert!(chunks(&up).iter().all(|name| !moved.contains(name)), "{what}: {:?}", chunks(&up));
                check_all(&open(&up, &low, false), &commits, &format!("{what}, reopened"));
                cuts += 1;
            }
        }
    }
    assert_eq!(cuts, (up_ops + low_ops) as usize * survivals.len());
}

/// `control` lost after a move: recovery given the layered directory finds the chunks in both
/// directories, and the state it publishes keeps the archive flag (so the store still refuses to
/// open without its lower directory, rather than failing on a missing chunk).
#[test]
fn recovery_of_an_archived_store_keeps_the_archive_flag() {
    let (upper, lower) = (FaultController::new(), FaultController::new());
    let mut repo = open(&upper, &lower, true);
    let (mut rng, seed) = seeded_rng("archive_recover", 29);
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut commits: Vec<(Hash, Model)> = Vec::new();
    for block in 0..10 {
        for _ in 0..25 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = commits.last().map(|(hash, _)| *hash).into_iter().collect();
        commits.push((repo.commit(&tree, &parents, info(block)).unwrap(), model.clone()));
    }
    let report = repo.archive(&commits[8].0).unwrap();
    assert!(report.chunks_moved >= 2, "seed {seed}: {report:?}");
    repo.close().unwrap();
    upper.files().control.write_at(0, &[0u8; 8212]).unwrap();
    let plan = larch_store::testing::plan_recovery_files(files(&upper, &lower)).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), Some(commits[9].0), "seed {seed}");
    plan.apply_to(&files(&upper, &lower)).unwrap();
    let error = Repo::open_files(upper.files(), true, options(), None).unwrap_err();
    assert!(matches!(error, StoreError::NeedsLower { .. }), "seed {seed}: {error}");
    let repo = open(&upper, &lower, true);
    check_all(&repo, &commits, &format!("seed {seed}: recovered"));
    assert!(repo.fsck().is_clean());
}
