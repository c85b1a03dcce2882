//! `larch serve --remote s3://BUCKET/PREFIX --cache-dir DIR` end to end, against a real
//! S3-compatible server on loopback (`s3s-fs`, in-process: crates/larch-remote/tests/common):
//! `larch archive --lower s3://…` uploads the sealed chunks and publishes the replica manifest;
//! a replica process with no store directory serves the writer's head and its history, the same
//! bytes as `larch serve STORE --lower s3://…`, and reports its staleness in `/health`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../larch-remote/tests/common/mod.rs"]
mod s3;

use common::{path_str, small_trace, text};
use s3::{BUCKET, S3Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `larch serve` process, killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(server: &S3Server, args: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_larch"))
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .envs(server.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("larch serve: listening on http://")
        .unwrap_or_else(|| panic!("not listening: {line:?}"))
        .parse()
        .unwrap();
    Served { child, addr }
}

/// One GET: status and body.
fn get(addr: SocketAddr, target: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), body.to_string())
}

fn json(addr: SocketAddr, target: &str) -> serde_json::Value {
    let (status, body) = get(addr, target);
    assert_eq!(status, 200, "{target}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_replica_process_serves_what_the_writer_published() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 40, 11);
    let store = dir.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", path_str(&trace), "--store", path_str(&store), "--chunk-size", "8K"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let url = format!("s3://{BUCKET}/ctx");

    // A writer that publishes no manifest (`--manifest-interval 0`) creates the prefix (its
    // `larch-lower` marker, archived chunks): the replica says there is no manifest, and exits.
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args([
            "archive",
            path_str(&store),
            "--lower",
            &url,
            "--keep-blocks",
            "20",
            "--manifest-interval",
            "0",
        ])
        .envs(server.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(server.object_file("ctx/larch-lower").exists());
    assert!(!server.object_file("ctx/manifest").exists());
    let cache = dir.path().join("replica");
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["serve", "--remote", &url, "--cache-dir", path_str(&cache), "--listen", "127.0.0.1:0"])
        .envs(server.env())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("has no manifest: no writer published one yet"),
        "{}",
        text(&out.stderr)
    );

    // The writer archives to the bucket and publishes the manifest before it exits.
    let out = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["archive", path_str(&store), "--lower", &url, "--keep-blocks", "10"])
        .envs(server.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(server.object_file("ctx/manifest").exists());

    let replica = serve(&server, &["--remote", &url, "--cache-dir", path_str(&cache), "--poll-ms", "200"]);
    let local_cache = dir.path().join("local-cache");
    let local = serve(&server, &[path_str(&store), "--lower", &url, "--cache-dir", path_str(&local_cache)]);
    let head = json(replica.addr, "/commits/head");
    assert_eq!(head, json(local.addr, "/commits/head"));
    // Back through the history: every commit's bytes are the writer's store's.
    let mut commit = head;
    for _ in 0..30 {
        let hash = commit["hash"].as_str().unwrap().to_string();
        let target = format!("/context/{hash}/raw/bytes?depth=4");
        assert_eq!(get(replica.addr, &target), get(local.addr, &target), "{target}");
        let Some(parent) = commit["parents"][0].as_str() else { break };
        commit = json(replica.addr, &format!("/commits/{parent}"));
    }
    let health = json(replica.addr, "/health");
    assert_eq!(health["replica"]["url"].as_str(), Some(url.as_str()), "{health}");
    assert!(health["replica"]["manifest_generation"].as_u64().is_some_and(|g| g >= 1), "{health}");
    assert!(health["replica"]["manifest_age_seconds"].as_f64().is_some(), "{health}");
    assert!(Path::new(&cache.join("mirror/control")).exists());
}
