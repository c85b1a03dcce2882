//! A writer's open cut by a power loss loses nothing (issue 39 item 2, docs/store.md *A writer's
//! open*). The GC script of `gc_crash_sim` (commits, GC start, worker done, commits, the first of
//! which switches, more commits, close) runs on the fault-injecting storage with 1 KiB chunks and
//! is cut at every operation; the writer's process dies there and its page cache survives as a
//! page cache ([`Survival::ProcessCrash`]: written bytes are seen, only synced ones are durable).
//! Cuts after the switch leave a newest slot after the GC (written, perhaps not yet synced or
//! confirmed) beside an older slot naming the chunks the GC retired. A new writer opens that
//! image, and its open is cut at each of its own writes, syncs, creations and unlinks in turn,
//! followed by a power loss (durable bytes only, seeded page losses, or everything written). The
//! image must open as a writer with every commit the script acknowledged (reading back as its
//! model, or `Collected` below the GC commit when the store stands after the GC), fsck-clean.
//!
//! Before the fix, the open unlinked the retired chunks (and synced the directory) before it
//! synced an unconfirmed newest slot: a power loss between the two left the older slot naming
//! missing chunks (`NeedsRecovery`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::crash::crash_options;
use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::{FaultController, Survival};
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::sync::Arc;

const BEFORE: usize = 6;
const GC_AT: usize = 3;
const AFTER: usize = 3;

/// The power losses that cut the open: durable bytes only, seeded page losses, and (a second
/// process crash) everything written.
const LOSSES: [Survival; 4] =
    [Survival::Durable, Survival::Pages(1), Survival::PagesZeroed(3), Survival::Written];

/// The script of `gc_crash_sim`; returns the commits it acknowledged and the operation count at
/// which the GC started.
fn run_script(files: StoreFiles, controller: &FaultController) -> (Vec<(Hash, Model)>, Option<u64>) {
    let (mut rng, _) = seeded_rng("open_crash_script", 7);
    let mut acked: Vec<(Hash, Model)> = Vec::new();
    let mut gc_from = None;
    let Ok(mut repo) = Repo::open_files(files, true, crash_options(), None) else { return (acked, gc_from) };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..BEFORE + AFTER {
        if block == BEFORE {
            let Some((gc_commit, _)) = acked.get(GC_AT) else { return (acked, gc_from) };
            gc_from = Some(controller.ops());
            if repo.gc_start(gc_commit).is_err() {
                return (acked, gc_from);
            }
            while repo.gc_progress().is_some_and(|p| p.phase != larch_store::GcPhase::WaitingForSwitch) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        for _ in 0..15 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = acked.last().map(|(hash, _)| *hash).into_iter().collect();
        match repo.commit(&tree, &parents, info(block as u64)) {
            Ok(hash) => {
                acked.push((hash, model.clone()));
                // The switching commit: unlink the retired files on this thread (fixed order).
                if block == BEFORE && repo.gc_wait().is_err() {
                    return (acked, gc_from);
                }
            }
            Err(_) => return (acked, gc_from),
        }
    }
    let _ = repo.gc_finish();
    let _ = repo.close();
    (acked, gc_from)
}

/// Opens `controller`'s image as a writer and checks that it holds every acknowledged commit.
/// Returns whether it stands after the GC.
fn check(controller: &Arc<FaultController>, all: &[(Hash, Model)], acked: usize, what: &str) -> bool {
    let repo = Repo::open_files(controller.files(), true, crash_options(), None)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let after_gc = matches!(repo.checkout(&all[0].0), Err(StoreError::Collected { .. }));
    for (i, (hash, model)) in all[..acked].iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}"),
            Err(StoreError::Collected { .. }) => {
                assert!(after_gc && i < GC_AT, "{what}: acknowledged commit {i} collected");
            }
            Err(e) => panic!("{what}: acknowledged commit {i} lost: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
    drop(repo);
    after_gc
}

#[test]
fn every_cut_of_a_writers_open_after_a_gc_keeps_every_acknowledged_commit() {
    let clean = FaultController::new();
    let (all, gc_from) = run_script(clean.files(), &clean);
    assert_eq!(all.len(), BEFORE + AFTER);
    let (gc_from, total_ops) = (gc_from.expect("the GC started"), clean.ops());
    let (mut images, mut opens, mut after_gc, mut older_names_retired) = (0, 0, 0, 0);
    // Cuts of the script from the GC's start on (before it, no slot names a retired chunk).
    for cut in gc_from..total_ops {
        let crashed = FaultController::new();
        crashed.crash_at(Some(cut));
        let (acked, _) = run_script(crashed.files(), &crashed);
        assert!(crashed.has_crashed(), "cut {cut} never happened");
        let image = crashed.restart(Survival::ProcessCrash);
        // The open uncut: how many operations it takes.
        let uncut = image.restart(Survival::ProcessCrash);
        let names_before = uncut.names();
        drop(
            Repo::open_files(uncut.files(), true, crash_options(), None)
                .unwrap_or_else(|e| panic!("script cut {cut}: the open of the crashed image failed: {e}")),
        );
        if uncut.names().len() < names_before.len() {
            older_names_retired += 1;
        }
        let open_ops = uncut.ops();
        for open_cut in 0..open_ops {
            let opening = image.restart(Survival::ProcessCrash);
            opening.crash_at(Some(open_cut));
            // Cut inside the open, or in what its handle does when dropped (its last sync).
            drop(Repo::open_files(opening.files(), true, crash_options(), None));
            if !opening.has_crashed() {
                continue;
            }
            opens += 1;
            for loss in LOSSES {
                let what =
                    format!("script cut {cut} of {total_ops}, open cut {open_cut} of {open_ops}, {loss:?}");
                images += 1;
                if check(&opening.restart(loss), &all, acked.len(), &what) {
                    after_gc += 1;
                }
            }
        }
    }
    // The scenario of the issue occurred: opens that unlinked the files a GC retired.
    assert!(older_names_retired > 0, "no open removed a retired file");
    assert!(after_gc > 0, "no image stands after the GC");
    eprintln!(
        "open crash sim: {} script cuts, {opens} cut opens ({older_names_retired} removing files), \
         {images} images, {after_gc} after the GC",
        total_ops - gc_from
    );
}

/// A writer that falls back to the older slot (the newest is not confirmed and does not load:
/// here its head chunk's header is damaged) deletes nothing: the newest slot's chunk above the
/// older slot's head stays, and the store opens on the older state.
#[test]
fn a_writer_standing_on_the_older_slot_deletes_no_file() {
    let controller = FaultController::new();
    let mut repo = Repo::open_files(controller.files(), true, crash_options(), None).unwrap();
    let (mut rng, _) = seeded_rng("open_fallback", 1);
    let (mut tree, mut model) = (repo.empty_tree(), Model::new());
    let mut hashes: Vec<Hash> = Vec::new();
    for block in 0..3u64 {
        for _ in 0..15 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(block)).unwrap());
    }
    // The writer's process dies (its drop would publish once more into the older slot).
    let controller = controller.restart(Survival::Written);
    drop(repo);
    let files = controller.files();
    let head = controller.names().into_iter().filter(|name| name.starts_with("chunk.")).max().unwrap();
    // The newest slot's head chunk (every commit rolls), damaged; the confirmation record erased.
    files.dir.open(&head, true).unwrap().write_at(0, &[0xff; 8]).unwrap();
    let confirm = larch_store::testing::control::CONFIRM_AT;
    files.control.write_at(confirm, &[0; 20]).unwrap();
    let repo = Repo::open_files(controller.files(), true, crash_options(), None).unwrap();
    assert_eq!(repo.head(), hashes.get(1).copied(), "the writer stands on the older slot");
    assert!(controller.names().contains(&head), "the fallback open deleted {head}");
    drop(repo);
}
