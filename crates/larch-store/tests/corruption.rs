//! Bad input: flipped bits anywhere in the pack, the index and the control file, truncated and
//! missing files, unknown versions. Each gives a typed error naming the file (and offset), or an
//! fsck report naming the damage; never a panic, never silently wrong data.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{info, random_op};
use larch_core::{Hash, Tree};
use larch_store::testing::storage::{Storage, StoreFiles};
use larch_store::{FileKind, Repo, RepoOptions, StoreError};
use larch_testkit::{Model, seeded_rng};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

struct Images {
    control: Vec<u8>,
    pack: Vec<u8>,
    index: Vec<u8>,
    commits: Vec<(Hash, Model)>,
}

fn build() -> Images {
    let (mut rng, _) = seeded_rng("corruption_store", 7);
    let files = StoreFiles::memory();
    let mut repo = Repo::open_files(files.clone(), true, RepoOptions::default(), None).unwrap();
    let (mut tree, mut model, mut commits) = (repo.empty_tree(), Model::new(), Vec::new());
    for block in 0..4 {
        for _ in 0..30 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = commits.last().map(|(h, _): &(Hash, Model)| *h).into_iter().collect();
        let hash = repo.commit(&tree, &parents, info(block)).unwrap();
        commits.push((hash, model.clone()));
    }
    let snapshot = |storage: &Arc<dyn Storage>| storage.read_all().unwrap();
    Images {
        control: snapshot(&files.control),
        pack: files.pack_image().unwrap(),
        index: snapshot(&files.index),
        commits,
    }
}

fn files_of(control: &[u8], pack: &[u8], index: &[u8]) -> StoreFiles {
    StoreFiles::memory_with_pack(control.to_vec(), pack.to_vec(), index.to_vec())
}

fn open(files: StoreFiles) -> Result<Repo, StoreError> {
    Repo::open_files(files, false, RepoOptions { cache_bytes: 1 << 20, ..RepoOptions::default() }, None)
}

/// The contents of a tree, or the first error met while loading it.
fn try_contents(tree: &Tree) -> Result<BTreeMap<Vec<Vec<u8>>, Vec<u8>>, larch_core::TreeError> {
    fn walk(
        tree: &Tree,
        path: &mut Vec<Vec<u8>>,
        out: &mut BTreeMap<Vec<Vec<u8>>, Vec<u8>>,
    ) -> Result<(), larch_core::TreeError> {
        let empty: [&[u8]; 0] = [];
        for (name, child) in tree.list(&empty, 0, None)? {
            path.push(name.as_bytes().to_vec());
            match child.find(&empty)? {
                Some(value) => {
                    out.insert(path.clone(), value.as_bytes().to_vec());
                }
                None => walk(&child, path, out)?,
            }
            path.pop();
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(tree, &mut Vec::new(), &mut out)?;
    Ok(out)
}

#[test]
fn intact_images_read_back() {
    let images = build();
    let repo = open(files_of(&images.control, &images.pack, &images.index)).unwrap();
    for (hash, model) in &images.commits {
        assert_eq!(try_contents(&repo.checkout(hash).unwrap()).unwrap(), model.values);
    }
    assert!(repo.fsck().is_clean());
}

#[test]
fn flipped_bits_in_the_pack_are_detected() {
    let images = build();
    let (mut rng, _) = seeded_rng("flipped_bits_in_the_pack_are_detected", 11);
    for _ in 0..200 {
        let bit = rng.random_range(0..images.pack.len() * 8);
        let mut pack = images.pack.clone();
        pack[bit / 8] ^= 1 << (bit % 8);
        let repo = match open(files_of(&images.control, &pack, &images.index)) {
            Err(StoreError::Corrupt { file: FileKind::Pack, offset, .. }) => {
                assert!(offset < 16, "bit {bit}");
                continue;
            }
            Err(StoreError::UnknownVersion { file: FileKind::Pack, .. }) => continue,
            // Damage in the records of the newest published commit: the store refuses to open
            // and names the damage and the way out (`larch recover`).
            Err(StoreError::NeedsRecovery { reason, .. }) => {
                assert!(reason.contains("corrupt pack at offset"), "bit {bit}: {reason}");
                continue;
            }
            Err(other) => panic!("bit {bit}: unexpected error {other}"),
            Ok(repo) => repo,
        };
        let report = repo.fsck();
        assert!(!report.is_clean(), "bit {bit} of the pack went unnoticed");
        let damaged =
            report.problems.iter().any(|p| p.file == FileKind::Pack && p.offset <= (bit / 8) as u64);
        assert!(damaged, "bit {bit}: {report}");
        for (hash, model) in &images.commits {
            // Either an error, or exactly the right contents (the damage is elsewhere).
            if let Ok(contents) =
                repo.checkout(hash).map_err(|_| ()).and_then(|t| try_contents(&t).map_err(|_| ()))
            {
                assert_eq!(contents, model.values, "bit {bit}: silently wrong data");
            }
        }
    }
}

/// An image that opens must stand on one of the published commits and read back exactly (never
/// wrong data); fsck must be clean.
fn check_consistent(repo: &Repo, images: &Images, what: &str) {
    check_reads(repo, images, what);
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
}

/// [`check_consistent`] without fsck's report of the control file (checked by the caller).
fn check_consistent_but_control(repo: &Repo, images: &Images, what: &str) {
    check_reads(repo, images, what);
    let report = repo.fsck();
    assert!(report.problems.iter().all(|problem| problem.file == FileKind::Control), "{what}: {report}");
}

/// The head is one of the published commits, and it and every commit before it read back exactly.
fn check_reads(repo: &Repo, images: &Images, what: &str) {
    let head = repo.head().unwrap_or_else(|| panic!("{what}: no head"));
    let position = images.commits.iter().position(|(hash, _)| *hash == head);
    let position = position.unwrap_or_else(|| panic!("{what}: head {head} is not a published commit"));
    assert_eq!(repo.commit_count(), position + 1, "{what}");
    for (hash, model) in &images.commits[..=position] {
        assert_eq!(try_contents(&repo.checkout(hash).unwrap()).unwrap(), model.values, "{what}");
    }
}

#[test]
fn flipped_bits_in_the_control_file_fall_back_to_the_other_slot() {
    let images = build();
    let newest = images.commits.len() - 1;
    let (mut rng, _) = seeded_rng("flipped_bits_in_the_control_file", 5);
    // Every bit of both slot records and of the confirmation, and random bits elsewhere.
    let mut bits: Vec<usize> =
        (0..160 * 8).chain(4096 * 8..(4096 + 160) * 8).chain(8192 * 8..images.control.len() * 8).collect();
    bits.extend((0..300).map(|_| rng.random_range(0..images.control.len() * 8)));
    let (mut fallbacks, mut refused) = (0, 0);
    for bit in bits {
        let mut control = images.control.clone();
        control[bit / 8] ^= 1 << (bit % 8);
        for writable in [false, true] {
            let files = files_of(&control, &images.pack, &images.index);
            let options = RepoOptions { cache_bytes: 1 << 20, create: false, ..RepoOptions::default() };
            match Repo::open_files(files.clone(), writable, options, None) {
                Ok(repo) => {
                    // A damaged spare slot or confirmation is reported (nothing lost); a writer's
                    // open rewrites it.
                    let report = repo.fsck();
                    let spare = report.problems.iter().all(|problem| {
                        problem.file == FileKind::Control
                            && problem.what.contains("nothing published was lost")
                    });
                    assert!(spare, "control bit {bit}: {report}");
                    assert!(
                        !writable || report.is_clean(),
                        "control bit {bit}: the writer's open left {report}"
                    );
                    check_consistent_but_control(&repo, &images, &format!("control bit {bit}"));
                    // Only the newest two commits have slots: older ones cannot come back.
                    let head = repo.head().unwrap();
                    assert!(head == images.commits[newest].0 || head == images.commits[newest - 1].0);
                    // Only a damaged confirmation sends a reader (which cannot probe for a live
                    // writer here) to the older slot, the one surely durable; fsck reports it.
                    if head != images.commits[newest].0 {
                        assert!(!writable && bit >= 8192 * 8, "control bit {bit}: fell back");
                        fallbacks += 1;
                    }
                }
                // The confirmed newest slot damaged: a durable state was lost, never silently
                // replaced by the older slot.
                Err(StoreError::NeedsRecovery { reason, .. }) if reason.contains("was lost") => refused += 1,
                Err(other) => panic!("control bit {bit}: unexpected error {other}"),
            }
        }
    }
    assert!(fallbacks > 0, "no damaged confirmation made a reader stand on the older slot");
    assert!(refused > 0, "no flip of the confirmed newest slot was refused");
}

#[test]
fn flipped_bits_in_the_index_are_rebuilt_from_the_pack_or_errors() {
    let images = build();
    for bit in 0..images.index.len() * 8 {
        let mut index = images.index.clone();
        index[bit / 8] ^= 1 << (bit % 8);
        match open(files_of(&images.control, &images.pack, &index)) {
            // Entries past the durable part are checked against the pack and rebuilt from it.
            Ok(repo) => {
                assert!(bit >= 16 * 8, "index header bit {bit} undetected");
                check_consistent(&repo, &images, &format!("index bit {bit}"));
                assert_eq!(repo.head(), images.commits.last().map(|c| c.0));
            }
            Err(StoreError::Corrupt { file: FileKind::Index, offset, .. }) => {
                assert!(offset <= (bit / 8) as u64, "index bit {bit} reported at {offset}")
            }
            Err(StoreError::UnknownVersion { file: FileKind::Index, .. }) => {}
            Err(StoreError::NeedsRecovery { reason, .. }) if reason.contains("corrupt commits at offset") => {
                assert!(bit < 16 * 8, "index bit {bit}: {reason}")
            }
            Err(other) => panic!("index bit {bit}: unexpected error {other}"),
        }
    }
}

#[test]
fn truncated_files_are_errors_or_older_commits() {
    let images = build();
    let (mut rng, _) = seeded_rng("truncated_files_are_errors", 3);
    for _ in 0..50 {
        let cut = rng.random_range(0..images.pack.len());
        match open(files_of(&images.control, &images.pack[..cut], &images.index)) {
            Ok(repo) => check_consistent(&repo, &images, &format!("pack cut {cut}")),
            Err(
                StoreError::Corrupt { file: FileKind::Pack, .. }
                | StoreError::Truncated { file: FileKind::Pack, .. }
                | StoreError::NeedsRecovery { .. },
            ) => {}
            Err(other) => panic!("pack cut {cut}: {other}"),
        }
        let cut = rng.random_range(0..images.index.len());
        match open(files_of(&images.control, &images.pack, &images.index[..cut])) {
            Ok(repo) => {
                check_consistent(&repo, &images, &format!("index cut {cut}"));
                assert_eq!(repo.head(), images.commits.last().map(|c| c.0));
            }
            Err(StoreError::NeedsRecovery { reason, .. }) if reason.contains("corrupt commits") => {
                assert!(cut < 16, "index cut {cut}")
            }
            Err(other) => panic!("index cut {cut}: {other}"),
        }
        let cut = rng.random_range(0..images.control.len());
        match open(files_of(&images.control[..cut], &images.pack, &images.index)) {
            Ok(repo) => check_consistent_but_control(&repo, &images, &format!("control cut {cut}")),
            Err(StoreError::NeedsRecovery { .. }) => assert!(cut < 4096 * 2, "control cut {cut}"),
            Err(other) => panic!("control cut {cut}: {other}"),
        }
    }
}

#[test]
fn unknown_versions_and_missing_files_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["k"], b"v".to_vec()).unwrap();
    repo.commit(&tree, &[], info(1)).unwrap();
    repo.close().unwrap();

    // A control file of version 1 (length and checksum valid), as larch's first format wrote it:
    // refused by its version before the rest of its layout is looked at.
    let control_path = dir.path().join("control");
    let original = std::fs::read(&control_path).unwrap();
    let mut old = b"LARCHCTL".to_vec();
    old.extend_from_slice(&1u32.to_le_bytes());
    old.extend_from_slice(&52u32.to_le_bytes());
    old.extend_from_slice(&[0; 32]);
    let crc = crc32fast::hash(&old);
    old.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(&control_path, &old).unwrap();
    for result in [Repo::open_read_only(dir.path()), Repo::open(dir.path())] {
        assert!(matches!(
            result,
            Err(StoreError::UnknownVersion { file: FileKind::Control, found: 1, supported: 4 })
        ));
    }
    assert_eq!(std::fs::read(&control_path).unwrap(), old, "the writer changed a store it cannot read");
    std::fs::write(&control_path, &original).unwrap();

    // A chunk of version 9.
    let pack_path = dir.path().join("chunk.000000");
    let pack = std::fs::read(&pack_path).unwrap();
    let mut future = pack.clone();
    future[8] = 9;
    std::fs::write(&pack_path, &future).unwrap();
    assert!(matches!(
        Repo::open_read_only(dir.path()),
        Err(StoreError::UnknownVersion { file: FileKind::Pack, found: 9, .. })
    ));
    // A missing chunk: the published state is not present.
    std::fs::remove_file(&pack_path).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(
        matches!(&error, StoreError::NeedsRecovery { reason, .. } if reason.contains("chunk.000000")),
        "{error}"
    );
    std::fs::write(&pack_path, &pack).unwrap();
    assert!(Repo::open_read_only(dir.path()).is_ok());

    // A missing commit index: a store `larch recover` repairs, not "not a larch store" (issue 39
    // item 13; the recovery itself: `tests/recover_edges.rs`).
    std::fs::remove_file(dir.path().join("commits")).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(
        matches!(&error, StoreError::NeedsRecovery { reason, .. } if reason.contains("commits")),
        "{error}"
    );
    assert!(error.to_string().contains("larch recover"), "{error}");
    // A writer reports it too, and does not recreate the file.
    let error = Repo::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, StoreError::NeedsRecovery { reason, .. } if reason.contains("commits")),
        "{error}"
    );
    assert!(!dir.path().join("commits").exists());
}
