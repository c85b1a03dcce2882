//! Bad input: flipped bits anywhere in the pack, the index and the control file, truncated and
//! missing files, unknown versions. Each gives a typed error naming the file (and offset), or an
//! fsck report naming the damage; never a panic, never silently wrong data.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{info, random_op};
use larch_core::{Hash, Tree};
use larch_store::storage::{MemStorage, Storage, StoreFiles};
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
        pack: snapshot(&files.pack),
        index: snapshot(&files.index),
        commits,
    }
}

fn files_of(control: &[u8], pack: &[u8], index: &[u8]) -> StoreFiles {
    StoreFiles {
        control: Arc::new(MemStorage::from_bytes(control.to_vec())),
        pack: Arc::new(MemStorage::from_bytes(pack.to_vec())),
        index: Arc::new(MemStorage::from_bytes(index.to_vec())),
    }
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

#[test]
fn flipped_bits_in_the_control_file_and_index_are_errors() {
    let images = build();
    for bit in 0..images.control.len() * 8 {
        let mut control = images.control.clone();
        control[bit / 8] ^= 1 << (bit % 8);
        match open(files_of(&control, &images.pack, &images.index)) {
            Err(StoreError::Corrupt { file: FileKind::Control, .. }) | Err(StoreError::NotAStore { .. }) => {}
            Err(other) => panic!("control bit {bit}: unexpected error {other}"),
            Ok(_) => panic!("control bit {bit}: undetected"),
        }
    }
    for bit in 0..images.index.len() * 8 {
        let mut index = images.index.clone();
        index[bit / 8] ^= 1 << (bit % 8);
        match open(files_of(&images.control, &images.pack, &index)) {
            Err(StoreError::Corrupt { file: FileKind::Index, offset, .. }) => {
                assert!(offset <= (bit / 8) as u64, "index bit {bit} reported at {offset}")
            }
            Err(StoreError::UnknownVersion { file: FileKind::Index, .. }) => {}
            Err(other) => panic!("index bit {bit}: unexpected error {other}"),
            Ok(_) => panic!("index bit {bit}: undetected"),
        }
    }
}

#[test]
fn truncated_files_are_errors() {
    let images = build();
    let (mut rng, _) = seeded_rng("truncated_files_are_errors", 3);
    for _ in 0..50 {
        let cut = rng.random_range(0..images.pack.len());
        let result = open(files_of(&images.control, &images.pack[..cut], &images.index));
        assert!(
            matches!(
                result,
                Err(StoreError::Corrupt { file: FileKind::Pack, .. })
                    | Err(StoreError::Io { file: FileKind::Pack, .. })
            ),
            "cut {cut}"
        );
        let cut = rng.random_range(0..images.index.len());
        let result = open(files_of(&images.control, &images.pack, &images.index[..cut]));
        assert!(
            matches!(
                result,
                Err(StoreError::Corrupt { file: FileKind::Index, .. })
                    | Err(StoreError::Io { file: FileKind::Index, .. })
            ),
            "index cut {cut}"
        );
        let cut = rng.random_range(0..images.control.len());
        let result = open(files_of(&images.control[..cut], &images.pack, &images.index));
        assert!(
            matches!(
                result,
                Err(StoreError::Corrupt { file: FileKind::Control, .. }) | Err(StoreError::NotAStore { .. })
            ),
            "control cut {cut}"
        );
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

    // A control file of version 2 (valid checksum).
    let control_path = dir.path().join("control");
    let original = std::fs::read(&control_path).unwrap();
    let mut future = original.clone();
    future[8..12].copy_from_slice(&2u32.to_le_bytes());
    let len = future.len();
    let crc = crc32fast::hash(&future[..len - 4]);
    future[len - 4..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&control_path, &future).unwrap();
    assert!(matches!(
        Repo::open_read_only(dir.path()),
        Err(StoreError::UnknownVersion { file: FileKind::Control, found: 2, supported: 1 })
    ));
    std::fs::write(&control_path, &original).unwrap();

    // A pack of version 9.
    let pack_path = dir.path().join("pack");
    let pack = std::fs::read(&pack_path).unwrap();
    let mut future = pack.clone();
    future[8] = 9;
    std::fs::write(&pack_path, &future).unwrap();
    assert!(matches!(
        Repo::open_read_only(dir.path()),
        Err(StoreError::UnknownVersion { file: FileKind::Pack, found: 9, .. })
    ));
    std::fs::write(&pack_path, &pack).unwrap();
    assert!(Repo::open_read_only(dir.path()).is_ok());

    std::fs::remove_file(dir.path().join("commits")).unwrap();
    let error = Repo::open_read_only(dir.path()).unwrap_err();
    assert!(matches!(&error, StoreError::NotAStore { reason, .. } if reason.contains("commits")), "{error}");
    // A writer reports it too, and does not recreate the file.
    let error = Repo::open(dir.path()).unwrap_err();
    assert!(matches!(&error, StoreError::NotAStore { reason, .. } if reason.contains("commits")), "{error}");
    assert!(!dir.path().join("commits").exists());
}
