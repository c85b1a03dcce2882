//! The independent Python reader (`scripts/snapshot_reader.py`) walks a snapshot written by the
//! exporter and recomputes the same hashes; it rejects forged and corrupted ones. Requires
//! `python3` (CI has it): a missing interpreter fails the test rather than skipping it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use larch_snapshot::ExportOptions;
use larch_store::Repo;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn reader(file: &Path) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/snapshot_reader.py");
    Command::new("python3")
        .arg(&script)
        .arg(file)
        .output()
        .expect("python3 is required to run the snapshot reader test (CI has it)")
}

#[test]
fn the_python_reader_recomputes_every_hash_of_an_exported_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store(&dir.path().join("store"));
    let repo = Repo::open_read_only(dir.path().join("store")).unwrap();
    let details = repo.commit_details(&hashes[2]).unwrap();
    for (name, options) in [
        ("deflated", ExportOptions::default()),
        ("stored, small window", ExportOptions { compression: None, window: 5 }),
    ] {
        let file = dir.path().join(format!("{name}.snap"));
        std::fs::write(&file, export_bytes(&repo, None, options)).unwrap();
        let out = reader(&file);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("commit {} {}", hashes[2], hashes[2].to_hex())), "{stdout}");
        assert!(
            stdout.contains(&format!("tree {} {}", details.tree_hash, details.tree_hash.to_hex())),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("parent {}", hashes[1])), "{stdout}");
        assert!(stdout.contains("message lvl 2"), "{stdout}");
        // The same objects and the same BLAKE2b work as the Rust decoder.
        let decoded = larch_snapshot::verify(&std::fs::read(&file).unwrap()[..], &mut |_| {}).unwrap();
        let counts = format!(
            "objects {} records {} frames {} stream-bytes {} file-bytes {} hashed-bytes {}",
            decoded.counts.objects(),
            decoded.counts.records,
            decoded.frames,
            decoded.stream_bytes,
            decoded.file_bytes,
            decoded.counts.hashed_bytes
        );
        assert!(stdout.contains(&counts), "{stdout} vs {counts}");
    }
}

#[test]
fn the_python_reader_rejects_forged_and_corrupted_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let hashes = build_store(&dir.path().join("store"));
    let repo = Repo::open_read_only(dir.path().join("store")).unwrap();
    // Stored frames: several of them for this small tree.
    let file = export_bytes(&repo, None, ExportOptions { compression: None, ..Default::default() });
    // Forged: the commit claim changed, checksums valid.
    let (mut forged, window) = stream(&file);
    let at = find(&forged, hashes[2].as_bytes()).unwrap();
    forged[at] ^= 1;
    let path = dir.path().join("forged.snap");
    std::fs::write(&path, reframe(&forged, window)).unwrap();
    let out = reader(&path);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("commit record") && stderr.contains("hash mismatch"), "{stderr}");
    // Corrupted: a flipped bit in the second frame.
    let frames = frames(&file);
    assert!(frames.len() >= 2);
    let mut corrupted = file.clone();
    corrupted[frames[1].offset + 20] ^= 8;
    std::fs::write(&path, corrupted).unwrap();
    let out = reader(&path);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("corrupt frame at offset {}", frames[1].offset)), "{stderr}");
}
