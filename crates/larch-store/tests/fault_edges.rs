//! The fault model's edges (issue 39, *The fault model*): torn writes at any 512-byte sector, sync
//! failures (`EIO`, `ENOSPC`) the process survives, and cuts inside `larch recover`'s apply, each
//! followed by a process crash then a power loss and compared with the commits the script
//! acknowledged: none is ever lost, none reads back wrong.
//!
//! The script: 6 commits of random operations (seeded) on 1 KiB chunks (every commit rolls), sync
//! policy `commit`: a commit that returned `Ok` is acknowledged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::crash::crash_options;
use common::{contents_of, info, random_op};
use larch_core::Hash;
use larch_store::testing::fault::{FaultController, Survival};
use larch_store::testing::plan_recovery_files;
use larch_store::{Repo, StoreError};
use larch_testkit::{Model, seeded_rng};
use std::io::ErrorKind;
use std::sync::Arc;

const COMMITS: usize = 6;

/// The power losses after the process crash.
const LOSSES: [Survival; 3] = [Survival::Durable, Survival::Pages(11), Survival::PagesZeroed(5)];

/// Runs the script on `controller`'s files until an error; returns the acknowledged commits and
/// the first error, if any.
fn run_script(controller: &Arc<FaultController>) -> (Vec<(Hash, Model)>, Option<StoreError>) {
    let (mut rng, _) = seeded_rng("fault_edges_script", 39);
    let mut acked: Vec<(Hash, Model)> = Vec::new();
    let mut repo = match Repo::open_files(controller.files(), true, crash_options(), None) {
        Ok(repo) => repo,
        Err(e) => return (acked, Some(e)),
    };
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    for block in 0..COMMITS {
        for _ in 0..12 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = acked.last().map(|(hash, _)| *hash).into_iter().collect();
        match repo.commit(&tree, &parents, info(block as u64)) {
            Ok(hash) => acked.push((hash, model.clone())),
            Err(e) => return (acked, Some(e)),
        }
    }
    let error = repo.close().err();
    (acked, error)
}

/// The image opens as a writer (recovering it first if it must) with every acknowledged commit
/// reading back as its model, fsck-clean.
fn check(image: &Arc<FaultController>, acked: &[(Hash, Model)], what: &str) {
    let repo = match Repo::open_files(image.files(), true, crash_options(), None) {
        Ok(repo) => repo,
        Err(StoreError::NeedsRecovery { .. }) => {
            let plan = plan_recovery_files(image.files()).unwrap_or_else(|e| panic!("{what}: plan: {e}"));
            plan.apply_to(&image.files()).unwrap_or_else(|e| panic!("{what}: apply: {e}"));
            Repo::open_files(image.files(), true, crash_options(), None)
                .unwrap_or_else(|e| panic!("{what}: open after recovery: {e}"))
        }
        Err(e) => panic!("{what}: open failed: {e}"),
    };
    for (i, (hash, model)) in acked.iter().enumerate() {
        let tree =
            repo.checkout(hash).unwrap_or_else(|e| panic!("{what}: acknowledged commit {i} lost: {e}"));
        assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
    }
    assert!(repo.fsck().is_clean(), "{what}: {}", repo.fsck());
}

/// A cut at every operation of the script, the write there torn after 0 to 8 sectors (a control
/// slot's 4 KiB page torn at any sector, the record itself under 2 KiB), then the process crash
/// and each power loss.
#[test]
fn a_write_torn_at_any_sector_loses_no_acknowledged_commit() {
    let clean = FaultController::new();
    let (all, error) = run_script(&clean);
    assert!(error.is_none() && all.len() == COMMITS, "{error:?}");
    let total = clean.ops();
    let mut runs = 0;
    for cut in 0..total {
        for sectors in 0..=8u64 {
            let controller = FaultController::new();
            controller.tear_sectors(Some(sectors));
            controller.crash_at(Some(cut));
            let (acked, _) = run_script(&controller);
            assert!(controller.has_crashed(), "cut {cut} never happened");
            assert!(all.starts_with(&acked), "cut {cut}: the script diverged");
            let crashed = controller.restart(Survival::ProcessCrash);
            for loss in LOSSES {
                check(
                    &crashed.restart(loss),
                    &acked,
                    &format!("cut {cut} of {total}, {sectors} sectors, {loss:?}"),
                );
                runs += 1;
            }
        }
    }
    println!("{runs} torn images checked ({total} operations)");
}

/// A sync failing with `EIO` or `ENOSPC` at each sync of the script: the commit (or close) fails,
/// the handle is poisoned (every later commit refused), and after a process crash and a power
/// loss every commit acknowledged before it is there.
#[test]
fn a_failed_sync_poisons_the_handle_and_loses_no_acknowledged_commit() {
    let clean = FaultController::new();
    let (all, _) = run_script(&clean);
    let total = clean.ops();
    let mut failures = 0;
    for kind in [ErrorKind::Other, ErrorKind::StorageFull] {
        for at in 0..total {
            let controller = FaultController::new();
            controller.fail_sync_at(Some(at), kind);
            let (acked, error) = run_script(&controller);
            assert!(all.starts_with(&acked), "sync failure at {at}: the script diverged");
            let Some(error) = error else { continue };
            failures += 1;
            let what = format!("{kind:?} at operation {at}");
            assert!(
                matches!(&error, StoreError::Io { op, .. } if op.contains("sync"))
                    || matches!(error, StoreError::Poisoned),
                "{what}: {error}"
            );
            let crashed = controller.restart(Survival::ProcessCrash);
            for loss in LOSSES {
                check(&crashed.restart(loss), &acked, &format!("{what}, {loss:?}"));
            }
        }
    }
    assert!(failures > 0, "no injected sync failure was seen");
    println!("{failures} sync failures injected ({total} operations)");
}

/// The handle after a failed sync refuses every write: a direct check of the poisoning.
#[test]
fn after_a_failed_sync_every_write_is_refused() {
    let controller = FaultController::new();
    let mut repo = Repo::open_files(controller.files(), true, crash_options(), None).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    controller.fail_sync_at(Some(controller.ops()), ErrorKind::StorageFull);
    tree.add(&["b"], b"2".to_vec()).unwrap();
    let error = repo.commit(&tree, &[first], info(2)).unwrap_err();
    assert!(
        matches!(&error, StoreError::Io { op: "sync", source, .. } if source.kind() == ErrorKind::StorageFull),
        "{error}"
    );
    assert!(matches!(repo.commit(&tree, &[first], info(2)), Err(StoreError::Poisoned)));
    assert!(matches!(repo.set_branch("x", &first), Err(StoreError::Poisoned)));
    drop(repo);
    let repo =
        Repo::open_files(controller.restart(Survival::Durable).files(), true, crash_options(), None).unwrap();
    assert_eq!(repo.head(), Some(first));
}

/// `larch recover --apply` cut at each of its writes and syncs: the script's store with its
/// `control` zeroed (every commit acknowledged, no valid slot), recovery applied with a cut, then a
/// process crash and a power loss; the image still recovers (or opens) with every commit.
#[test]
fn a_recovery_cut_anywhere_loses_no_commit() {
    let clean = FaultController::new();
    let (all, error) = run_script(&clean);
    assert!(error.is_none(), "{error:?}");
    let base = clean.restart(Survival::Written);
    let zeroed = vec![0u8; base.written("control").len()];
    base.files().control.write_at(0, &zeroed).unwrap();
    base.files().control.sync().unwrap();
    let base = base.restart(Survival::Durable);
    let plan = plan_recovery_files(base.files()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), all.last().map(|(hash, _)| *hash));
    let uncut = base.restart(Survival::Durable);
    let before = uncut.ops();
    plan_recovery_files(uncut.files()).unwrap().apply_to(&uncut.files()).unwrap();
    let apply_ops = uncut.ops() - before;
    assert!(apply_ops >= 6, "index write and sync, two slots and syncs, the confirmation: {apply_ops}");
    for cut in 0..apply_ops {
        let controller = base.restart(Survival::Durable);
        let plan = plan_recovery_files(controller.files()).unwrap();
        controller.crash_at(Some(controller.ops() + cut));
        assert!(plan.apply_to(&controller.files()).is_err(), "cut {cut} of the apply never happened");
        let crashed = controller.restart(Survival::ProcessCrash);
        for loss in LOSSES {
            check(&crashed.restart(loss), &all, &format!("recovery cut {cut} of {apply_ops}, {loss:?}"));
        }
    }
}

/// The reader's live-writer probe under the fault model (`docs/store.md`, *Durable-only
/// visibility*): the script cut at every operation, the process crashed, then a reader opens the
/// image with the probe saying the writer died, that one holds the store, or that it cannot tell.
/// A reader told the writer died stands on an unconfirmed newest slot after syncing `control`
/// itself; whichever slot it stands on, the commit it serves survives each power loss that follows.
#[test]
fn what_a_reader_serves_after_a_writer_died_survives_a_power_loss() {
    let clean = FaultController::new();
    let (all, error) = run_script(&clean);
    assert!(error.is_none() && all.len() == COMMITS, "{error:?}");
    let total = clean.ops();
    let (mut ahead, mut images) = (0, 0);
    for cut in 0..total {
        for probe in [Some(true), Some(false), None] {
            let controller = FaultController::new();
            controller.crash_at(Some(cut));
            let (acked, _) = run_script(&controller);
            let crashed = controller.restart(Survival::ProcessCrash);
            crashed.set_writer_absent(probe);
            let what = format!("cut {cut} of {total}, probe {probe:?}");
            let seen = match Repo::open_files(crashed.files(), false, crash_options(), None) {
                Ok(reader) => reader.head(),
                // A store cut before its first publish, or one that needs recovery: nothing served.
                Err(StoreError::NotAStore { .. } | StoreError::NeedsRecovery { .. }) => None,
                Err(e) => panic!("{what}: the reader's open failed: {e}"),
            };
            let mut expected = acked.clone();
            if let Some(seen) = seen
                && !acked.iter().any(|(hash, _)| *hash == seen)
            {
                // A commit published but not acknowledged when the writer died: served only by a
                // reader that knows the writer is gone (it made the slot durable first).
                assert_eq!(probe, Some(true), "{what}: an unconfirmed state served beside a live writer");
                let found = all.iter().find(|(hash, _)| *hash == seen);
                expected
                    .push(found.unwrap_or_else(|| panic!("{what}: served {seen}, never committed")).clone());
                ahead += 1;
            }
            for loss in LOSSES {
                check(&crashed.restart(loss), &expected, &format!("{what}, {loss:?}"));
                images += 1;
            }
        }
    }
    assert!(ahead > 0, "no reader ever stood on an unconfirmed slot: the probe never ran");
    println!("{images} images checked, {ahead} readers served a commit not yet acknowledged");
}
