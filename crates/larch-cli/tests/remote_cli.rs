//! `--lower s3://BUCKET/PREFIX` end to end, against a real S3-compatible server on loopback
//! (`s3s-fs`, in-process: crates/larch-remote/tests/common): `larch archive` uploads the sealed
//! chunks and waits for them; with the server stopped it keeps them in the spool, reports the
//! backlog and exits cleanly, and the next writer's open uploads them; `larch fsck` and
//! `larch serve` read the history back from the bucket with caches of their own; a second
//! store is refused on the same prefix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../larch-remote/tests/common/mod.rs"]
mod s3;

use common::{get, path_str, small_trace, text};
use s3::{BUCKET, S3Server};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn larch_s3(server: &S3Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).envs(server.env()).output().unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

#[test]
fn archive_to_object_storage_fsck_log_and_serve_from_it() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 40, 7);
    let store = dir.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", path_str(&trace), "--store", path_str(&store), "--chunk-size", "8K"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let url = format!("s3://{BUCKET}/ctx");
    let head = text(&larch_s3(&server, &["log", path_str(&store), "-n", "1"]).stdout);

    // The first archive: uploaded and verified before `larch archive` exits.
    let out =
        larch_s3(&server, &["archive", path_str(&store), "--lower", &url, "--keep-blocks", "20", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = json_of(&out);
    let moved = report["chunks_moved"].as_u64().unwrap();
    assert!(moved >= 2, "{report}");
    assert_eq!(report["uploads"]["uploaded"].as_u64(), Some(moved), "{report}");
    assert_eq!(report["uploads"]["backlog"].as_u64(), Some(0), "{report}");
    assert!(server.object_file("ctx/chunk.000000.sums").exists());
    assert!(server.object_file("ctx/larch-lower").exists());

    // The server stopped: the next archive keeps the chunks in the spool and says so.
    server.stop();
    let out = larch_s3(
        &server,
        &["archive", path_str(&store), "--lower", &url, "--keep-blocks", "5", "--upload-wait", "1", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = json_of(&out);
    let waiting = report["uploads"]["backlog"].as_u64().unwrap();
    assert!(waiting >= 1 && report["chunks_moved"].as_u64().unwrap() >= 1, "{report}");
    assert!(text(&out.stderr).contains("still wait for their upload"), "{}", text(&out.stderr));
    // They wait in the local spool beside the store (`STORE.remote/spool`).
    let spool = dir.path().join("store.remote/spool");
    assert_eq!(std::fs::read_dir(&spool).unwrap().count() as u64, waiting);

    // Back up: the next writer's open uploads the backlog.
    server.restart();
    let out =
        larch_s3(&server, &["archive", path_str(&store), "--lower", &url, "--keep-blocks", "5", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = json_of(&out);
    assert_eq!(report["uploads"]["uploaded"].as_u64(), Some(waiting), "{report}");
    assert_eq!(report["uploads"]["backlog"].as_u64(), Some(0), "{report}");
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0);

    // Readers with caches of their own (as on another machine with a copy of the store
    // directory): fsck clean, the same head.
    let cache = dir.path().join("fsck-cache");
    let out =
        larch_s3(&server, &["fsck", path_str(&store), "--lower", &url, "--cache-dir", path_str(&cache)]);
    assert!(out.status.success(), "fsck: {}{}", text(&out.stdout), text(&out.stderr));
    assert!(std::fs::read_dir(cache.join("blocks")).unwrap().count() > 0, "fsck read through its cache");
    assert!(text(&out.stderr).contains("hit ratio"), "{}", text(&out.stderr));

    let serve_cache = dir.path().join("serve-cache");
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["serve", path_str(&store), "--listen", "127.0.0.1:0", "--lower", &url, "--cache-dir"])
        .arg(&serve_cache)
        .envs(server.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("larch serve: listening on http://").unwrap().parse().unwrap();
    let (status, body) = get(addr, "/commits/head");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
    assert!(head.contains(body["hash"].as_str().unwrap_or("?")), "{body} vs {head}");

    // Another store is refused on the prefix.
    let other = dir.path().join("other");
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", path_str(&trace), "--store", path_str(&other), "--chunk-size", "8K"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = larch_s3(&server, &["archive", path_str(&other), "--lower", &url, "--keep-blocks", "5"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("refused"), "{}", text(&out.stderr));
    assert!(!Path::new(&dir.path().join("other.remote/spool/chunk.000000")).exists());
}
