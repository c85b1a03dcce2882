//! The control file's edges (issue 39, items 3, 9 and 10): a damaged newest slot that the
//! confirmation covers is a lost durable state (refused, reported, recovered), a flipped version
//! bit is damage rather than another format, and every single-bit flip of a small store's
//! `control` is reported by fsck or refused by open, never silently accepted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::testing::control::{CONFIRM_AT, ControlFileState, PAGE};
use larch_store::{Repo, RepoOptions, StoreError, plan_recovery};
use std::path::Path;

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

/// A closed store at `dir` with `n` commits; their hashes.
fn store_with(dir: &Path, n: usize) -> Vec<Hash> {
    let mut repo = Repo::open(dir).unwrap();
    let mut tree = repo.empty_tree();
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..n {
        tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i as i64)).unwrap());
    }
    repo.close().unwrap();
    hashes
}

/// The control file's bytes and the index of its newest valid slot.
fn control_of(dir: &Path) -> (Vec<u8>, usize) {
    let bytes = std::fs::read(dir.join("control")).unwrap();
    let decoded = ControlFileState::decode(&bytes).unwrap();
    let newest = decoded.newest().unwrap();
    let generation = decoded.state(newest).unwrap().generation;
    assert_eq!(decoded.confirmed, Some(generation), "a closed store's newest slot is confirmed");
    (bytes, newest)
}

fn flip(dir: &Path, at: usize, mask: u8) {
    let path = dir.join("control");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at] ^= mask;
    std::fs::write(&path, &bytes).unwrap();
}

fn assert_needs_recovery(result: Result<Repo, StoreError>, what: &str) {
    let error = result.err().unwrap_or_else(|| panic!("{what}: opened"));
    assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{what}: {error}");
    assert!(error.to_string().contains("larch recover"), "{what}: {error}");
}

/// Item 3: one byte of the newest slot's zero padding flipped after close. The confirmation covers
/// that slot: both handles refuse (naming `larch recover`) instead of standing on the older slot,
/// fsck reports it, and recovery publishes the lost head again.
#[test]
fn a_damaged_confirmed_newest_slot_is_refused_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = store_with(dir.path(), 4);
    let (_, newest) = control_of(dir.path());
    let before: Vec<u8> = std::fs::read(dir.path().join("control")).unwrap();
    flip(dir.path(), newest * PAGE as usize + 3000, 0x10);
    assert_needs_recovery(Repo::open_read_only(dir.path()), "reader");
    assert_needs_recovery(Repo::open(dir.path()), "writer");
    let error = larch_store::fsck(dir.path()).unwrap_err();
    assert!(error.to_string().contains("was lost"), "{error}");
    let after = std::fs::read(dir.path().join("control")).unwrap();
    assert_eq!(before.len(), after.len());
    assert_eq!(
        before.iter().zip(&after).filter(|(a, b)| a != b).count(),
        1,
        "the refused opens changed the control file"
    );
    let plan = plan_recovery(dir.path()).unwrap();
    assert!(!plan.is_noop());
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    plan.apply().unwrap();
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), hashes.last().copied());
    assert_eq!(repo.commit_count(), hashes.len());
    assert!(repo.fsck().is_clean(), "{}", repo.fsck());
}

/// A torn write of a slot never confirmed is not a loss: the store opens on the older slot, and
/// the writer's open rewrites the damaged slot.
#[test]
fn a_damaged_unconfirmed_newest_slot_falls_back_and_is_rewritten() {
    use larch_store::testing::control::encode_confirm;
    let dir = tempfile::tempdir().unwrap();
    let hashes = store_with(dir.path(), 4);
    let (mut bytes, newest) = control_of(dir.path());
    let decoded = ControlFileState::decode(&bytes).unwrap();
    let older_state = decoded.state(1 - newest).unwrap().clone();
    let older = older_state.generation;
    let older_head = older_state.branches.get("main").map(|(hash, _)| *hash);
    // The confirmation of the older slot only (the newest one's was never written), then a torn
    // newest slot.
    bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(older));
    bytes[newest * PAGE as usize + 20] ^= 0xff;
    std::fs::write(dir.path().join("control"), &bytes).unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), older_head);
    let report = reader.fsck();
    assert_eq!(report.problems.len(), 1, "{report}");
    assert!(report.problems[0].what.contains("nothing published was lost"), "{report}");
    drop(reader);
    let writer = Repo::open(dir.path()).unwrap();
    assert_eq!(writer.head(), older_head);
    assert!(hashes.contains(&older_head.unwrap()));
    assert!(writer.fsck().is_clean(), "{}", writer.fsck());
    writer.close().unwrap();
    let decoded = ControlFileState::decode(&std::fs::read(dir.path().join("control")).unwrap()).unwrap();
    assert!(decoded.slots.iter().all(|slot| slot.state().is_some()), "both slots valid again");
}

/// Item 9: a flipped bit in either slot's version field is damage (the checksum fails), never
/// "unknown version": the store opens on the other slot (the older one flipped) or is refused as
/// needing recovery (the confirmed newest one flipped); recovery works either way.
#[test]
fn a_flipped_version_bit_is_damage_not_another_format() {
    for which in ["older", "newest"] {
        let dir = tempfile::tempdir().unwrap();
        let hashes = store_with(dir.path(), 3);
        let (_, newest) = control_of(dir.path());
        let slot = if which == "newest" { newest } else { 1 - newest };
        flip(dir.path(), slot * PAGE as usize + 8, 0x10);
        if which == "older" {
            let reader = Repo::open_read_only(dir.path()).unwrap();
            assert_eq!(reader.head(), hashes.last().copied());
            let report = reader.fsck();
            assert_eq!(report.problems.len(), 1, "{report}");
            assert!(report.problems[0].what.contains("spare slot"), "{report}");
            assert!(plan_recovery(dir.path()).unwrap().is_noop());
        } else {
            assert_needs_recovery(Repo::open_read_only(dir.path()), which);
            assert_needs_recovery(Repo::open(dir.path()), which);
        }
        let plan = plan_recovery(dir.path()).unwrap();
        assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied(), "{which}");
        plan.apply().unwrap();
        let repo = Repo::open(dir.path()).unwrap();
        assert_eq!(repo.head(), hashes.last().copied(), "{which}");
        assert!(repo.fsck().is_clean(), "{which}: {}", repo.fsck());
    }
}

/// Item 10: every byte of a small store's `control` file, one bit each (a different bit per
/// byte, all eight over consecutive bytes): fsck reports it or open refuses it; nothing is
/// silently accepted. A writer's next publish repairs a damaged spare slot.
#[test]
fn every_single_bit_flip_of_control_is_reported_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = store_with(dir.path(), 3);
    let original = std::fs::read(dir.path().join("control")).unwrap();
    let options = RepoOptions { create: false, cache_bytes: 1 << 20, ..RepoOptions::default() };
    let (mut reported, mut refused) = (0, 0);
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 1 << (at % 8);
        std::fs::write(dir.path().join("control"), &bytes).unwrap();
        match Repo::open_read_only_options(dir.path(), options.clone()) {
            Ok(repo) => {
                assert_eq!(repo.head(), hashes.last().copied(), "byte {at}: another head");
                let report = repo.fsck();
                assert!(!report.is_clean(), "byte {at}: flip accepted silently");
                assert!(report.problems.iter().any(|p| p.what.contains("nothing published was lost")));
                reported += 1;
            }
            Err(error) => {
                assert!(matches!(error, StoreError::NeedsRecovery { .. }), "byte {at}: {error}");
                refused += 1;
            }
        }
    }
    assert!(reported > 0 && refused > 0, "{reported} reported, {refused} refused");
    // A damaged spare slot: the writer's next publish (here its open) writes into it.
    let (_, newest) = {
        std::fs::write(dir.path().join("control"), &original).unwrap();
        control_of(dir.path())
    };
    flip(dir.path(), (1 - newest) * PAGE as usize + 100, 0x01);
    let mut writer = Repo::open(dir.path()).unwrap();
    assert!(writer.fsck().is_clean(), "{}", writer.fsck());
    let mut tree = writer.checkout(hashes.last().unwrap()).unwrap();
    tree.add(&["k", "new"], b"x".to_vec()).unwrap();
    writer.commit(&tree, &[*hashes.last().unwrap()], info(9)).unwrap();
    writer.close().unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert!(reader.fsck().is_clean(), "{}", reader.fsck());
}

/// Item 10, a spare slot damaged under a running writer: the writer's fsck reports it (nothing
/// lost), and its next publish writes into that slot (the one its state is not in), repairing it.
#[test]
fn the_next_publish_rewrites_a_spare_slot_damaged_under_a_running_writer() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = store_with(dir.path(), 3);
    let mut writer = Repo::open(dir.path()).unwrap();
    let (_, newest) = control_of(dir.path());
    flip(dir.path(), (1 - newest) * PAGE as usize + 2000, 0x80);
    let report = writer.fsck();
    assert_eq!(report.problems.len(), 1, "{report}");
    assert!(report.problems[0].what.contains("spare slot, nothing published was lost"), "{report}");
    assert_eq!(report.problems[0].offset, (1 - newest) as u64 * PAGE);
    let mut tree = writer.checkout(hashes.last().unwrap()).unwrap();
    tree.add(&["k", "next"], b"y".to_vec()).unwrap();
    let next = writer.commit(&tree, &[*hashes.last().unwrap()], info(10)).unwrap();
    assert!(writer.fsck().is_clean(), "{}", writer.fsck());
    let decoded = ControlFileState::decode(&std::fs::read(dir.path().join("control")).unwrap()).unwrap();
    assert_eq!(decoded.newest(), Some(1 - newest), "the publish wrote the damaged slot");
    assert!(decoded.state(newest).is_some());
    writer.close().unwrap();
    assert_eq!(Repo::open_read_only(dir.path()).unwrap().head(), Some(next));
}
