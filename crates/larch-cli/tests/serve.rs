//! `larch serve` as a user runs it: a child process serving a store that another process writes,
//! read over HTTP, stopped by SIGTERM; and a writer SIGKILLed in the middle of a replay.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{get, serve};
use larch_core::{CommitInfo, Hash};
use larch_store::Repo;
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// Waits for the child to exit (at most `limit`), returning its status and stderr.
fn wait(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the child did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stderr)
}

fn wait_for_head(addr: SocketAddr, expected: &Hash, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let (status, head) = get(addr, "/commits/head");
        if status == 200 && head["hash"] == expected.to_base58() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "head is {head}, not {expected}, after {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn serve_follows_a_writer_process_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // This test process is the writer; the server is another process.
    let mut repo = Repo::open(&store).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    let genesis = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis")).unwrap();

    let (server, addr) = serve(&store, &["--reload-ms", "20"]).unwrap();
    assert_eq!(
        get(addr, "/context/head/raw/bytes/data/version"),
        (200, serde_json::json!(hex::encode("genesis")))
    );
    assert_eq!(get(addr, "/commits/head").1["hash"], genesis.to_base58());

    tree.add(&["data", "version"], b"next".to_vec()).unwrap();
    let next = repo.commit(&tree, &[genesis], CommitInfo::tezos(1530374882, "lvl 1")).unwrap();
    // Only the timer reloads here (no request names the new hash before it is the head).
    let lag = wait_for_head(addr, &next, Duration::from_secs(5));
    eprintln!("the new head was served {lag:?} after its commit");
    assert_eq!(get(addr, "/context/head/raw/bytes/data/version").1, serde_json::json!(hex::encode("next")));
    // The old commit is still served by hash.
    assert_eq!(get(addr, &format!("/context/{genesis}/raw/bytes/data/version")).1, hex::encode("genesis"));
    // The server took no lock: this writer still commits, and could reopen after closing.
    repo.close().unwrap();
    drop(Repo::open(&store).unwrap());

    signal(&server, "TERM");
    let (status, stderr) = wait(server, Duration::from_secs(10));
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("SIGTERM received") && stderr.contains("stopped"), "{stderr}");
}

#[test]
fn serve_reports_a_directory_that_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let err = serve(dir.path(), &[]).unwrap_err();
    assert!(err.contains("cannot open the store") && err.contains("not a larch store"), "{err}");
    assert!(err.contains("exit status: 2"), "{err}");
}

#[test]
fn serve_keeps_serving_when_the_writer_is_killed_mid_replay() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut writer = Command::new(env!("CARGO_BIN_EXE_larch"))
        .args(["replay", "--store", store.to_str().unwrap(), "--blocks", "300", "--no-check"])
        // The trace it generates goes into a temporary directory that SIGKILL leaves behind:
        // within this test's own.
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Start the server once the writer has published a head.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (server, addr) = loop {
        if Repo::open_read_only(&store).ok().and_then(|r| r.head()).is_some() {
            break serve(&store, &["--reload-ms", "20"]).unwrap();
        }
        assert!(writer.try_wait().unwrap().is_none(), "the replay ended early");
        assert!(Instant::now() < deadline, "no head after 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Watch the head move a few times, reading the whole top of the tree each time.
    let mut heads = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while heads.len() < 4 {
        let (status, head) = get(addr, "/commits/head");
        assert_eq!(status, 200);
        let (status, top) =
            get(addr, &format!("/context/{}/raw/bytes?depth=2", head["hash"].as_str().unwrap()));
        assert_eq!(status, 200, "{top}");
        assert!(top["data"].is_object(), "{top}");
        if heads.last() != Some(&head["hash"]) {
            heads.push(head["hash"].clone());
        }
        assert!(Instant::now() < deadline, "the head moved only {} times in 60 s", heads.len());
        std::thread::sleep(Duration::from_millis(20));
    }
    writer.kill().unwrap(); // SIGKILL, mid-replay
    assert!(!writer.wait().unwrap().success());
    // A publish the writer made but had not confirmed durable when it died becomes visible once a
    // reader, with no writer left, syncs the control file itself (docs/store.md): let the server's
    // reloads settle before taking the head it must then keep.
    std::thread::sleep(Duration::from_millis(500));
    let (_, last) = get(addr, "/commits/head");
    let (status, health) = get(addr, "/health");
    assert_eq!((status, &health["status"]), (200, &serde_json::json!("ok")));
    std::thread::sleep(Duration::from_millis(100));
    // Still the last published head, still readable.
    assert_eq!(get(addr, "/commits/head").1["hash"], last["hash"]);
    let (status, _) = get(addr, "/context/head/raw/bytes/data/contracts?depth=1");
    assert_eq!(status, 200);
    let reader = Repo::open_read_only(&store).unwrap();
    assert_eq!(reader.head().map(|h| h.to_base58()), last["hash"].as_str().map(str::to_string));
    signal(&server, "TERM");
    let (status, stderr) = wait(server, Duration::from_secs(10));
    assert!(status.success(), "{status}: {stderr}");
}
