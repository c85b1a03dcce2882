//! Crash safety of garbage collection, simulated (issue 10 point 5, docs/gc-design.md §8): the
//! script "commits, GC start, worker done, commits (the first switches), commits, close" runs on
//! the fault-injecting storage, with chunks of 1 KiB (every commit rolls, so the GC has chunks to
//! collect), cut at every write, sync and directory operation in turn (the worker's segment
//! writes, its file and directory syncs, the switch's slot, the deletions). After each cut the store
//! "reboots" with what survives (a process crash, only durable bytes, seeded page losses); reopened
//! as the writer it must stand before or after the GC: the commits it holds are exactly a prefix of
//! the script's, every one at or after the GC commit reads back as its model, every one before it
//! either reads back (before the GC) or is `Collected` (after it); fsck is clean; no file the state
//! does not name is left; a new commit and a new GC succeed.
//!
//! The worker runs on its own thread: the script waits for it (`gc_start`, then polling its
//! progress before the next commit) and deletes through `gc_wait` after the switching commit, so
//! that the order of operations, hence every cut, is the same in every run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::crash::{
    SURVIVALS, assert_no_chunk_below_first, commits_and_gc_after_crash, crash_options, head_count,
};
use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::FaultController;
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

const BEFORE: usize = 6;
const GC_AT: usize = 3;
const AFTER: usize = 3;

struct Run {
    acked: Vec<(Hash, Model)>,
    /// Whether `gc_start` returned.
    gc_started: bool,
}

fn run_script(files: StoreFiles) -> Run {
    let (mut rng, _) = seeded_rng("gc_crash_script", 7);
    let mut run = Run { acked: Vec::new(), gc_started: false };
    let Ok(mut repo) = Repo::open_files(files, true, crash_options(), None) else { return run };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..BEFORE + AFTER {
        if block == BEFORE {
            let Some((gc_commit, _)) = run.acked.get(GC_AT) else { return run };
            if repo.gc_start(gc_commit).is_err() {
                return run;
            }
            run.gc_started = true;
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
                // The tree stays in memory (after a cut, reads of the store fail).
                run.acked.push((hash, model.clone()));
                if block == BEFORE && repo.gc_wait().is_err() {
                    // This commit switched; `gc_wait` publishes once more and unlinks the
                    // retired files on this thread (a commit's publish would unlink them on a
                    // background thread, whose operations would not come in a fixed order).
                    return run;
                }
            }
            Err(_) => return run,
        }
    }
    let _ = repo.gc_finish();
    let _ = repo.close();
    run
}

/// Checks the reopened store; returns whether it stands after the GC.
fn check(controller: &Arc<FaultController>, all: &[(Hash, Model)], run: &Run, what: &str) -> bool {
    let repo = Repo::open_files(controller.files(), true, crash_options(), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let count = head_count(&repo, all, run.acked.len(), what);
    let gc_commit = all[GC_AT].0;
    let after_gc = matches!(repo.checkout(&all[0].0), Err(StoreError::Collected { .. }));
    if after_gc {
        assert!(run.gc_started, "{what}: collected without a GC");
    }
    for (i, (hash, model)) in all[..count].iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(!after_gc || i >= GC_AT, "{what}: commit {i} survived the GC");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
            }
            Err(StoreError::Collected { oldest_kept, .. }) => {
                assert!(after_gc && i < GC_AT, "{what}: commit {i} collected");
                assert_eq!(oldest_kept, gc_commit);
            }
            Err(e) => panic!("{what}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
    // No orphan: every segment is named, no chunk below the first live one.
    let names = controller.names();
    let segments: Vec<&String> = names.iter().filter(|name| name.starts_with("seg.")).collect();
    assert_eq!(segments.len(), usize::from(after_gc), "{what}: segments {segments:?}");
    assert_no_chunk_below_first(&repo, &names, what);
    // New commits and a new GC succeed.
    let tree = match count {
        0 => repo.empty_tree(),
        n => repo.checkout(&all[n - 1].0).unwrap(),
    };
    let parent = count.checked_sub(1).map(|n| all[n].0);
    commits_and_gc_after_crash(repo, tree, parent, what, |repo, keep| {
        repo.gc(keep).unwrap();
    });
    after_gc
}

#[test]
fn every_cut_of_a_gc_leaves_the_store_before_or_after_it() {
    let clean = FaultController::new();
    let all = run_script(clean.files());
    assert_eq!(all.acked.len(), BEFORE + AFTER);
    assert!(clean.names().iter().any(|name| name.starts_with("seg.")), "the clean run collected nothing");
    // The script's first chunk is mostly live: the GC keeps it in place (read as a segment), so
    // the cuts also cover that switch.
    assert!(clean.names().iter().any(|name| name == "chunk.000000"), "the GC copied the first chunk");
    let total_ops = clean.ops();
    let (mut before, mut after) = (0, 0);
    for cut in 0..total_ops {
        let controller = FaultController::new();
        controller.crash_at(Some(cut));
        let run = run_script(controller.files());
        assert!(controller.has_crashed(), "cut {cut} never happened");
        for survival in &SURVIVALS {
            let what = format!("cut {cut} of {total_ops}, {survival:?}");
            if check(&controller.restart(*survival), &all.acked, &run, &what) {
                after += 1;
            } else {
                before += 1;
            }
        }
    }
    // Both outcomes occurred: cuts before the switch and after it.
    assert!(before > 0 && after > 0, "{before} before, {after} after");
    eprintln!("gc crash sim: {total_ops} cuts, {before} images before the GC, {after} after");
}
