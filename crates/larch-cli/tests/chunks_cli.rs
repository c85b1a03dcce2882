//! `larch` on a chunked store (format 3): a replay with a small `--chunk-size` rolls through many
//! chunk files; `stats` and `fsck` list them; a snapshot exported from it imports and verifies;
//! `recover` scans every chunk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;
use common::{larch, path_str, small_trace, text};
use std::path::Path;

fn chunk_count(store: &Path) -> usize {
    std::fs::read_dir(store)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk."))
        .count()
}

#[test]
fn a_replay_with_small_chunks_is_listed_checked_exported_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, head) = small_trace(dir.path(), 20, 7);
    let store = dir.path().join("store");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--chunk-size", "8K"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let chunks = chunk_count(&store);
    assert!(chunks >= 5, "{chunks} chunk files");
    assert!(!store.join("pack").exists());

    let out = larch(&["stats", path_str(&store)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("chunks       {chunks} files (chunk.000000 to")),
        "{}",
        text(&out.stdout)
    );
    let out = larch(&["stats", path_str(&store), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = json["chunk_files"].as_array().unwrap();
    assert_eq!(listed.len(), chunks);
    assert_eq!(listed[0]["start"], 16);
    for pair in listed.windows(2) {
        assert_eq!(pair[0]["end"], pair[1]["start"], "chunks continue one another");
    }
    assert_eq!(listed[chunks - 1]["end"], json["pack_bytes"]);

    let out = larch(&["fsck", path_str(&store)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("chunks: {chunks} files")), "{}", text(&out.stdout));

    let snap = dir.path().join("head.snap");
    let out = larch(&["snapshot", "export", path_str(&store), path_str(&snap)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let imported = dir.path().join("imported");
    let out = larch(&["snapshot", "import", path_str(&snap), path_str(&imported)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("imported commit {head}")), "{}", text(&out.stdout));
    assert!(imported.join("chunk.000000").exists());
    let out = larch(&["fsck", path_str(&imported)]);
    assert!(out.status.success(), "{}", text(&out.stdout));

    // The control file lost: recover finds the newest commit across every chunk.
    std::fs::write(store.join("control"), b"").unwrap();
    let out = larch(&["recover", path_str(&store), "--apply"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = larch(&["log", path_str(&store)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&head), "{}", text(&out.stdout));
    let out = larch(&["fsck", path_str(&store)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
}

#[test]
fn a_replay_keeps_as_few_chunk_files_open_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 20, 11);
    let store = dir.path().join("store");
    // One sealed chunk file open at a time: every read of another chunk reopens it, and every
    // read and commit hash still checks against the trace.
    let out = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store),
        "--chunk-size",
        "8K",
        "--open-files",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(chunk_count(&store) >= 5, "{} chunk files", chunk_count(&store));
    let out = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&dir.path().join("s2")),
        "--open-files",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("at least one chunk file"), "{}", text(&out.stderr));
}

#[test]
fn the_check_after_a_replay_keeps_to_its_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 60, 3);
    let store = dir.path().join("store");
    // 60 blocks in 8 KiB chunks: more chunk files than the process may open (24 descriptors);
    // with one chunk file open at a time, the replay and the fsck after it both fit.
    let script = "ulimit -n 24 && exec \"$@\"";
    let out = std::process::Command::new("sh")
        .args(["-c", script, "sh", env!("CARGO_BIN_EXE_larch"), "replay", path_str(&trace), "--store"])
        .args([path_str(&store), "--chunk-size", "8K", "--open-files", "1", "--fsck"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(chunk_count(&store) > 24, "{} chunk files", chunk_count(&store));
    assert!(text(&out.stdout).contains("no problems found"), "{}", text(&out.stdout));
}
