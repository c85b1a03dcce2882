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

/// Issue 39 item 5: the store is rewound under the running server (its chunk cut short, then
/// `recover --apply` drops the commits past the cut) and regrown past its old ends by a writer.
/// The server's reload sees the new lineage and reopens: it serves the new head, and a dropped
/// hash is unknown (404), never another commit's tree.
#[test]
fn a_rewound_store_is_reopened_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut hashes = Vec::new();
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..8u64 {
        tree.add(&["k", &format!("{i:04}")], format!("a{i:04}").into_bytes()).unwrap();
        let parents: Vec<_> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, CommitInfo::tezos(i as i64, i.to_string())).unwrap());
    }
    repo.close().unwrap();
    let config = ServerConfig { reload_interval: Duration::from_secs(3600), ..ServerConfig::default() };
    let server = TestServer::start(&path, config);
    assert_eq!(server.json("/commits/head").1["hash"], hashes[7].to_base58());
    // Cut the chunk at 60%: recovery finds a shorter chain.
    let chunk = path.join("chunk.000000");
    let len = std::fs::metadata(&chunk).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(len * 6 / 10).unwrap();
    let plan = larch_store::plan_recovery(&path).unwrap();
    let chosen = plan.chosen.as_ref().unwrap().hash;
    let kept = hashes.iter().position(|hash| *hash == chosen).unwrap() + 1;
    assert!(kept < 8, "the cut dropped nothing");
    plan.apply().unwrap();
    let dropped = hashes.split_off(kept);
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.checkout(&chosen).unwrap();
    for i in kept as u64..12 {
        tree.add(&["k", &format!("{i:04}")], format!("b{i:04}").into_bytes()).unwrap();
        hashes
            .push(repo.commit(&tree, &[*hashes.last().unwrap()], CommitInfo::tezos(i as i64, "b")).unwrap());
    }
    repo.close().unwrap();
    assert!(server.state.reload().unwrap(), "the reload reopened the store");
    assert_eq!(server.state.head(), hashes.last().copied());
    assert_eq!(server.json("/commits/head").1["hash"], hashes.last().unwrap().to_base58());
    for hash in &dropped {
        assert_eq!(server.get(&format!("/commits/{hash}")).status, 404);
    }
    let response = server.get("/context/head/raw/bytes/k/0011");
    assert_eq!(response.status, 200, "{}", response.text());
}
