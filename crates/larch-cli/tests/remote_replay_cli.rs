//! Issue 43's own check, at test scale: `larch replay` in archive mode against a real
//! S3-compatible server on loopback (`s3s-fs`, in-process: crates/larch-remote/tests/common),
//! with the server stopped for a while in the middle (6 s here, the 30 s scaled down:
//! long enough for several uploads to fail and be retried with backoff). The writer reports no
//! error, its uploads catch up before it exits, `larch fsck --lower s3://...` with a cache of its
//! own is clean, and a second store is refused on the same prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../larch-remote/tests/common/mod.rs"]
mod s3;

use common::{path_str, small_trace, text};
use s3::{BUCKET, S3Server};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn replay_in_archive_mode_through_a_stopped_server() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (trace, head) = small_trace(dir.path(), 400, 11);
    let store = dir.path().join("store");
    let url = format!("s3://{BUCKET}/replay");
    let (out_path, err_path) = (dir.path().join("replay.json"), dir.path().join("replay.err"));
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", path_str(&trace), "--store", path_str(&store), "--chunk-size", "8K"])
        .args(["--lower", &url, "--archive-every", "5", "--archive-keep", "20", "--json"])
        .envs(server.env())
        .stdout(Stdio::from(std::fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err_path).unwrap()))
        .spawn()
        .unwrap();
    // The outage starts once the first chunk is uploaded (the replay is then in its first blocks).
    let first = server.object_file("replay/chunk.000000.sums");
    while !first.exists() {
        assert!(child.try_wait().unwrap().is_none(), "{}", std::fs::read_to_string(&err_path).unwrap());
        assert!(started.elapsed() < Duration::from_secs(120), "no upload within two minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.stop();
    let stopped = Instant::now();
    // 6 s by default; the 30 s with `LARCH_TEST_OUTAGE_SECS=30`.
    let outage = std::env::var("LARCH_TEST_OUTAGE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    std::thread::sleep(Duration::from_secs(outage));
    let running_at_restart = child.try_wait().unwrap().is_none();
    server.restart();
    println!("server stopped for {:?}; the replay still ran: {running_at_restart}", stopped.elapsed());
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let archive = &report["archive"];
    println!("archive: {archive}");
    assert!(archive["runs"].as_u64().unwrap() >= 50, "{archive}");
    let moved = archive["chunks_moved"].as_u64().unwrap();
    let uploads = &archive["uploads"];
    // Several attempts failed during the outage and were retried; the backlog drained.
    assert!(uploads["failures"].as_u64().unwrap() >= 3, "{archive}");
    assert_eq!(uploads["backlog"].as_u64(), Some(0), "{archive}");
    assert_eq!(uploads["uploaded"].as_u64(), Some(moved), "{archive}");
    assert!(uploads["last_error"].is_null(), "{archive}");
    // Chunks waited in the spool while the server was away and the writer went on committing.
    assert!(archive["max_backlog"].as_u64().unwrap() >= 2, "{archive}");
    assert!(head.contains(report["last_commit"].as_str().unwrap()), "{report}");
    assert_eq!(std::fs::read_dir(dir.path().join("store.remote/spool")).unwrap().count(), 0);

    // fsck from the bucket, with a cache of its own: clean.
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["fsck", path_str(&store), "--lower", &url, "--cache-dir"])
        .arg(dir.path().join("fsck-cache"))
        .envs(server.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "fsck: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("no problems found"), "{}", text(&out.stdout));

    // A second store is refused on the same prefix, by the replay itself.
    let other = dir.path().join("other");
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", path_str(&trace), "--store", path_str(&other), "--chunk-size", "8K"])
        .args(["--lower", &url, "--archive-every", "5", "--archive-keep", "20"])
        .envs(server.env())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("refused"), "{}", text(&out.stderr));
}

/// The hashes `larch log --json` prints for the head's history, read through `url`.
fn history(server: &S3Server, store: &std::path::Path, url: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["log", path_str(store), "--json", "--lower", url])
        .envs(server.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    log.as_array().unwrap().iter().map(|commit| commit["hash"].as_str().unwrap().to_string()).collect()
}

#[test]
fn recover_takes_a_lower_layer_in_object_storage() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 40, 29);
    let store = dir.path().join("store");
    let url = format!("s3://{BUCKET}/recover");
    let larch = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_larch")).args(args).envs(server.env()).output().unwrap()
    };
    let out = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store),
        "--chunk-size",
        "8K",
        "--lower",
        &url,
        "--archive-every",
        "5",
        "--archive-keep",
        "4",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(server.object_file("recover/chunk.000001.sums").exists());
    let before = history(&server, &store, &url);
    assert_eq!(before.len(), 42);

    // As it is: without the lower layer it says `--lower`; with it, nothing to do.
    let out = larch(&["recover", path_str(&store)]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--lower"), "{}", text(&out.stderr));
    let out = larch(&["recover", path_str(&store), "--lower", &url]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("nothing to do"), "{}", text(&out.stdout));

    // Both control slots torn: rebuilt from the files, the sealed chunks read from the bucket.
    let file = std::fs::OpenOptions::new().write(true).open(store.join("control")).unwrap();
    file.set_len(40).unwrap();
    drop(file);
    // The bucket's objects (names and bytes) before recovery: recovery must not change them.
    let bucket = |server: &S3Server| -> Vec<(String, Vec<u8>)> {
        let mut objects: Vec<(String, Vec<u8>)> = std::fs::read_dir(server.object_file("recover"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        objects.sort();
        objects
    };
    let objects_before = bucket(&server);
    let out = larch(&["recover", path_str(&store), "--apply"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--lower"), "{}", text(&out.stderr));
    let out = larch(&["recover", path_str(&store), "--lower", &url, "--apply"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("published: the store now stands on"), "{stdout}");
    assert_eq!(history(&server, &store, &url), before);
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["fsck", path_str(&store), "--lower", &url, "--cache-dir"])
        .arg(dir.path().join("fsck-cache"))
        .envs(server.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    // Recovery never wrote the bucket (the writer's objects, manifest and pieces included, as
    // they were); the fsck's reads neither.
    let after = bucket(&server);
    let names = |objects: &[(String, Vec<u8>)]| objects.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(&objects_before));
    assert!(after == objects_before, "an object's bytes changed");
}
