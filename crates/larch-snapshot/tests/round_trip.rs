//! Export → import → export: same commit, same tree, byte-identical snapshots; a clean store whose
//! head is the commit and whose parents are absent; dedupe; small windows; targets that exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use larch_core::Hash;
use larch_snapshot::{ExportOptions, SnapshotError};
use larch_store::Repo;

#[test]
fn export_import_export_is_byte_identical_and_the_store_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store(&dir.path().join("source"));
    let source = Repo::open_read_only(dir.path().join("source")).unwrap();
    let head = *hashes.last().unwrap();
    let first = export_bytes(&source, None, ExportOptions::default());

    let target = dir.path().join("imported");
    let summary = larch_snapshot::import(&first[..], &target, &mut |_| {}).unwrap();
    assert_eq!(summary.commit, head);
    assert_eq!(summary.parents, vec![hashes[1]]);
    assert_eq!(summary.file_bytes, first.len() as u64);

    let imported = Repo::open_read_only(&target).unwrap();
    assert_eq!(imported.head(), Some(head));
    assert_eq!(imported.commit_count(), 1);
    let details = imported.commit_details(&head).unwrap();
    assert_eq!(details.absent_parents, vec![hashes[1]]);
    assert_eq!(details.info, info(2));
    let report = imported.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.absent_parents.len(), 1);
    assert_eq!(imported.history(&head).unwrap().absent_parents, vec![(head, hashes[1])]);

    // The same values at the same paths (the hash says so; a few reads say it again).
    let original = source.checkout(&head).unwrap();
    let copy = imported.checkout(&head).unwrap();
    assert_eq!(copy.hash(), original.hash());
    for path in [&["data", "long"][..], &["scripts", "contract-3", "code"], &["big_maps", "key-299"]] {
        assert_eq!(
            copy.find(path).unwrap().unwrap().as_bytes(),
            original.find(path).unwrap().unwrap().as_bytes()
        );
    }
    assert_eq!(copy.length(&["contracts", "index"]).unwrap(), 1500);

    let second = export_bytes(&imported, None, ExportOptions::default());
    assert!(first == second, "re-export differs ({} vs {} bytes)", first.len(), second.len());
}

#[test]
fn an_older_commit_exports_by_hash_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store(dir.path());
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let file =
        export_bytes(&repo, Some(hashes[0]), ExportOptions { compression: None, ..Default::default() });
    let decoded = larch_snapshot::verify(&file[..], &mut |_| {}).unwrap();
    assert_eq!(decoded.commit, hashes[0]);
    assert!(decoded.parents.is_empty());
    assert_eq!(decoded.tree.0, repo.commit_details(&hashes[0]).unwrap().tree_hash);
    let unknown = Hash([3; 32]);
    let mut out = Vec::new();
    let error = larch_snapshot::export(&repo, Some(unknown), &mut out, Default::default(), &mut |_| {});
    assert!(matches!(error, Err(SnapshotError::Store(_))), "{error:?}");
}

#[test]
fn shared_subtrees_and_values_are_written_once() {
    let dir = tempfile::tempdir().unwrap();
    build_store(dir.path());
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let mut out = Vec::new();
    let summary = larch_snapshot::export(&repo, None, &mut out, Default::default(), &mut |_| {}).unwrap();
    let counts = summary.counts;
    // The 400-byte script is one contents record for 12 uses; the 12 identical `meta` directories
    // one record; the 12 contract directories are identical too (same code, storage, meta).
    assert!(counts.back_references >= 11, "{counts:?}");
    let script = vec![0xab; 400];
    let stream = stream(&out).0;
    let occurrences = stream.windows(script.len()).filter(|window| *window == &script[..]).count();
    assert_eq!(occurrences, 1);
    // Flat directories: 1500 contracts (all different), one `contract-N` and one `meta` (12
    // identical copies each), `scripts`, `data`, `contracts` and the root; `index` (1500 entries)
    // and `big_maps` (300) are inode trees.
    assert_eq!(counts.flat, 1500 + 1 + 1 + 4, "{counts:?}");
}

#[test]
fn a_tiny_window_rewrites_objects_and_still_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store(&dir.path().join("source"));
    let source = Repo::open_read_only(dir.path().join("source")).unwrap();
    let mut sizes = Vec::new();
    for window in [1u32, 2, 7, 64, 1 << 18] {
        let options = ExportOptions { compression: None, window };
        let mut file = Vec::new();
        let summary = larch_snapshot::export(&source, None, &mut file, options, &mut |_| {}).unwrap();
        let target = dir.path().join(format!("w{window}"));
        let imported = larch_snapshot::import(&file[..], &target, &mut |_| {}).unwrap();
        assert_eq!(imported.commit, hashes[2], "window {window}");
        assert!(Repo::open_read_only(&target).unwrap().fsck().is_clean());
        sizes.push((window, summary.counts.objects()));
    }
    // A smaller window writes shared objects again: more objects.
    assert!(sizes[0].1 > sizes[4].1, "{sizes:?}");
}

#[test]
fn import_refuses_an_existing_target_and_leaves_nothing_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    build_store(&dir.path().join("source"));
    let source = Repo::open_read_only(dir.path().join("source")).unwrap();
    let file = export_bytes(&source, None, ExportOptions::default());
    let existing = dir.path().join("source");
    assert!(matches!(
        larch_snapshot::import(&file[..], &existing, &mut |_| {}),
        Err(SnapshotError::TargetExists(_))
    ));
    let target = dir.path().join("new");
    let cut = &file[..file.len() - 10];
    assert!(larch_snapshot::import(cut, &target, &mut |_| {}).is_err());
    assert!(!target.exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["source".to_string()], "a partial store was left behind");
    assert!(matches!(
        larch_snapshot::verify(&b"not a snapshot at all"[..], &mut |_| {}),
        Err(SnapshotError::NotASnapshot)
    ));
}

/// A writer that fails once it has taken `left` bytes (a full disk).
struct FullDisk {
    left: usize,
}

impl std::io::Write for FullDisk {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() > self.left {
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full"));
        }
        self.left -= bytes.len();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_output_stops_the_export_with_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    build_store(dir.path());
    let repo = Repo::open_read_only(dir.path()).unwrap();
    for left in [0, 10, 100_000] {
        let result = larch_snapshot::export(&repo, None, FullDisk { left }, Default::default(), &mut |_| {});
        match result {
            Err(SnapshotError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{left}: {source}")
            }
            other => panic!("{left}: {other:?}"),
        }
    }
}

#[test]
fn edge_shapes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path().join("source")).unwrap();
    // An empty root.
    let empty = repo.commit(&repo.empty_tree(), &[], info(0)).unwrap();
    // Odd names, values at the inline threshold, an empty sub-directory, a merge of two parents.
    let mut tree = repo.empty_tree();
    tree.add(&[&b"\x00\xff"[..], b"v"], vec![1; 32]).unwrap();
    tree.add(&[&b""[..], b"w"], vec![2; 33]).unwrap();
    tree.add(&["abc", "0"], Vec::new()).unwrap();
    tree.add(&["ABCD", "x"], b"upper-case hex is not packed".to_vec()).unwrap();
    tree.add_tree(&["nothing"], &repo.empty_tree()).unwrap();
    let deep: Vec<String> = (0..200).map(|i| format!("d{i}")).collect();
    tree.add(&deep, b"deep".to_vec()).unwrap();
    let side = repo.commit(&tree, &[empty], info(1)).unwrap();
    let merge = repo.commit(&tree, &[empty, side], info(2)).unwrap();
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path().join("source")).unwrap();
    for (n, commit) in [empty, side, merge].into_iter().enumerate() {
        let file = export_bytes(&repo, Some(commit), ExportOptions::default());
        let target = dir.path().join(format!("t{n}"));
        let summary = larch_snapshot::import(&file[..], &target, &mut |_| {}).unwrap();
        assert_eq!(summary.commit, commit);
        let imported = Repo::open_read_only(&target).unwrap();
        let report = imported.fsck();
        assert!(report.is_clean(), "{report}");
        assert_eq!(
            imported.commit_details(&commit).unwrap().parents,
            repo.commit_details(&commit).unwrap().parents
        );
        assert!(
            export_bytes(&imported, None, ExportOptions::default()) == file,
            "commit {n} re-exports differently"
        );
    }
}
