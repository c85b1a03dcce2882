//! The durability protocol on disk: opening never destroys data, a damaged switch falls back to the
//! older slot or names the remedy, `recover` finds what a crash left unpublished, readers see only
//! durable commits under every sync policy, the writer's lock cannot be sidestepped, and a pack
//! shorter than published is a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::testing::storage::{DiskDirectory, FileStorage, StoreFiles};
use larch_store::{FileKind, Repo, RepoOptions, StoreError, SyncPolicy, plan_recovery};
use std::path::Path;
use std::sync::Arc;

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

/// A store at `dir` with `n` commits (`k/i` = `v{i}` for every i up to the level); their hashes.
fn store_with(dir: &Path, n: usize, sync: SyncPolicy) -> (Repo, Vec<Hash>) {
    let mut repo = Repo::open_with(dir, RepoOptions { sync, ..RepoOptions::default() }).unwrap();
    let mut tree = repo.empty_tree();
    let mut hashes = Vec::new();
    for i in 0..n {
        tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
        let hash = repo
            .commit(&tree, &hashes.last().copied().into_iter().collect::<Vec<_>>(), info(i as i64))
            .unwrap();
        hashes.push(hash);
    }
    (repo, hashes)
}

fn check_level(repo: &Repo, hash: &Hash, level: usize) {
    let tree = repo.checkout(hash).unwrap();
    assert_eq!(tree.length(&["k"]).unwrap(), level as u64 + 1);
    for i in 0..=level {
        assert_eq!(
            tree.find(&["k", &format!("{i:04}")]).unwrap().unwrap().as_bytes(),
            format!("v{i}").as_bytes()
        );
    }
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_damaged_or_missing_switch_is_never_initialised_again() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, hashes) = store_with(dir.path(), 3, SyncPolicy::Commit);
    repo.close().unwrap();
    let control = dir.path().join("control");
    // Emptied (what a power loss could leave of a file being created) and missing.
    for damage in ["empty", "missing", "zeros"] {
        let original = std::fs::read(&control).unwrap();
        match damage {
            "empty" => std::fs::write(&control, b"").unwrap(),
            "zeros" => std::fs::write(&control, vec![0u8; original.len()]).unwrap(),
            _ => std::fs::remove_file(&control).unwrap(),
        }
        let before = files(dir.path());
        let writer = Repo::open(dir.path()).unwrap_err();
        let reader = Repo::open_read_only(dir.path()).unwrap_err();
        for error in [&writer, &reader] {
            assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{damage}: {error}");
            assert!(error.to_string().contains("larch recover"), "{damage}: {error}");
        }
        assert_eq!(files(dir.path()), before, "{damage}: opening changed the files");
        std::fs::write(&control, &original).unwrap();
    }
    // The remedy named: recover writes a new control file for the newest complete commit.
    std::fs::remove_file(&control).unwrap();
    plan_recovery(dir.path()).unwrap().apply().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(hashes[2]));
    check_level(&repo, &hashes[2], 2);
    assert!(repo.fsck().is_clean());
    // Something else in the directory: not a store, for both.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"mine").unwrap();
    assert!(matches!(Repo::open(other.path()), Err(StoreError::NotAStore { .. })));
    assert!(matches!(Repo::open_read_only(other.path()), Err(StoreError::NotAStore { .. })));
    assert_eq!(files(other.path()).len(), 1);
}

#[test]
fn a_torn_newest_slot_opens_at_the_commit_before() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, hashes) = store_with(dir.path(), 4, SyncPolicy::Commit);
    drop(repo);
    let control = dir.path().join("control");
    let mut bytes = std::fs::read(&control).unwrap();
    let generation = |bytes: &[u8], slot: usize| {
        u64::from_le_bytes(bytes[slot * 4096 + 16..slot * 4096 + 24].try_into().unwrap())
    };
    let newest = if generation(&bytes, 0) > generation(&bytes, 1) { 0 } else { 1 };
    bytes[newest * 4096 + 30] ^= 0x40; // inside pack_end: the checksum fails
    // The confirmation covers the damaged slot: a durable state was lost, never silently replaced
    // by the older slot (issue 39, item 3).
    std::fs::write(&control, &bytes).unwrap();
    for result in [Repo::open_read_only(dir.path()), Repo::open(dir.path())] {
        let error = result.err().unwrap();
        assert!(matches!(&error, StoreError::NeedsRecovery { reason, .. } if reason.contains("was lost")));
    }
    // A torn write of a slot never confirmed (the confirmation still names the older one): the
    // store opens at the commit before; a reader's fsck reports the damaged spare slot, which the
    // writer's open rewrites.
    use larch_store::testing::control::encode_confirm;
    let older = generation(&bytes, 1 - newest);
    bytes[8192..].copy_from_slice(&encode_confirm(older));
    std::fs::write(&control, &bytes).unwrap();
    for writable in [false, true] {
        let repo = if writable {
            Repo::open(dir.path()).unwrap()
        } else {
            Repo::open_read_only(dir.path()).unwrap()
        };
        assert_eq!(repo.head(), Some(hashes[2]), "writable {writable}");
        check_level(&repo, &hashes[2], 2);
        let report = repo.fsck();
        assert!(report.is_clean() || !writable, "{report}");
        assert!(report.problems.iter().all(|p| p.what.contains("nothing published was lost")), "{report}");
    }
    let decoded = larch_store::testing::control::ControlFileState::decode(&std::fs::read(&control).unwrap());
    assert!(decoded.unwrap().slots.iter().all(|slot| slot.state().is_some()), "the spare was rewritten");
    // Both slots damaged: the typed error naming the remedy, then `recover --apply` finds the
    // newest complete commit (the last one, whose records are all in the pack).
    let mut bytes = std::fs::read(&control).unwrap();
    bytes[30] ^= 0x40;
    bytes[4096 + 30] ^= 0x40;
    std::fs::write(&control, &bytes).unwrap();
    assert!(matches!(Repo::open(dir.path()), Err(StoreError::NeedsRecovery { .. })));
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|c| c.hash), Some(hashes[3]));
    assert!(!plan.is_noop());
    assert!(
        matches!(Repo::open(dir.path()), Err(StoreError::NeedsRecovery { .. })),
        "planning changed the store"
    );
    plan.apply().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(hashes[3]));
    assert_eq!(repo.commit_count(), 4);
    check_level(&repo, &hashes[3], 3);
    assert!(repo.fsck().is_clean());
    assert!(plan_recovery(dir.path()).unwrap().is_noop());
}

#[test]
fn recover_finds_the_commits_a_crash_left_unpublished_and_drops_a_torn_one() {
    let dir = tempfile::tempdir().unwrap();
    // Published: 2 commits. Then 3 more under `never`, and the process "dies" (no flush, no lock:
    // the files are opened directly).
    store_with(dir.path(), 2, SyncPolicy::Commit).0.close().unwrap();
    let open =
        |name: &str| Arc::new(FileStorage::open(&dir.path().join(name), true, false).unwrap()) as Arc<_>;
    let directory = Arc::new(DiskDirectory::new(dir.path(), None));
    let files = StoreFiles { control: open("control"), index: open("commits"), dir: directory };
    let options = RepoOptions { sync: SyncPolicy::Never, ..RepoOptions::default() };
    let mut repo = Repo::open_files(files, true, options, Some(dir.path())).unwrap();
    let mut hashes: Vec<Hash> = repo.log(&repo.head().unwrap()).unwrap().into_iter().rev().collect();
    let mut tree = repo.checkout(&hashes[1]).unwrap();
    for i in 2..5 {
        tree.add(&["k", &format!("{i:04}")], format!("v{i}").into_bytes()).unwrap();
        hashes.push(repo.commit(&tree, &[hashes[i - 1]], info(i as i64)).unwrap());
    }
    std::mem::forget(repo); // a crash: nothing published since
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.head(), Some(hashes[1]));
    // Tear the last commit's record.
    let pack_path = dir.path().join("chunk.000000");
    let len = std::fs::metadata(&pack_path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&pack_path).unwrap();
    file.set_len(len - 3).unwrap();
    let plan = plan_recovery(dir.path()).unwrap();
    assert!(plan.open_error.is_none());
    assert_eq!(plan.found.iter().map(|c| c.hash).collect::<Vec<_>>(), hashes[..4].to_vec());
    assert_eq!(plan.chosen.as_ref().map(|c| c.hash), Some(hashes[3]));
    assert_eq!(plan.dropped_published_commits(), 0);
    plan.apply().unwrap();
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(hashes[3]));
    assert_eq!(repo.commit_count(), 4);
    check_level(&repo, &hashes[3], 3);
    assert!(repo.fsck().is_clean());
}

#[test]
fn readers_see_only_published_durable_commits_under_every_policy() {
    for sync in [SyncPolicy::Commit, SyncPolicy::Every(3), SyncPolicy::Never] {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, hashes) = store_with(dir.path(), 2, sync);
        let mut reader = Repo::open_read_only(dir.path()).unwrap();
        let expected = match sync {
            SyncPolicy::Commit => Some(hashes[1]),
            _ => None,
        };
        assert_eq!(reader.head(), expected, "{sync}");
        assert_eq!(writer.head(), Some(hashes[1]), "{sync}: the writer sees its own commits");
        let mut tree = writer.checkout(&hashes[1]).unwrap();
        tree.add(&["k", "0002"], b"v2".to_vec()).unwrap();
        let third = writer.commit(&tree, &[hashes[1]], info(2)).unwrap();
        reader.reload().unwrap();
        let expected = match sync {
            SyncPolicy::Never => None,
            _ => Some(third), // `every 3`: the third commit syncs and publishes
        };
        assert_eq!(reader.head(), expected, "{sync}");
        writer.flush().unwrap();
        reader.reload().unwrap();
        assert_eq!(reader.head(), Some(third), "{sync}: after flush");
        check_level(&reader, &third, 2);
        assert!(reader.fsck().is_clean());
    }
}

#[test]
fn deleting_the_lock_file_under_a_running_writer_lets_no_second_writer_in() {
    let dir = tempfile::tempdir().unwrap();
    // A directory holding only a version-1 `lock` file is still empty enough to create a store.
    std::fs::write(dir.path().join("lock"), b"").unwrap();
    let (mut writer, hashes) = store_with(dir.path(), 1, SyncPolicy::Commit);
    std::fs::remove_file(dir.path().join("lock")).unwrap();
    assert!(matches!(Repo::open(dir.path()), Err(StoreError::Locked { .. })));
    // Nor by replacing the control file by a copy of itself (the directory is what is locked).
    let control = dir.path().join("control");
    let copy = dir.path().join("control.copy");
    std::fs::copy(&control, &copy).unwrap();
    std::fs::rename(&copy, &control).unwrap();
    assert!(matches!(Repo::open(dir.path()), Err(StoreError::Locked { .. })));
    assert!(matches!(
        plan_recovery(dir.path()).unwrap().apply(),
        Err(StoreError::Locked { .. }) | Err(StoreError::NeedsRecovery { .. })
    ));
    // The first writer notices that its control file was replaced instead of publishing into the
    // unlinked one (a commit acknowledged there would be lost), and refuses further work.
    let mut tree = writer.checkout(&hashes[0]).unwrap();
    tree.add(&["k", "0001"], b"v1".to_vec()).unwrap();
    let error = writer.commit(&tree, &[hashes[0]], info(1)).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
    assert!(matches!(writer.commit(&tree, &[hashes[0]], info(1)), Err(StoreError::Poisoned)));
    drop(writer);
    // Once it is gone another writer may write, from the last published commit.
    let mut repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(hashes[0]));
    let second = repo.commit(&tree, &[hashes[0]], info(1)).unwrap();
    check_level(&repo, &second, 1);
    assert!(repo.fsck().is_clean());
}

#[test]
fn a_pack_shorter_than_published_is_a_typed_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, hashes) = store_with(dir.path(), 3, SyncPolicy::Commit);
    repo.close().unwrap();
    let reader = Repo::open_read_only_with(dir.path(), 1 << 16).unwrap();
    let pack = dir.path().join("chunk.000000");
    let len = std::fs::metadata(&pack).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&pack).unwrap().set_len(len / 2).unwrap();
    let error = reader.commit_details(&hashes[2]).unwrap_err();
    assert!(
        matches!(error, StoreError::Truncated { file: FileKind::Pack, file_len, .. } if file_len == len / 2),
        "{error}"
    );
    assert!(error.to_string().contains("pack is shorter than published"), "{error}");
    // Opened now, the store says the same before reading anything.
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(error.to_string().contains("pack"), "{error}");
}

#[test]
fn a_crafted_control_claiming_a_huge_index_is_refused_before_reading_it() {
    use larch_store::testing::control::{CONFIRM_AT, ControlFileState, PAGE, encode_confirm};
    let dir = tempfile::tempdir().unwrap();
    store_with(dir.path(), 1, SyncPolicy::Commit).0.close().unwrap();
    let control_path = dir.path().join("control");
    let mut bytes = std::fs::read(&control_path).unwrap();
    let decoded = ControlFileState::decode(&bytes).unwrap();
    let mut state = decoded.state(decoded.newest().unwrap()).unwrap().clone();
    // 100 million commits (4.4 GB of index) over a sparse index file of that length.
    state.index_end = 16 + 44 * 100_000_000;
    state.index_synced = state.index_end;
    for slot in 0..2u64 {
        state.generation += 1;
        let encoded = state.encode().unwrap();
        let at = (slot * PAGE) as usize;
        bytes[at..at + PAGE as usize].fill(0);
        bytes[at..at + encoded.len()].copy_from_slice(&encoded);
    }
    bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(state.generation));
    std::fs::write(&control_path, &bytes).unwrap();
    let index = std::fs::OpenOptions::new().write(true).open(dir.path().join("commits")).unwrap();
    index.set_len(state.index_end).unwrap();
    for result in [Repo::open_read_only(dir.path()), Repo::open(dir.path())] {
        let error = result.unwrap_err();
        assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{error}");
        assert!(error.to_string().contains("claims 100000000 commits"), "{error}");
    }
}

#[test]
fn a_durable_commit_whose_pack_bytes_were_lost_is_not_silently_dropped() {
    // Both slots valid, the newest confirmed durable; then the pack loses its last commit's bytes
    // (a disk that lost synced data). Opening at the older slot would silently forget an
    // acknowledged commit, and a writer would then overwrite it: both handles refuse instead and
    // name the remedy.
    let dir = tempfile::tempdir().unwrap();
    let (repo, hashes) = store_with(dir.path(), 3, SyncPolicy::Commit);
    let before_last = repo.commit_details(&hashes[2]).unwrap().offset;
    // A copy of the files taken while the writer is still open: its slots hold the last two
    // publishes (commits 2 and 3), the newest confirmed durable (a close would publish again).
    let copy = tempfile::tempdir().unwrap();
    for file in ["control", "chunk.000000", "commits"] {
        std::fs::copy(dir.path().join(file), copy.path().join(file)).unwrap();
    }
    repo.close().unwrap();
    // Chunk 0 holds global offset g at file position 32 + g - 16.
    let pack = std::fs::OpenOptions::new().write(true).open(copy.path().join("chunk.000000")).unwrap();
    pack.set_len(before_last + 16).unwrap();
    for result in [Repo::open_read_only(copy.path()), Repo::open(copy.path())] {
        let error = result.unwrap_err();
        assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{error}");
        assert!(error.to_string().contains("larch recover"), "{error}");
    }
}
