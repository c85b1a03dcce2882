//! A request racing a GC: the server's handle keeps at most `open_files` chunk files open, so once
//! a writer's GC has retired (unlinked) old chunks, a read of the head's data there finds the file
//! gone. The store's read-only layout follows the GC by itself (it reads the control file again and
//! reads through the new layout, docs/store.md *Readers beside a GC*): the request succeeds with the
//! head's values instead of a 500, without a reload, and the layout's refreshes are counted in
//! `/metrics`; a commit the GC collected answers 404. Deterministic: one chunk per commit, a pool of
//! one descriptor, and no timer reload during the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use larch_core::{CommitInfo, Hash};
use larch_server::ServerConfig;
use larch_store::{Repo, RepoOptions};
use std::path::Path;
use std::time::{Duration, Instant};

const COMMITS: u64 = 24;

/// Longer than `INLINE_MAX` (256 bytes): each value is a record of its own, in its commit's chunk.
fn value(i: u64) -> Vec<u8> {
    format!("value {i:05} in the chunk of its commit; ").repeat(12).into_bytes()
}

fn key(i: u64) -> String {
    format!("{i:05}")
}

fn chunk_files(path: &Path) -> usize {
    std::fs::read_dir(path)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk."))
        .count()
}

fn metric(server: &TestServer, name: &str) -> u64 {
    let text = server.get("/metrics").text();
    let line = text
        .lines()
        .find(|line| line.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"));
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn reads_of_chunks_retired_by_a_gc_are_answered_after_a_reload() {
    race(false);
}

/// The same, with every request answered on the blocking pool (`--blocking-reads`).
#[test]
fn reads_on_the_blocking_pool_are_answered_after_a_reload() {
    race(true);
}

fn race(blocking_reads: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    // One commit per chunk: the writer rolls at every commit once its head chunk holds a byte.
    let options = RepoOptions { chunk_bytes: 1, ..RepoOptions::default() };
    let mut repo = Repo::open_with(&path, options).unwrap();
    let mut tree = repo.empty_tree();
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..COMMITS {
        tree.add(&["k", &key(i)], value(i)).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, CommitInfo::tezos(i as i64, "c")).unwrap());
    }
    let head = *hashes.last().unwrap();
    let before = chunk_files(&path);
    assert!(before as u64 >= COMMITS, "{before} chunk files for {COMMITS} commits");

    // A pool of one descriptor, a cache too small to keep the values, and no timer reload.
    let config = ServerConfig {
        open_files: 1,
        cache_bytes: 1,
        reload_interval: Duration::from_secs(3600),
        blocking_reads,
        ..ServerConfig::default()
    };
    let server = TestServer::start(&path, config);
    // The reload timer's first tick is immediate: let it pass, so that no reload comes later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&server, "larch_store_reloads_total") == 0 {
        assert!(Instant::now() < deadline, "the reload task never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(server.json("/commits/head").1["hash"], head.to_base58());
    // Reads across the chunks: the pool opens and evicts them one after the other.
    for i in (1..COMMITS).step_by(2) {
        let (status, body) = server.json(&format!("/context/head/raw/bytes/k/{}", key(i)));
        assert_eq!((status, body), (200, serde_json::json!(hex::encode(value(i)))), "key {i}");
    }
    let stats = server.state.store_stats();
    assert!(stats.chunk_files_open <= 1 + 2, "{stats:?}");
    assert!(stats.chunk_file_opens > stats.chunk_files, "nothing was reopened: {stats:?}");
    let reloads = metric(&server, "larch_store_reloads_total");

    // The writer collects everything below the head: the chunks of the older commits are retired
    // and unlinked when `gc` returns (the head's values there were copied to a segment).
    repo.gc(&head).unwrap();
    let after = chunk_files(&path);
    assert!(after + (COMMITS as usize) / 2 < before, "the GC retired too few chunks: {before} -> {after}");
    assert_eq!(metric(&server, "larch_store_reloads_total"), reloads, "the server reloaded on its own");
    assert_eq!(metric(&server, "larch_store_missing_file_retries_total"), 0);

    // The head's values in retired chunks: the first read finds its chunk gone, the layout follows
    // the GC, and it is answered; the rest read the new layout.
    for i in (0..COMMITS).step_by(2) {
        let response = server.get(&format!("/context/head/raw/bytes/k/{}", key(i)));
        assert_eq!(response.status, 200, "key {i}: {}", response.text());
        let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body, serde_json::json!(hex::encode(value(i))), "key {i}");
    }
    let (status, all) = server.json("/context/head/raw/bytes/k");
    assert_eq!(status, 200, "{all}");
    let expected: serde_json::Map<String, serde_json::Value> =
        (0..COMMITS).map(|i| (key(i), serde_json::json!(hex::encode(value(i))))).collect();
    assert_eq!(all, serde_json::Value::Object(expected));
    let retries = metric(&server, "larch_store_missing_file_retries_total");
    assert!(retries >= 1, "no read found a retired chunk: the race was not reproduced");
    assert_eq!(metric(&server, "larch_store_reloads_total"), reloads, "answered without a reload");
    // A commit the GC collected, still in the handle's commit map: 404, as after a reload.
    let (status, body) = server.json(&format!("/commits/{}", hashes[0].to_base58()));
    assert_eq!(status, 404, "{body}");
    eprintln!("{before} chunk files before the GC, {after} after; {retries} read(s) followed the GC");
    repo.close().unwrap();
}
