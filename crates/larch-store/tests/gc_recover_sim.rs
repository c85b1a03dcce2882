//! Recovery without a valid control slot at every cut of a GC, simulated (docs/gc-design.md §8,
//! *`larch recover`*): the script "commits, GC start, worker done, commits (the first switches),
//! commits, close" runs on the fault-injecting storage with 1 KiB chunks, cut at every write,
//! sync and directory operation in turn; after each cut the store "reboots" with what survives (a
//! process crash, or only the durable bytes), then both control slots and the confirmation are
//! destroyed. `plan_recovery_files` must rebuild a layout from the chunk and segment files and
//! publish a head no older than the last acknowledged commit but one; reopened as the writer, every
//! commit it holds at or after the GC commit reads back as its model, every one before it reads back
//! (the pre-GC layout) or is `Collected`; fsck is clean; a new commit and a new GC succeed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::{FaultController, Survival};
use larch_store::testing::plan_recovery_files;
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

const BEFORE: usize = 6;
const GC_AT: usize = 3;
const AFTER: usize = 3;

fn options() -> RepoOptions {
    RepoOptions {
        sync: SyncPolicy::Commit,
        chunk_bytes: 1024,
        cache_bytes: 1 << 20,
        ..RepoOptions::default()
    }
}

/// The script's acknowledged commits with their models; its first block makes `first_ops`
/// random operations (the others 15, and a large value overwritten at every block: their chunks
/// are mostly garbage by the GC commit): with many, the first chunk stays mostly live and the GC
/// keeps it in place. Then `cold_blocks` blocks add 40 values each that nothing changes again:
/// their chunks are mostly live, and the GC keeps them in place with the first one.
fn run_script(files: StoreFiles, first_ops: usize, cold_blocks: usize) -> Vec<(Hash, Model)> {
    let (mut rng, _) = seeded_rng("gc_recover_sim_script", 11);
    let mut acked = Vec::new();
    let Ok(mut repo) = Repo::open_files(files, true, options(), None) else { return acked };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..BEFORE + AFTER {
        if block == BEFORE {
            let Some((gc_commit, _)) = acked.get(GC_AT) else { return acked };
            if repo.gc_start(gc_commit).is_err() {
                return acked;
            }
            while repo.gc_progress().is_some_and(|p| p.phase != larch_store::GcPhase::WaitingForSwitch) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        if (1..=cold_blocks).contains(&block) {
            for i in 0..40 {
                let path = [b"cold".to_vec(), format!("b{block}").into_bytes(), format!("v{i}").into_bytes()];
                let value = format!("cold {block} {i} {}", "c".repeat(40)).into_bytes();
                tree.add(&path, value.clone()).unwrap();
                model.add(&path, value);
            }
        } else {
            for _ in 0..if block == 0 { first_ops } else { 15 } {
                random_op(&mut rng, &mut tree, &mut model);
            }
        }
        if block > cold_blocks {
            let path = [b"churn".to_vec(), b"c".to_vec()];
            let value = format!("block {block} {}", "q".repeat(30_000)).into_bytes();
            tree.add(&path, value.clone()).unwrap();
            model.add(&path, value);
        }
        let parents: Vec<Hash> = acked.last().map(|(hash, _)| *hash).into_iter().collect();
        match repo.commit(&tree, &parents, info(block as u64)) {
            Ok(hash) => {
                acked.push((hash, model.clone()));
                // Deletion on this thread, in a fixed order (as in gc_crash_sim.rs).
                if block == BEFORE && repo.gc_wait().is_err() {
                    return acked;
                }
            }
            Err(_) => return acked,
        }
    }
    let _ = repo.gc_finish();
    let _ = repo.close();
    acked
}

/// Destroys the control file, recovers, and checks the store; returns whether the recovered
/// layout is a collected one (`None`: no commit to recover, allowed only when at most one was
/// acknowledged).
fn recover_and_check(
    controller: &Arc<FaultController>,
    all: &[(Hash, Model)],
    acked: usize,
    what: &str,
) -> Option<bool> {
    let files = controller.files();
    files.control.write_at(0, &vec![0u8; 3 * 4096]).unwrap();
    files.control.sync().unwrap();
    assert!(Repo::open_files(controller.files(), false, options(), None).is_err(), "{what}: opens");
    let plan = match plan_recovery_files(controller.files()) {
        Ok(plan) => plan,
        Err(e) if acked <= 1 => {
            assert!(
                matches!(e, StoreError::NotAStore { .. } | StoreError::Unrecoverable { .. }),
                "{what}: {e}"
            );
            return None;
        }
        Err(e) => panic!("{what}: {e}"),
    };
    let Some(chosen) = plan.chosen.clone() else {
        assert!(acked <= 1, "{what}: no complete commit: {:?} {:?}", plan.rejected, plan.rebuilt_layout);
        assert!(plan.apply_to(&controller.files()).is_err(), "{what}: nothing to publish");
        return None;
    };
    let count = all.iter().position(|(hash, _)| *hash == chosen.hash).expect("a script commit") + 1;
    assert!(count + 1 >= acked, "{what}: recovered to commit {count}, {acked} acknowledged");
    plan.apply_to(&controller.files()).unwrap();

    let mut repo = Repo::open_files(controller.files(), true, options(), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    assert_eq!(repo.head(), Some(chosen.hash), "{what}");
    let collected = repo.gc_generation() > 0;
    for (i, (hash, model)) in all[..count].iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(!collected || i >= GC_AT, "{what}: commit {i} survived the GC");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
            }
            Err(StoreError::Collected { oldest_kept, .. }) => {
                assert!(collected && i < GC_AT, "{what}: commit {i} collected");
                assert_eq!(oldest_kept, all[GC_AT].0, "{what}");
            }
            Err(e) => panic!("{what}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
    // New commits and a new GC succeed.
    let mut tree = repo.checkout(&chosen.hash).unwrap();
    let mut parent = chosen.hash;
    let mut hashes = Vec::new();
    for i in 0..3u8 {
        tree.add(&["after", "recovery"], vec![i; 50]).unwrap();
        parent = repo.commit(&tree, &[parent], info(1000 + u64::from(i))).unwrap();
        hashes.push(parent);
    }
    repo.gc(&hashes[1]).unwrap();
    assert!(matches!(repo.checkout(&hashes[0]), Err(StoreError::Collected { .. })), "{what}");
    assert!(repo.fsck().is_clean(), "{what}: after a new GC");
    repo.close().unwrap();
    Some(collected)
}

#[test]
fn every_cut_of_a_gc_recovers_without_a_control_file() {
    every_cut_recovers(15, 0, 0);
}

#[test]
fn every_cut_of_a_gc_keeping_the_first_chunk_in_place_recovers_without_a_control_file() {
    every_cut_recovers(400, 0, 1);
}

#[test]
fn every_cut_of_a_gc_keeping_the_first_chunks_in_place_recovers_without_a_control_file() {
    every_cut_recovers(400, 1, 2);
}

/// `kept`: how many chunks the clean run's GC keeps in place (the first ones).
fn every_cut_recovers(first_ops: usize, cold_blocks: usize, kept: u32) {
    let clean = FaultController::new();
    let all = run_script(clean.files(), first_ops, cold_blocks);
    assert_eq!(all.len(), BEFORE + AFTER);
    assert!(
        clean.names().iter().any(|name| name.starts_with("seg.")),
        "the clean run collected nothing: {:?}",
        clean.names()
    );
    for seq in 0..GC_AT as u32 {
        let present = clean.names().iter().any(|name| *name == format!("chunk.{seq:06}"));
        assert_eq!(present, seq < kept, "chunk {seq} kept in place: {:?}", clean.names());
    }
    let total_ops = clean.ops();
    let (mut pre_gc, mut collected, mut nothing) = (0, 0, 0);
    for cut in 0..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let acked = run_script(controller.files(), first_ops, cold_blocks).len();
        assert!(controller.has_crashed(), "cut {cut} never happened");
        for survival in [Survival::Written, Survival::Durable] {
            let what = format!("cut {cut} of {total_ops}, {survival:?}");
            match recover_and_check(&controller.restart(survival), &all, acked, &what) {
                Some(true) => collected += 1,
                Some(false) => pre_gc += 1,
                None => nothing += 1,
            }
        }
    }
    // Both layouts were rebuilt: before the retired chunks went (pre-GC), and after.
    assert!(pre_gc > 0 && collected > 0, "{pre_gc} pre-GC, {collected} collected");
    eprintln!(
        "gc recover sim: {total_ops} cuts, {pre_gc} recovered pre-GC, {collected} collected, {nothing} before \
         any commit"
    );
    // And the clean run's store recovers to its last commit, collected.
    let restarted = clean.restart(Survival::Durable);
    assert_eq!(recover_and_check(&restarted, &all, all.len(), "clean run"), Some(true));
}
