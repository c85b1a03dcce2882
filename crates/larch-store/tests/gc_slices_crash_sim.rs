//! Crash safety of a sliced GC (issue 10 point 5, docs/gc-design.md §6 and §13 "Slices, as
//! built"), simulated on the fault-injecting storage with 1 KiB chunks: a GC whose slice budget is
//! a few chunks' live bytes runs in several slices (each copied, switched, its chunks deleted,
//! then the next started by `gc_wait`); the script is cut at every write, sync and directory
//! operation from the GC's start on, and each cut "reboots" in every survival mode. Reopened as
//! the writer, the store must stand before the GC (every commit readable) or after its first
//! slice (the commits before the GC commit `Collected`), with some images between two slices
//! (old chunks below the GC commit still whole), hold a prefix of the script's commits that read
//! back as their models, be fsck-clean with no file the state does not name, and take new
//! commits and a new GC that collects the rest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::crash::{
    SURVIVALS, assert_no_chunk_below_first, commits_and_gc_after_crash, crash_options, head_count,
};
use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::FaultController;
use larch_store::{GcPolicy, Repo, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

/// The GC keeps this commit; it starts before block `KEEP + 3`.
const KEEP: usize = 9;
const BLOCKS: usize = 14;

/// Slices of about 2 KiB of copy; no merging, no deep marks.
fn sliced() -> GcPolicy {
    GcPolicy {
        slice_percent: 1,
        slice_min_bytes: 2048,
        min_garbage_percent: 101,
        deep_growth_percent: 1_000_000,
        deep_every: 0,
        ..GcPolicy::default()
    }
}

struct Run {
    acked: Vec<(Hash, Model)>,
    /// Operations done when the GC started (in the run without a cut).
    ops_at_gc: Option<u64>,
    /// Slices the GC took (in the run without a cut).
    slices: u32,
}

fn run_script(controller: &Arc<FaultController>) -> Run {
    let (mut rng, _) = seeded_rng("gc_slices_crash_script", 13);
    let mut run = Run { acked: Vec::new(), ops_at_gc: None, slices: 0 };
    let Ok(mut repo) = Repo::open_files(controller.files(), true, crash_options(), None) else { return run };
    repo.set_gc_policy(sliced());
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..BLOCKS {
        for _ in 0..20 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = run.acked.last().map(|(hash, _)| *hash).into_iter().collect();
        match repo.commit(&tree, &parents, info(block as u64)) {
            Ok(hash) => run.acked.push((hash, model.clone())),
            Err(_) => return run,
        }
        if block == KEEP + 2 {
            run.ops_at_gc = Some(controller.ops());
            // All the slices, one after the other, deletions on this thread (a fixed order of
            // operations, hence of cuts).
            match repo.gc(&run.acked[KEEP].0) {
                Ok(report) => run.slices = report.slice + 1,
                Err(_) => return run,
            }
        }
    }
    let _ = repo.close();
    run
}

/// Checks the reopened store; returns whether it stands after the GC's first slice, and whether
/// between two slices (chunks below `first_after` still there).
fn check(
    controller: &Arc<FaultController>,
    all: &[(Hash, Model)],
    run: &Run,
    first_after: u64,
    what: &str,
) -> (bool, bool) {
    let repo = Repo::open_files(controller.files(), true, crash_options(), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let count = head_count(&repo, all, run.acked.len(), what);
    let after = matches!(repo.checkout(&all[0].0), Err(StoreError::Collected { .. }));
    for (i, (hash, model)) in all[..count].iter().enumerate() {
        let expect_collected = after && i < KEEP;
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(!expect_collected, "{what}: commit {i} survived the GC");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
            }
            Err(StoreError::Collected { .. }) => assert!(expect_collected, "{what}: commit {i} collected"),
            Err(e) => panic!("{what}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
    // No file the state does not name: segments exactly those named, no chunk below the first.
    let names = controller.names();
    let segments: Vec<String> = names.iter().filter(|name| name.starts_with("seg.")).cloned().collect();
    let named: Vec<String> = repo.segment_files().into_iter().map(|(name, ..)| name).collect();
    assert_eq!(segments, named, "{what}");
    assert_no_chunk_below_first(&repo, &names, what);
    let first_start = repo.chunk_files().first().map(|(_, start, _)| *start).unwrap();
    let between = after && first_start < first_after;
    // New commits and a new GC (unsliced) succeed; the rest of the old chunks goes.
    let tree = repo.checkout(&all[count - 1].0).unwrap();
    commits_and_gc_after_crash(repo, tree, Some(all[count - 1].0), what, |repo, keep| {
        repo.set_gc_policy(GcPolicy { slice_percent: 0, ..sliced() });
        repo.gc(keep).unwrap();
    });
    (after, between)
}

#[test]
fn every_cut_of_a_sliced_gc_leaves_the_store_before_or_after_a_slice() {
    let clean = FaultController::new();
    let all = run_script(&clean);
    assert_eq!(all.acked.len(), BLOCKS);
    assert!(all.slices >= 3, "the GC took {} slices only", all.slices);
    let first_after = {
        let repo = Repo::open_files(clean.files(), false, crash_options(), None).unwrap();
        repo.chunk_files().first().map(|(_, start, _)| *start).unwrap()
    };
    let start = all.ops_at_gc.expect("the GC started");
    let total_ops = clean.ops();
    let (mut before, mut after, mut between) = (0, 0, 0);
    for cut in start..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let run = run_script(&controller);
        assert!(controller.has_crashed(), "cut {cut} never happened");
        for survival in &SURVIVALS {
            let what = format!("cut {cut} of {start}..{total_ops}, {survival:?}");
            match check(&controller.restart(*survival), &all.acked, &run, first_after, &what) {
                (false, _) => before += 1,
                (true, mid) => {
                    after += 1;
                    between += usize::from(mid);
                }
            }
        }
    }
    assert!(
        before > 0 && after > 0 && between > 0,
        "{before} before, {after} after ({between} between slices)"
    );
    eprintln!(
        "sliced gc crash sim ({} slices): cuts {start}..{total_ops}, {before} images before, {after} after ({between} between slices)",
        all.slices
    );
}
