//! Crash safety of a compacting GC (issue 10 point 5, docs/gc-design.md §6 and §8), simulated on
//! the fault-injecting storage with 1 KiB chunks: three GCs that never merge leave three segments,
//! then a compacting GC (`GcOptions::compact`) merges all of them into a new one; the script is cut
//! at every write, sync and directory operation from the compacting GC's start on (its segment
//! writes and syncs, the switch's slot, the deletions of the merged segments and chunks, the later
//! commits), and each cut "reboots" in every survival mode. Reopened as the writer, the store must
//! stand before the compacting GC (three segments, the commits since the third GC readable) or
//! after it (one segment, those commits `Collected`), hold a prefix of the script's commits that
//! read back as their models, be fsck-clean with no file the state does not name, and take new
//! commits and a new GC.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::crash::{
    SURVIVALS, assert_no_chunk_below_first, commits_and_gc_after_crash, crash_options, head_count,
};
use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::FaultController;
use larch_store::{GcOptions, GcPolicy, Repo, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

/// The commits kept by the three ordinary GCs, made after the block of the same index + 2.
const GCS: [usize; 3] = [2, 5, 8];
/// The compacting GC's commit; it starts before block `COMPACT + 2`.
const COMPACT: usize = 11;
const BLOCKS: usize = 16;

fn never_merge() -> GcPolicy {
    GcPolicy {
        min_garbage_percent: 101,
        deep_growth_percent: 1_000_000,
        deep_every: 0,
        ..GcPolicy::default()
    }
}

struct Run {
    acked: Vec<(Hash, Model)>,
    /// Operations done when the compacting GC started (in the run without a cut).
    ops_at_compact: Option<u64>,
}

fn run_script(controller: &Arc<FaultController>) -> Run {
    let (mut rng, _) = seeded_rng("gc_compact_crash_script", 11);
    let mut run = Run { acked: Vec::new(), ops_at_compact: None };
    let Ok(mut repo) = Repo::open_files(controller.files(), true, crash_options(), None) else { return run };
    repo.set_gc_policy(never_merge());
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..BLOCKS {
        if let Some(&keep) = GCS.iter().find(|keep| **keep + 2 == block) {
            let Some((commit, _)) = run.acked.get(keep) else { return run };
            if repo.gc(commit).is_err() {
                return run;
            }
        }
        if block == COMPACT + 2 {
            run.ops_at_compact = Some(controller.ops());
            let Some((commit, _)) = run.acked.get(COMPACT) else { return run };
            let compact = GcPolicy { compact_budget_percent: 1_000, ..never_merge() };
            repo.set_gc_policy(compact);
            if repo.gc_start_with(commit, GcOptions { compact: true }).is_err() {
                return run;
            }
            // Wait for the worker without switching: the next commit switches.
            while repo.gc_progress().is_some_and(|p| p.phase != larch_store::GcPhase::WaitingForSwitch) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        for _ in 0..15 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = run.acked.last().map(|(hash, _)| *hash).into_iter().collect();
        match repo.commit(&tree, &parents, info(block as u64)) {
            Ok(hash) => {
                run.acked.push((hash, model.clone()));
                // The switching commit: `gc_wait` deletes on this thread (a fixed order of
                // operations, hence of cuts).
                if block == COMPACT + 2 && repo.gc_wait().is_err() {
                    return run;
                }
            }
            Err(_) => return run,
        }
    }
    let _ = repo.close();
    run
}

/// Checks the reopened store; returns whether it stands after the compacting GC.
fn check(
    controller: &Arc<FaultController>,
    all: &[(Hash, Model)],
    run: &Run,
    expected_after: &[String],
    what: &str,
) -> bool {
    let repo = Repo::open_files(controller.files(), true, crash_options(), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let count = head_count(&repo, all, run.acked.len(), what);
    let last_gc = GCS[GCS.len() - 1];
    let after = matches!(repo.checkout(&all[last_gc].0), Err(StoreError::Collected { .. }));
    for (i, (hash, model)) in all[..count].iter().enumerate() {
        let expect_collected = i < last_gc || (after && i < COMPACT);
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(!expect_collected, "{what}: commit {i} survived its GC");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
            }
            Err(StoreError::Collected { .. }) => assert!(expect_collected, "{what}: commit {i} collected"),
            Err(e) => panic!("{what}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
    // The segments: the three of the ordinary GCs before, those of the run without a cut after;
    // no orphan chunk either.
    let names = controller.names();
    let segments: Vec<String> = names.iter().filter(|name| name.starts_with("seg.")).cloned().collect();
    let expected: Vec<String> = if after {
        expected_after.to_vec()
    } else {
        vec!["seg.000001".into(), "seg.000002".into(), "seg.000003".into()]
    };
    assert_eq!(segments, expected, "{what}");
    let named: Vec<String> = repo.segment_files().into_iter().map(|(name, ..)| name).collect();
    assert_eq!(named, expected, "{what}");
    assert_no_chunk_below_first(&repo, &names, what);
    // New commits and a new GC (the default policy) succeed.
    let tree = repo.checkout(&all[count - 1].0).unwrap();
    commits_and_gc_after_crash(repo, tree, Some(all[count - 1].0), what, |repo, keep| {
        repo.gc_with(keep, GcOptions { compact: true }).unwrap();
    });
    after
}

#[test]
fn every_cut_of_a_compacting_gc_leaves_the_store_before_or_after_it() {
    let clean = FaultController::new();
    let all = run_script(&clean);
    assert_eq!(all.acked.len(), BLOCKS);
    // The compacting GC merged at least two of the three segments into `seg.000004`.
    let expected_after: Vec<String> =
        clean.names().into_iter().filter(|name| name.starts_with("seg.")).collect();
    assert_eq!(expected_after.last().map(String::as_str), Some("seg.000004"), "{expected_after:?}");
    assert!(expected_after.len() <= 2, "the compacting GC merged too little: {expected_after:?}");
    let start = all.ops_at_compact.expect("the compacting GC started");
    let total_ops = clean.ops();
    let (mut before, mut after) = (0, 0);
    for cut in start..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let run = run_script(&controller);
        assert!(controller.has_crashed(), "cut {cut} never happened");
        for survival in &SURVIVALS {
            let what = format!("cut {cut} of {start}..{total_ops}, {survival:?}");
            if check(&controller.restart(*survival), &all.acked, &run, &expected_after, &what) {
                after += 1;
            } else {
                before += 1;
            }
        }
    }
    assert!(before > 0 && after > 0, "{before} before, {after} after");
    eprintln!("compacting gc crash sim: cuts {start}..{total_ops}, {before} images before, {after} after");
}
