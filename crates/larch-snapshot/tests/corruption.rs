//! Damaged snapshots: a flipped bit in each region (header, frame headers, bodies, checksums), a
//! truncation at every kind of place, and forged snapshots whose checksums are valid but whose
//! claims are wrong. Each is a typed error naming where; an import of one leaves no store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use larch_core::Hash;
use larch_snapshot::format::{FRAME_HEADER_LEN, HEADER_LEN};
use larch_snapshot::{ExportOptions, SnapshotError};
use larch_store::Repo;
use std::path::Path;

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    hashes: Vec<Hash>,
    file: Vec<u8>,
}

fn fixture(compression: Option<u32>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let hashes = build_store(&root.join("source"));
    let repo = Repo::open_read_only(root.join("source")).unwrap();
    let file = export_bytes(&repo, None, ExportOptions { compression, ..Default::default() });
    Fixture { _dir: dir, root, hashes, file }
}

fn verify(file: &[u8]) -> Result<larch_snapshot::Decoded, SnapshotError> {
    larch_snapshot::verify(file, &mut |_| {})
}

/// Imports `file` into a new store next to the source, expecting failure; checks nothing is left.
fn import_fails(root: &Path, file: &[u8]) -> SnapshotError {
    let target = root.join("target");
    let error = larch_snapshot::import(file, &target, &mut |_| {}).expect_err("a damaged snapshot imported");
    assert!(!target.exists(), "a failed import left {}", target.display());
    let left: Vec<_> = std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "a failed import left {left:?}");
    error
}

#[test]
fn a_flipped_bit_in_the_header_is_named() {
    let fixture = fixture(Some(1));
    for at in 0..HEADER_LEN {
        let mut file = fixture.file.clone();
        file[at] ^= 0x10;
        let error = verify(&file).expect_err("flipped header accepted");
        if at < 8 {
            assert!(matches!(error, SnapshotError::NotASnapshot), "byte {at}: {error:?}");
        } else {
            assert!(matches!(error, SnapshotError::Corrupt { offset: 0, .. }), "byte {at}: {error:?}");
        }
    }
    let mut file = fixture.file.clone();
    file[12] ^= 1;
    import_fails(&fixture.root, &file);
}

#[test]
fn a_flipped_bit_in_any_frame_region_is_named_with_the_frame_offset() {
    for compression in [None, Some(1)] {
        let fixture = fixture(compression);
        let frames = frames(&fixture.file);
        assert!(frames.len() >= 3, "{} frames", frames.len());
        for frame in [&frames[0], &frames[frames.len() / 2], &frames[frames.len() - 1]] {
            let body_len = frame.len - FRAME_HEADER_LEN - 4;
            // Every header byte, every checksum byte, and bytes spread over the body.
            let mut positions: Vec<usize> = (0..FRAME_HEADER_LEN).collect();
            positions.extend((0..4).map(|i| frame.len - 4 + i));
            positions.extend((0..40).map(|i| FRAME_HEADER_LEN + i * body_len / 40));
            for position in positions {
                for bit in [0x01u8, 0x80] {
                    let mut file = fixture.file.clone();
                    file[frame.offset + position] ^= bit;
                    let error = verify(&file).expect_err("flipped frame accepted");
                    match error {
                        SnapshotError::Corrupt { offset, .. } => assert_eq!(offset, frame.offset as u64),
                        // A length flipped larger can run past the end of the file.
                        SnapshotError::Truncated { .. } => assert!((5..9).contains(&position), "{position}"),
                        other => panic!("frame at {} byte {position}: {other:?}", frame.offset),
                    }
                }
            }
        }
        let mut file = fixture.file.clone();
        let middle = &frames[frames.len() / 2];
        file[middle.offset + FRAME_HEADER_LEN + 3] ^= 4;
        assert!(matches!(import_fails(&fixture.root, &file), SnapshotError::Corrupt { .. }));
    }
}

#[test]
fn a_truncated_snapshot_says_where_it_ends() {
    let fixture = fixture(Some(1));
    let frames = frames(&fixture.file);
    let mut cuts =
        vec![0, 3, 8, 13, HEADER_LEN, HEADER_LEN + 4, fixture.file.len() - 1, fixture.file.len() - 4];
    for frame in &frames[1..] {
        cuts.push(frame.offset);
        cuts.push(frame.offset + 5);
        cuts.push(frame.offset + frame.len / 2);
    }
    for cut in cuts {
        let error = verify(&fixture.file[..cut]).expect_err("truncated snapshot accepted");
        match &error {
            SnapshotError::Truncated { offset, .. } => assert_eq!(*offset, cut as u64, "{error}"),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // At a frame boundary, the error names the record the stream ends in.
    let error = verify(&fixture.file[..frames[1].offset]).unwrap_err();
    assert!(error.to_string().contains("record #"), "{error}");
    import_fails(&fixture.root, &fixture.file[..frames[2].offset + 7]);
}

/// Forges the record stream with `edit`, re-frames it with valid checksums and returns the error.
fn forge(fixture: &Fixture, edit: impl FnOnce(&mut Vec<u8>)) -> SnapshotError {
    let (mut stream, window) = stream(&fixture.file);
    edit(&mut stream);
    let file = reframe(&stream, window);
    let error = verify(&file).expect_err("forged snapshot accepted");
    let again = import_fails(&fixture.root, &file);
    assert_eq!(again.to_string(), error.to_string());
    error
}

#[test]
fn forged_claims_are_hash_mismatches_naming_the_record() {
    let fixture = fixture(None);
    let repo = Repo::open_read_only(fixture.root.join("source")).unwrap();
    let head = fixture.hashes[2];
    let tree = repo.checkout(&head).unwrap();
    let tree_hash = tree.hash();

    // The root directory's claim.
    let mut at = 0;
    let error = forge(&fixture, |stream| {
        at = find(stream, tree_hash.as_bytes()).unwrap();
        stream[at + 5] ^= 1;
    });
    match error {
        SnapshotError::HashMismatch { at: location, claimed, computed } => {
            assert_eq!(location.kind, "directory");
            assert_eq!(location.stream_offset, at as u64 - 1);
            assert_eq!(computed, tree_hash);
            assert_ne!(claimed, tree_hash);
        }
        other => panic!("{other:?}"),
    }

    // The commit's claim, and a parent hash (the commit hash no longer matches).
    for needle in [head, fixture.hashes[1]] {
        let mut at = 0;
        let error = forge(&fixture, |stream| {
            at = find(stream, needle.as_bytes()).unwrap();
            stream[at + 31] ^= 0x40;
        });
        match error {
            SnapshotError::HashMismatch { at: location, .. } => {
                assert_eq!(location.kind, "commit");
                assert!(location.stream_offset < at as u64, "{location}");
            }
            other => panic!("{other:?}"),
        }
    }

    // A value: a byte of the 5000-byte `data/long` (a contents record, which has no claim of its
    // own) is caught by the claim of the directory holding it.
    let data_hash = tree.find_tree(&["data"]).unwrap().unwrap().hash();
    let error = forge(&fixture, |stream| {
        let at = find(stream, &[2u8; 5000]).unwrap();
        stream[at + 2500] = 3;
    });
    match error {
        SnapshotError::HashMismatch { at, claimed, .. } => {
            assert_eq!(at.kind, "directory");
            assert_eq!(claimed, data_hash);
        }
        other => panic!("{other:?}"),
    }

    // An inline value ("Unit" → "Unis") in the first contract directory.
    let contract = tree.find_tree(&["scripts", "contract-0"]).unwrap().unwrap().hash();
    let error = forge(&fixture, |stream| {
        let at = find(stream, b"Unit").unwrap();
        stream[at + 3] = b's';
    });
    match error {
        SnapshotError::HashMismatch { claimed, at, .. } => {
            assert_eq!(claimed, contract);
            assert_eq!(at.kind, "directory");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn forged_structure_is_invalid_naming_the_record() {
    let fixture = fixture(None);
    // The end record's object count.
    let error = forge(&fixture, |stream| {
        let last = stream.len() - 1;
        stream[last] ^= 1;
    });
    match error {
        SnapshotError::Invalid { at, .. } => assert_eq!(at.kind, "end"),
        other => panic!("{other:?}"),
    }
    // Bytes after the end record.
    let error = forge(&fixture, |stream| stream.push(0));
    assert!(matches!(error, SnapshotError::Invalid { at, .. } if at.kind == "end"), "{error:?}");
    // An unknown record tag in place of the first record.
    let error = forge(&fixture, |stream| stream[0] = 9);
    match error {
        SnapshotError::Invalid { at, .. } => {
            assert_eq!((at.record, at.stream_offset), (0, 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn lengths_read_from_the_input_are_bounded_before_anything_is_allocated() {
    let window = 1 << 20;
    // A contents record claiming 2^40 bytes: refused by its bound, naming the record.
    let mut stream = vec![1u8];
    larch_core::schema::write_leb128(&mut stream, 1 << 40);
    let error = verify(&reframe(&stream, window)).unwrap_err();
    match error {
        SnapshotError::Invalid { at, reason } => {
            assert_eq!((at.kind, at.record, at.stream_offset), ("contents", 0, 0));
            assert!(reason.contains("contents length"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // 60 MiB claimed (within the bound), 10 bytes present: truncated, after reading what is there.
    let mut stream = vec![1u8];
    larch_core::schema::write_leb128(&mut stream, 60 << 20);
    stream.extend_from_slice(&[0; 10]);
    assert!(matches!(verify(&reframe(&stream, window)), Err(SnapshotError::Truncated { .. })));
    // A directory of 100,000 entries, a name of 1 MiB, an inline value of 1 MiB: refused.
    for (what, body) in [
        (
            "directory entries",
            vec![2u8].into_iter().chain([0; 32]).chain([0, 0xa0, 0x8d, 0x06]).collect::<Vec<_>>(),
        ),
        ("name length", vec![2u8].into_iter().chain([0; 32]).chain([0, 1, 0, 0x80, 0x80, 0x40]).collect()),
        (
            "inline contents length",
            vec![2u8].into_iter().chain([0; 32]).chain([0, 1, 1, 1, b'a', 0x80, 0x80, 0x40]).collect(),
        ),
    ] {
        match verify(&reframe(&body, window)).unwrap_err() {
            SnapshotError::Invalid { reason, .. } => assert!(reason.contains(what), "{what}: {reason}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}
