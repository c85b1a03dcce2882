//! `larch archive`: a replay with small chunks, then `archive --keep-blocks N --json` moves the
//! sealed chunks below the commit N blocks behind the head to the lower directory; the store then
//! refuses to open without it (the CLI's read commands say `--lower`), reads every commit and
//! passes fsck with it; a second call with `--commit head` moves the rest of the sealed chunks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;
use common::{file_names, larch, larch_json, path_str, small_trace, text};
use larch_store::{Repo, RepoOptions};

#[test]
fn archive_moves_sealed_chunks_and_the_store_reads_with_its_lower_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 20, 11);
    let store = dir.path().join("store");
    let lower = dir.path().join("lower");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--chunk-size", "8K"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let before = file_names(&store, "chunk.");
    assert!(before.len() >= 5, "{before:?}");

    let report = larch_json(&[
        "archive",
        path_str(&store),
        "--lower",
        path_str(&lower),
        "--keep-blocks",
        "5",
        "--json",
    ]);
    let moved = report["chunks_moved"].as_u64().unwrap();
    assert!(moved >= 2, "{report}");
    assert_eq!(report["commit_chunk"].as_u64().unwrap(), moved, "{report}");
    assert_eq!(report["flag_published"], true, "{report}");
    assert_eq!(file_names(&lower, "chunk."), before[..moved as usize].to_vec());
    assert_eq!(file_names(&store, "chunk."), before[moved as usize..].to_vec());
    let bytes: u64 = file_names(&lower, "chunk.")
        .iter()
        .map(|name| std::fs::metadata(lower.join(name)).unwrap().len())
        .sum();
    assert_eq!(report["bytes_moved"].as_u64().unwrap(), bytes, "{report}");
    // The lower directory also holds its marker, naming the store it serves.
    let marker = std::fs::metadata(lower.join("larch-lower")).unwrap().len();
    assert_eq!(report["lower_bytes_after"].as_u64().unwrap(), bytes + marker, "{report}");
    assert!(report["upper_bytes_after"].as_u64().unwrap() < report["upper_bytes_before"].as_u64().unwrap());

    // Without the lower directory, the store says how to open it.
    let out = larch(&["fsck", path_str(&store)]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--lower"), "{}", text(&out.stderr));
    // With it: every commit (the whole history of the head), fsck clean.
    let options = RepoOptions { lower: Some(lower.clone()), ..RepoOptions::default() };
    let repo = Repo::open_read_only_options(&store, options).unwrap();
    let head = repo.head().unwrap();
    let history = repo.log(&head).unwrap();
    assert!(history.len() >= 20, "{} commits", history.len());
    for commit in &history {
        repo.checkout(commit).unwrap();
    }
    let fsck = repo.fsck();
    assert!(fsck.is_clean(), "{fsck}");
    drop(repo);
    // The read commands take the global `--lower DIR` and read through it.
    let out = larch(&["fsck", path_str(&store), "--lower", path_str(&lower)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = larch(&["--lower", path_str(&lower), "log", path_str(&store), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(log.as_array().unwrap().len(), history.len());
    let oldest = log.as_array().unwrap().last().unwrap()["hash"].as_str().unwrap().to_string();
    let out = larch(&["ls", path_str(&store), "--lower", path_str(&lower), "--commit", &oldest, "/"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = larch(&["ls", path_str(&store), "--commit", &oldest, "/"]);
    assert!(!out.status.success(), "without --lower the moved chunks are not found");
    let out = larch(&["stats", path_str(&store), "--lower", path_str(&lower)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // `larch archive` without `--lower` says it needs it.
    let out = larch(&["archive", path_str(&store), "--keep-blocks", "3"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--lower"), "{}", text(&out.stderr));

    // At the head: the rest of the sealed chunks; the ones moved before are counted, not copied.
    let report =
        larch_json(&["archive", path_str(&store), "--lower", path_str(&lower), "--commit", "head", "--json"]);
    assert_eq!(report["chunks_already_lower"].as_u64().unwrap(), moved, "{report}");
    assert_eq!(report["flag_published"], false, "{report}");
    let head_chunk = report["commit_chunk"].as_u64().unwrap() as usize;
    assert_eq!(file_names(&lower, "chunk."), before[..head_chunk].to_vec());
    // Text output, and a history shorter than --keep-blocks moves nothing.
    let out = larch(&["archive", path_str(&store), "--lower", path_str(&lower), "--keep-blocks", "1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("nothing to archive"), "{}", text(&out.stdout));
    let out = larch(&["archive", path_str(&store), "--lower", path_str(&lower), "--keep-blocks", "0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("moved 0 chunk files"), "{}", text(&out.stdout));
}

/// Issue 39 item 1: `larch gc B --lower A` (A another store's directory) is refused and leaves A
/// intact: every chunk file byte for byte, fsck clean. A lower directory serving A is refused for B.
#[test]
fn another_stores_directory_given_as_lower_is_refused_and_left_intact() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 12, 7);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&a), "--chunk-size", "4K"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&b)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let chunks = file_names(&a, "chunk.");
    assert!(chunks.len() >= 2, "{chunks:?}");
    let read = |names: &[String]| -> Vec<Vec<u8>> {
        names.iter().map(|name| std::fs::read(a.join(name)).unwrap()).collect()
    };
    let before = read(&chunks);
    for args in [
        vec!["gc", path_str(&b), "--lower", path_str(&a), "--keep-blocks", "1"],
        vec!["archive", path_str(&b), "--lower", path_str(&a), "--keep-blocks", "1"],
        vec!["fsck", path_str(&b), "--lower", path_str(&a)],
    ] {
        let out = larch(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("lower directory") && stderr.contains("refused"), "{args:?}: {stderr}");
    }
    assert_eq!(file_names(&a, "chunk."), chunks, "store A lost chunk files");
    assert_eq!(read(&chunks), before, "store A's chunk files changed");
    let out = larch(&["fsck", path_str(&a)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));

    // A's own lower directory, then B naming it: refused, A reads on.
    let lower = dir.path().join("lower");
    let out = larch(&["archive", path_str(&a), "--lower", path_str(&lower), "--keep-blocks", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = larch(&["gc", path_str(&b), "--lower", path_str(&lower), "--keep-blocks", "1"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("serves the store"), "{}", text(&out.stderr));
    let out = larch(&["fsck", path_str(&a), "--lower", path_str(&lower)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
}
