//! A writer commits (its own `Repo::open` handle on the same directory) while the server serves:
//! every response stays well-formed, a published commit is served at once by hash, and the new
//! head appears at `/commits/head` within a bounded time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use larch_core::CommitInfo;
use larch_server::ServerConfig;
use larch_store::Repo;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const COMMITS: u64 = 40;

#[test]
fn new_commits_are_served_while_a_writer_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["counter"], 0u64.to_be_bytes().to_vec()).unwrap();
    let first = repo.commit(&tree, &[], CommitInfo::tezos(0, "0")).unwrap();

    // The server's timer reloads rarely here: new hashes must be found by reloading on a miss.
    let config = ServerConfig { reload_interval: Duration::from_millis(50), ..ServerConfig::default() };
    let server = TestServer::start(&path, config);
    assert_eq!(server.json("/commits/head").1["hash"], first.to_base58());

    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(2));
    // A reader polling the head's counter: always 200, never going backwards.
    let reader = {
        let (done, start, addr) = (done.clone(), start.clone(), server.addr);
        std::thread::spawn(move || {
            start.wait();
            let mut last = 0u64;
            let mut reads = 0u32;
            while !done.load(Ordering::Relaxed) {
                let response = common::request(addr, "GET", "/context/head/raw/bytes/counter");
                assert_eq!(response.status, 200, "{}", response.text());
                let hex: String = serde_json::from_slice(&response.body).unwrap();
                let value = u64::from_be_bytes(hex::decode(hex).unwrap().try_into().unwrap());
                assert!(value >= last, "head went backwards: {value} after {last}");
                last = value;
                reads += 1;
            }
            (reads, last)
        })
    };
    start.wait();
    let mut parent = first;
    for i in 1..=COMMITS {
        tree.add(&["counter"], i.to_be_bytes().to_vec()).unwrap();
        tree.add(&["log", &format!("{i:03}")], vec![i as u8]).unwrap();
        parent = repo.commit(&tree, &[parent], CommitInfo::tezos(i as i64, i.to_string())).unwrap();
        // Published (fsync'd and in the control file) when commit returns: served by hash at once.
        let (status, commit) = server.json(&format!("/commits/{parent}"));
        assert_eq!(status, 200, "commit {i}: {commit}");
        assert_eq!(commit["message"], i.to_string());
        let (status, value) = server.json(&format!("/context/{parent}/raw/bytes/log/{i:03}"));
        assert_eq!((status, value), (200, serde_json::json!(hex::encode([i as u8]))));
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = parent;
    // The timer's reload makes it the head within a bounded time.
    let deadline = Instant::now() + Duration::from_secs(5);
    let waited = Instant::now();
    loop {
        let (_, head) = server.json("/commits/head");
        if head["hash"] == last.to_base58() {
            break;
        }
        assert!(Instant::now() < deadline, "head still {head} 5 s after the last commit");
        std::thread::sleep(Duration::from_millis(5));
    }
    let lag = waited.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    done.store(true, Ordering::Relaxed);
    let (reads, seen) = reader.join().unwrap();
    eprintln!("head seen {lag:?} after the last commit; the reader made {reads} reads, last counter {seen}");
    assert!(reads > 0);
    assert_eq!(seen, COMMITS);
    assert_eq!(server.json("/health").1["commits"], COMMITS + 1);
    repo.close().unwrap();
}
