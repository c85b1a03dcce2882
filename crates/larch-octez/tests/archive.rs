//! Synthetic Octez snapshot archives around the Irmin-written one-commit store: read back, and
//! corrupted in every member (truncations, flipped bytes, missing and duplicated members, other
//! versions): typed errors naming the member and offset, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use larch_core::Hash;
use larch_octez::{OctezError, Snapshot, read_archive, read_directory};
use larch_testkit::seed::seeded_rng;
use rand::Rng;
use std::path::{Path, PathBuf};

/// The commit of `plain-head` (the fixture's README).
const HEAD_HEX: &str = "ec3e6d7374d6b3f5dad65526930cdd871af1685bcbe79753a6bbe53b59696269";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/data/one-commit/plain-head")
}

fn head() -> [u8; 32] {
    Hash::from_hex(HEAD_HEX).unwrap().0
}

fn archive() -> Vec<u8> {
    common::tar(&common::members(&fixture(), head()))
}

fn read(bytes: &[u8]) -> (Result<Snapshot, OctezError>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (read_archive(bytes, dir.path()), dir)
}

fn same_files(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    let mut other: Vec<_> = std::fs::read_dir(b).unwrap().map(|e| e.unwrap().file_name()).collect();
    other.sort();
    assert_eq!(names, other);
    for name in names {
        let (x, y) = (a.join(&name), b.join(&name));
        if x.is_dir() {
            same_files(&x, &y);
        } else {
            assert_eq!(std::fs::read(&x).unwrap(), std::fs::read(&y).unwrap(), "{}", x.display());
        }
    }
}

#[test]
fn a_snapshot_reads_back_with_its_metadata_and_context() {
    let bytes = archive();
    let (result, dir) = read(&bytes);
    let snapshot = result.unwrap();
    assert_eq!(snapshot.version, 9);
    assert_eq!(snapshot.metadata.chain_name, "TEZOS_MAINNET");
    assert_eq!(snapshot.metadata.mode, "rolling");
    assert_eq!(snapshot.metadata.level, 41);
    assert_eq!(snapshot.metadata.timestamp, common::TIMESTAMP_TEXT);
    let (_, header) = common::block_data(head());
    assert_eq!(snapshot.metadata.block_hash, common::block_hash(&header));
    assert_eq!(snapshot.block.level, common::LEVEL);
    assert_eq!(snapshot.block.timestamp, common::TIMESTAMP);
    assert_eq!(snapshot.block.header_context, Hash([0x33; 32]));
    assert_eq!(snapshot.block.resulting_context_hash.to_hex(), HEAD_HEX);
    assert_eq!(snapshot.block.operations, (4, 1));
    assert_eq!(snapshot.context_files, 7);
    assert_eq!(snapshot.archive_bytes, bytes.len() as u64);
    // The context's files, byte for byte; nothing else written.
    same_files(dir.path(), &fixture());
    // The members may come in any order.
    let mut members = common::members(&fixture(), head());
    members.reverse();
    let (reversed, _) = read(&common::tar(&members));
    assert_eq!(reversed.unwrap().block, snapshot.block);
}

#[test]
fn other_versions_are_refused_with_a_clear_error() {
    for version in [8u64, 10, 5, 1] {
        let mut members = common::members(&fixture(), head());
        members[0].1 = Some(format!("{{\"version\": {version}}}").into_bytes());
        let (result, _) = read(&common::tar(&members));
        match result {
            Err(error @ OctezError::UnsupportedVersion { found, supported: 9 }) => {
                assert_eq!(found, version);
                assert!(error.to_string().contains(&format!("snapshot version {version}")), "{error}");
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
    for bad in [&b"{\"version\": \"9\"}"[..], b"{\"v\": 9}", b"9", b"{\"version\": 9"] {
        let mut members = common::members(&fixture(), head());
        members[0].1 = Some(bad.to_vec());
        let (result, _) = read(&common::tar(&members));
        match result {
            Err(OctezError::Corrupt { member, .. }) => assert_eq!(member, "snapshot_version.json"),
            other => panic!("{}: {other:?}", String::from_utf8_lossy(bad)),
        }
    }
}

#[test]
fn missing_and_duplicated_members_are_named() {
    let all = common::members(&fixture(), head());
    for (member, expected) in [
        ("snapshot_version.json", "snapshot_version.json"),
        ("metadata.json", "metadata.json"),
        ("block_data", "block_data"),
        ("context", "context"),
    ] {
        let kept: Vec<_> = all
            .iter()
            .filter(|(name, _)| name != member && !name.starts_with(&format!("{member}/")))
            .cloned()
            .collect();
        let (result, _) = read(&common::tar(&kept));
        match result {
            Err(OctezError::Missing { member, .. }) => assert_eq!(member, expected),
            other => panic!("without {member}: {other:?}"),
        }
    }
    for index in [0, 1, all.len() - 1, 5] {
        let mut twice = all.clone();
        twice.push(all[index].clone());
        let (result, _) = read(&common::tar(&twice));
        match result {
            Err(OctezError::Duplicate { member, offset }) => {
                assert_eq!(member, all[index].0);
                assert!(offset > 0);
            }
            other => panic!("{} twice: {other:?}", all[index].0),
        }
    }
}

#[test]
fn every_truncation_is_an_error_naming_where() {
    let bytes = archive();
    let layout = common::layout(&bytes);
    let mut cuts: Vec<usize> = (0..bytes.len()).step_by(4999).collect();
    for (_, header_at, data_at, size) in &layout {
        // In the header, at the data's start, inside the data, at the member's end.
        for cut in [*header_at + 100, *data_at, *data_at + size / 2, *data_at + size] {
            cuts.push(cut as usize);
        }
    }
    // Just before the end-of-archive blocks: every member there, the marker gone.
    let end_of_members = layout.last().map(|(_, _, at, size)| (at + size).div_ceil(512) * 512).unwrap();
    cuts.push(end_of_members as usize);
    for cut in cuts {
        if cut >= bytes.len() {
            continue;
        }
        let (result, _) = read(&bytes[..cut]);
        match result {
            Err(
                error @ (OctezError::Archive { .. }
                | OctezError::Truncated { .. }
                | OctezError::Missing { .. }),
            ) => {
                let text = error.to_string();
                assert!(text.contains("byte"), "cut at {cut}: {text}");
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // The member and offset of a cut inside the context's prefix file.
    let (name, _, data_at, size) =
        layout.iter().find(|(name, ..)| name == "context/store.1.prefix").cloned().unwrap();
    let cut = (data_at + size / 2) as usize;
    match read(&bytes[..cut]).0 {
        Err(OctezError::Archive { member, offset, .. }) => {
            assert_eq!(member, name);
            assert!(offset > data_at && offset <= cut as u64, "{offset}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn flipped_bytes_in_each_member_are_caught() {
    let bytes = archive();
    let layout = common::layout(&bytes);
    let data_of = |member: &str| {
        layout
            .iter()
            .find(|(name, ..)| name == member)
            .map(|(_, _, at, size)| (*at as usize, *size as usize))
            .unwrap()
    };
    let flip = |at: usize, mask: u8| {
        let mut copy = bytes.clone();
        copy[at] ^= mask;
        read(&copy).0
    };
    // A tar header: its checksum.
    for (name, header_at, ..) in &layout {
        match flip(*header_at as usize + 3, 0x01) {
            Err(OctezError::Archive { .. }) => {}
            other => panic!("header of {name}: {other:?}"),
        }
    }
    // The version: `9` turned into `8`, and a broken brace.
    let (at, size) = data_of("snapshot_version.json");
    let nine = at + bytes[at..at + size].iter().position(|b| *b == b'9').unwrap();
    assert!(matches!(flip(nine, 0x01), Err(OctezError::UnsupportedVersion { found: 8, .. })));
    assert!(
        matches!(flip(at, 0x40), Err(OctezError::Corrupt { ref member, .. }) if member == "snapshot_version.json")
    );
    // The metadata: its JSON, its block hash, its level, its timestamp.
    let (at, size) = data_of("metadata.json");
    let text = String::from_utf8(bytes[at..at + size].to_vec()).unwrap();
    assert!(
        matches!(flip(at, 0x40), Err(OctezError::Corrupt { ref member, offset: 0, .. }) if member == "metadata.json")
    );
    for field in ["\"B", "41", "16:28"] {
        let offset = at + text.find(field).unwrap() + 1;
        match flip(offset, 0x01) {
            Err(OctezError::Inconsistent { .. }) => {}
            other => panic!("metadata at {field}: {other:?}"),
        }
    }
    // The block data, byte by byte over its fixed parts: the operations' size, the header, the
    // fields after the predecessor's header.
    let (at, size) = data_of("block_data");
    let mut checked = 0;
    for offset in (0..4).chain(4 + 4 + 10 + 12 * 4..size) {
        let result = flip(at + offset, 0x01);
        if offset >= size - 32 {
            // The resulting context hash: read, and checked against the context on import.
            let snapshot = result.unwrap();
            assert_ne!(snapshot.block.resulting_context_hash.0, head());
            continue;
        }
        match result {
            Err(OctezError::Corrupt { member, offset: at_member, .. }) => {
                assert_eq!(member, "block_data");
                assert!(at_member as usize <= size);
            }
            Err(OctezError::Inconsistent { .. }) => {}
            // The predecessor's own hashes and opaque protocol data are not checked by larch.
            Ok(_) => {}
            other => panic!("block_data byte {offset}: {other:?}"),
        }
        checked += 1;
    }
    assert!(checked > 100);
}

#[test]
fn context_paths_may_not_leave_the_context_directory() {
    let mut archive = common::tar(&[("snapshot_version.json".into(), Some(b"{\"version\":9}".to_vec()))]);
    archive.truncate(archive.len() - 1024);
    // A header naming `context/../evil`, written by hand (the tar crate refuses to).
    let mut header = tar::Header::new_ustar();
    header.as_mut_bytes()[..14].copy_from_slice(b"context/../evi");
    header.set_size(1);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    archive.extend_from_slice(header.as_bytes());
    archive.extend_from_slice(&[b'x'; 512]);
    archive.extend_from_slice(&[0; 1024]);
    let (result, dir) = read(&archive);
    assert!(
        matches!(result, Err(OctezError::Corrupt { ref member, .. }) if member.contains("..")),
        "{result:?}"
    );
    assert!(!dir.path().parent().unwrap().join("evi").exists());
}

/// Random flips and cuts anywhere in the archive: an error, or exactly the snapshot's block
/// (flips in bytes larch does not check: tar padding, the chain's blocks and protocols, the
/// operations' bytes, the context's files, which the import then verifies).
#[test]
fn seeded_random_corruptions_never_panic() {
    let (mut rng, seed) = seeded_rng("octez archive corruptions", 0x0c7e_2041);
    let bytes = archive();
    let (good, _) = read(&bytes);
    let good = good.unwrap();
    let (mut errors, mut survived) = (0, 0);
    for round in 0..300 {
        let mut copy = bytes.clone();
        if rng.random_bool(0.2) {
            copy.truncate(rng.random_range(0..copy.len()));
        } else {
            for _ in 0..rng.random_range(1..4) {
                // Half the flips in the first 8 KiB: the small members and their headers.
                let at = if rng.random_bool(0.5) {
                    rng.random_range(0..8192)
                } else {
                    rng.random_range(0..copy.len())
                };
                copy[at] ^= 1 << rng.random_range(0..8);
            }
        }
        match read(&copy).0 {
            Ok(snapshot) => {
                survived += 1;
                assert_eq!(snapshot.block.level, good.block.level, "seed {seed} round {round}");
                assert_eq!(snapshot.block.block_hash, good.block.block_hash, "seed {seed} round {round}");
                assert_eq!(
                    snapshot.metadata.block_hash, good.metadata.block_hash,
                    "seed {seed} round {round}"
                );
            }
            Err(error) => {
                errors += 1;
                assert!(!error.to_string().is_empty());
            }
        }
    }
    eprintln!("seed {seed}: {errors} corruptions detected, {survived} in bytes the reader does not check");
    assert!(errors > 100, "seed {seed}: {errors}");
}

#[test]
fn a_snapshot_directory_reads_in_place_with_the_same_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let members = common::members(&fixture(), head());
    let dir = tmp.path().join("raw");
    common::write_directory(&members, &dir);
    let snapshot = read_directory(&dir).unwrap();
    let (from_archive, _) = read(&archive());
    let from_archive = from_archive.unwrap();
    assert_eq!(
        (snapshot.version, &snapshot.metadata, &snapshot.block),
        (9, &from_archive.metadata, &from_archive.block)
    );
    assert_eq!(
        (snapshot.context_files, snapshot.context_bytes),
        (from_archive.context_files, from_archive.context_bytes)
    );
    std::fs::write(dir.join("snapshot_version.json"), b"{\"version\": 7}").unwrap();
    assert!(matches!(read_directory(&dir), Err(OctezError::UnsupportedVersion { found: 7, .. })));
    std::fs::write(dir.join("snapshot_version.json"), b"{\"version\": 9}").unwrap();
    std::fs::remove_file(dir.join("block_data")).unwrap();
    assert!(matches!(read_directory(&dir), Err(OctezError::Missing { member: "block_data", .. })));
    common::write_directory(&members, &dir);
    std::fs::remove_dir_all(dir.join("context")).unwrap();
    assert!(matches!(read_directory(&dir), Err(OctezError::Missing { member: "context", .. })));
}
