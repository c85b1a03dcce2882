//! `larch recover` at its edges (issue 39): a plan applied after a writer published meanwhile is
//! refused instead of rewriting the store to the stale plan (item 4).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::testing::fault::FaultController;
use larch_store::testing::plan_recovery_files;
use larch_store::testing::storage::StoreFiles;
use larch_store::{Repo, RepoOptions, StoreError, plan_recovery};

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

/// With the writer `repo`, adds `n` commits after `hashes` (a chain), closes it.
fn commit_more(mut repo: Repo, hashes: &mut Vec<Hash>, n: usize) {
    let mut tree = match hashes.last() {
        Some(head) => repo.checkout(head).unwrap(),
        None => repo.empty_tree(),
    };
    for _ in 0..n {
        let i = hashes.len();
        tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i as i64)).unwrap());
    }
    repo.close().unwrap();
}

fn assert_holds(repo: &Repo, hashes: &[Hash]) {
    assert_eq!(repo.head(), hashes.last().copied());
    assert_eq!(repo.commit_count(), hashes.len());
    for hash in hashes {
        repo.checkout(hash).unwrap();
    }
    assert!(repo.fsck().is_clean(), "{}", repo.fsck());
}

/// Item 4 on disk: `recover` plans (no lock), a writer opens, publishes three commits and closes,
/// then `--apply` runs. Before the fix it rewrote the index and both slots from the plan, dropping
/// the three acknowledged commits; now it is refused with `StalePlan`, writes nothing, and a new
/// plan keeps them.
#[test]
fn a_plan_made_before_a_writer_published_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 4);
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 3);
    let control = std::fs::read(dir.path().join("control")).unwrap();
    let index = std::fs::read(dir.path().join("commits")).unwrap();
    let error = plan.apply().unwrap_err();
    assert!(matches!(error, StoreError::StalePlan { .. }), "{error}");
    assert!(error.to_string().contains("larch recover"), "{error}");
    assert_eq!(std::fs::read(dir.path().join("control")).unwrap(), control, "refused, yet control changed");
    assert_eq!(std::fs::read(dir.path().join("commits")).unwrap(), index, "refused, yet the index changed");
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    plan.apply().unwrap();
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
}

/// A plan made while a writer is open and publishing: applying it while the writer holds the lock
/// is refused (`Locked`), and after the writer closed (having published more) it is stale.
#[test]
fn a_plan_made_beside_a_live_writer_never_applies() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 2);
    let mut writer = Repo::open(dir.path()).unwrap();
    let plan = plan_recovery(dir.path()).unwrap();
    let mut tree = writer.checkout(hashes.last().unwrap()).unwrap();
    tree.add(&["live"], b"1".to_vec()).unwrap();
    hashes.push(writer.commit(&tree, &[*hashes.last().unwrap()], info(99)).unwrap());
    assert!(matches!(plan.apply(), Err(StoreError::Locked { .. })));
    writer.close().unwrap();
    assert!(matches!(plan.apply(), Err(StoreError::StalePlan { .. })));
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
}

/// Item 4 through the fault-injecting storage (`plan_recovery_files`, `apply_to`: the same check
/// without the directory lock), the writer publishing between plan and apply.
#[test]
fn a_stale_plan_is_refused_on_any_storage() {
    let controller = FaultController::new();
    let files = || -> StoreFiles { controller.files() };
    let options = || RepoOptions { cache_bytes: 1 << 20, ..RepoOptions::default() };
    let mut hashes = Vec::new();
    commit_more(Repo::open_files(files(), true, options(), None).unwrap(), &mut hashes, 3);
    let plan = plan_recovery_files(files()).unwrap();
    commit_more(Repo::open_files(files(), true, options(), None).unwrap(), &mut hashes, 2);
    assert!(matches!(plan.apply_to(&files()), Err(StoreError::StalePlan { .. })));
    assert_holds(&Repo::open_files(files(), false, options(), None).unwrap(), &hashes);
    // Planned again, the plan applies and keeps all five.
    plan_recovery_files(files()).unwrap().apply_to(&files()).unwrap();
    assert_holds(&Repo::open_files(files(), true, options(), None).unwrap(), &hashes);
}

/// A chain of `n` commits after `hashes`, each adding `k/NNNN` = `{prefix}NNNN` (values of one
/// length: two runs with another prefix write records of the same sizes at the same offsets).
fn grow(repo: &mut Repo, hashes: &mut Vec<Hash>, n: usize, prefix: &str) {
    let mut tree = match hashes.last() {
        Some(head) => repo.checkout(head).unwrap(),
        None => repo.empty_tree(),
    };
    for _ in 0..n {
        let i = hashes.len();
        tree.add(&["k", &format!("{i:04}")], format!("{prefix}{i:04}").into_bytes()).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i as i64)).unwrap());
    }
}

/// The value of `k/NNNN` in `tree`, for each `NNNN` below `n`.
fn values(tree: &larch_core::Tree, n: usize) -> Vec<Option<Vec<u8>>> {
    (0..n).map(|i| tree.find(&["k", &format!("{i:04}")]).unwrap().map(|c| c.as_bytes().to_vec())).collect()
}

fn control_state(dir: &std::path::Path) -> larch_store::testing::control::ControlFileState {
    larch_store::testing::control::ControlFileState::decode(&std::fs::read(dir.join("control")).unwrap())
        .unwrap()
}

/// Item 5: a reader stays open while the store is rewound (recovery drops its last three commits,
/// the record of the fourth from last being damaged) and regrown past its old ends by a writer
/// whose commits land at the very offsets of the dropped ones (same record sizes, other values).
/// Before the fix its reload succeeded and `checkout` of a dropped hash returned the tree of the
/// commit now at that offset. Now: the recovered state has lineage 1, the reader's reload and its
/// checkout of a dropped hash fail with `Rewound`, and a reopened reader sees the new timeline.
#[test]
fn a_reader_never_returns_another_commits_tree_after_a_rewind() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    let mut writer = Repo::open(dir.path()).unwrap();
    grow(&mut writer, &mut hashes, 8, "a");
    writer.close().unwrap();
    assert_eq!(control_state(dir.path()).max_lineage(), 0, "a store never rewound has no lineage");
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    let offsets: std::collections::HashMap<Hash, u64> =
        reader.commit_offsets().map(|(hash, offset)| (*hash, *offset)).collect();
    for hash in &hashes {
        reader.checkout(hash).unwrap();
    }
    // Damage the record of commit 4 (chunk 0: global offset g at file position g + 16).
    let damaged = offsets[&hashes[4]];
    let chunk = dir.path().join("chunk.000000");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[damaged as usize + 16 + 6] ^= 0x40;
    std::fs::write(&chunk, &bytes).unwrap();
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), Some(hashes[3]));
    plan.apply().unwrap();
    assert!(control_state(dir.path()).slots.iter().all(|slot| slot.state().unwrap().lineage == 1));
    let dropped: Vec<Hash> = hashes.split_off(4);
    // Regrow: commits 4.. with values "b…" (same lengths), past the old ends.
    let mut writer = Repo::open(dir.path()).unwrap();
    grow(&mut writer, &mut hashes, 6, "b");
    writer.close().unwrap();
    let new_offsets: Vec<u64> = {
        let fresh = Repo::open_read_only(dir.path()).unwrap();
        hashes
            .iter()
            .map(|hash| fresh.commit_offsets().find(|(h, _)| *h == hash).map(|(_, o)| *o).unwrap())
            .collect()
    };
    assert!(
        dropped.iter().zip(&new_offsets[4..]).all(|(hash, offset)| offsets[hash] == *offset),
        "the regrown commits were meant to land at the dropped ones' offsets"
    );
    // The stale reader: its map still names the dropped hashes; the records there are other
    // commits' now.
    for hash in &dropped {
        let error = reader.checkout(hash).unwrap_err();
        assert!(matches!(error, StoreError::Rewound { .. }), "{error}");
        assert!(matches!(reader.commit_details(hash), Err(StoreError::Rewound { .. })));
    }
    let error = reader.reload().unwrap_err();
    assert!(matches!(error, StoreError::Rewound { .. }), "{error}");
    assert!(error.to_string().contains("reopen"), "{error}");
    // Reopened: the new timeline, the dropped hashes unknown.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), hashes.last().copied());
    for hash in &dropped {
        assert!(matches!(reader.checkout(hash), Err(StoreError::UnknownCommit(_))));
    }
    let head = reader.checkout(hashes.last().unwrap()).unwrap();
    let expected: Vec<Option<Vec<u8>>> = (0..hashes.len())
        .map(|i| Some(format!("{}{i:04}", if i < 4 { "a" } else { "b" }).into_bytes()))
        .collect();
    assert_eq!(values(&head, hashes.len()), expected);
    assert!(reader.fsck().is_clean(), "{}", reader.fsck());
}

/// Item 5, the writer's fallback: the newest slot is valid but names a pack end past the chunk's
/// (never made durable) and its generation is not confirmed, so a writer's open falls back to the
/// older slot. That open starts lineage 1 (published into both slots before any write), and a
/// reader opened before it is told to reopen at its next reload.
#[test]
fn a_writers_fallback_starts_a_new_lineage() {
    use larch_store::testing::control::{CONFIRM_AT, PAGE, encode_confirm};
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    let mut writer = Repo::open(dir.path()).unwrap();
    grow(&mut writer, &mut hashes, 5, "a");
    writer.close().unwrap();
    let decoded = control_state(dir.path());
    let newest = decoded.newest().unwrap();
    let older = decoded.state(1 - newest).unwrap().clone();
    let mut ahead = decoded.state(newest).unwrap().clone();
    ahead.generation = older.generation + 1;
    ahead.pack_end += 100_000;
    let mut bytes = std::fs::read(dir.path().join("control")).unwrap();
    let page = newest * PAGE as usize;
    bytes[page..page + PAGE as usize].fill(0);
    let encoded = ahead.encode().unwrap();
    bytes[page..page + encoded.len()].copy_from_slice(&encoded);
    bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(older.generation));
    std::fs::write(dir.path().join("control"), &bytes).unwrap();
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    let mut writer = Repo::open(dir.path()).unwrap();
    assert_eq!(writer.head(), older.branches.get("main").map(|(hash, _)| *hash));
    let after = control_state(dir.path());
    assert_eq!(after.state(after.newest().unwrap()).unwrap().lineage, 1, "{after:?}");
    assert_eq!(after.confirmed, Some(after.state(after.newest().unwrap()).unwrap().generation));
    let mut kept: Vec<Hash> =
        hashes.iter().copied().take_while(|hash| Some(*hash) != writer.head()).collect();
    kept.push(writer.head().unwrap());
    grow(&mut writer, &mut kept, 2, "c");
    writer.close().unwrap();
    let after = control_state(dir.path());
    assert!(after.slots.iter().all(|slot| slot.state().unwrap().lineage == 1), "{after:?}");
    assert!(matches!(reader.reload(), Err(StoreError::Rewound { .. })));
    assert_holds(&Repo::open(dir.path()).unwrap(), &kept);
}

/// Item 13: a store whose commit index `commits` was deleted is not "not a larch store": both
/// handles refuse it with `NeedsRecovery` naming `larch recover`, which rebuilds the index from the
/// pack and publishes the head again with every commit.
#[test]
fn a_missing_commit_index_is_a_store_to_recover() {
    let dir = tempfile::tempdir().unwrap();
    let mut hashes = Vec::new();
    commit_more(Repo::open(dir.path()).unwrap(), &mut hashes, 4);
    std::fs::remove_file(dir.path().join("commits")).unwrap();
    for (what, result) in [("reader", Repo::open_read_only(dir.path())), ("writer", Repo::open(dir.path()))] {
        let error = result.err().unwrap_or_else(|| panic!("{what}: opened"));
        assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{what}: {error}");
        assert!(error.to_string().contains("larch recover"), "{what}: {error}");
        assert!(error.to_string().contains("commits"), "{what}: {error}");
    }
    assert!(!dir.path().join("commits").exists(), "a refused open created the index");
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|found| found.hash), hashes.last().copied());
    plan.apply().unwrap();
    assert_holds(&Repo::open(dir.path()).unwrap(), &hashes);
}
