//! Read replicas served over HTTP (`ServerState::open_remote`), against a real S3-compatible
//! server on loopback (`s3s-fs` in-process: crates/larch-remote/tests/common): a writer in archive
//! mode commits and publishes manifests; two replicas with caches of their own follow it
//! (`/commits/head` reaches the writer's head by their reloads alone), answer historical raw bytes
//! identical to a server of the writer's own store, report their staleness in `/health`, never
//! write to the bucket, keep serving the previous generation when the manifest is damaged; with
//! the object store stopped a replica answers 503 for what it has not cached and recovers by
//! itself once the store is back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../larch-remote/tests/common/mod.rs"]
mod s3;

use common::TestServer;
use larch_core::{CommitInfo, Hash};
use larch_remote::{PublishOptions, Publisher, RemoteLower, RemoteOptions, ReplicaOptions};
use larch_server::{ServerConfig, ServerState};
use larch_store::{Repo, RepoOptions};
use s3::{BUCKET, S3Server};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

fn repo_options() -> RepoOptions {
    RepoOptions { chunk_bytes: 8 << 10, cache_bytes: 1 << 16, ..RepoOptions::default() }
}

fn commit_block(repo: &mut Repo, parent: Option<Hash>, block: u32) -> Hash {
    let mut tree = match parent {
        Some(parent) => repo.checkout(&parent).unwrap(),
        None => repo.empty_tree(),
    };
    for key in 0..20 {
        let value = format!("block {block} key {key} {}", "z".repeat((block % 5) as usize * 60));
        tree.add(
            &["data", &format!("d{}", block % 8), &format!("k{}", block * 20 + key)],
            value.into_bytes(),
        )
        .unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "block")).unwrap()
}

fn replica(server: &S3Server, url: &str, dir: PathBuf) -> TestServer {
    let options = ReplicaOptions { cache_dir: dir, cache_bytes: 4 << 20, client: server.settings() };
    let config = ServerConfig { reload_interval: Duration::from_millis(100), ..ServerConfig::default() };
    TestServer::serve(ServerState::open_remote(url, &options, config).unwrap())
}

/// Waits until `server`'s `/commits/head` is `head`.
fn wait_for_head(server: &TestServer, head: &Hash) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, json) = server.json("/commits/head");
        if status == 200 && json["hash"].as_str() == Some(head.to_base58().as_str()) {
            return;
        }
        assert!(Instant::now() < deadline, "the replica did not reach {head}: {status} {json}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every object file of the bucket with its length and modification time.
fn bucket_files(root: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.push((entry.path(), meta.len(), meta.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn replicas_serve_the_writers_history_over_http_and_survive_outages() {
    let mut server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("writer-cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/served");
    let options = RemoteOptions { cache_dir: Some(cache), cache_bytes: 4 << 20, client: server.settings() };
    let lower = RemoteLower::open(&url, &store, true, &options).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    let publish = PublishOptions { poll: Duration::ZERO, ..PublishOptions::default() };
    let publisher = Publisher::start(&lower, &store, publish).unwrap();
    let mut commits = Vec::new();
    for block in 0..60 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
        if block % 15 == 14 {
            repo.archive(&commits[block as usize - 4]).unwrap();
        }
    }
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    publisher.publish_now().unwrap().expect("a manifest");
    // The writer's own store, served as `larch serve STORE --lower s3://…` serves it.
    let local = TestServer::start(
        &store,
        ServerConfig { lower_layer: Some(lower.layer()), ..ServerConfig::default() },
    );
    let replicas =
        [replica(&server, &url, root.path().join("r1")), replica(&server, &url, root.path().join("r2"))];
    for served in &replicas {
        wait_for_head(served, &commits[59]);
    }
    // Historical raw bytes: byte for byte the writer's store's.
    let bucket = server.root.path().join(BUCKET);
    let before = bucket_files(&bucket);
    for block in [17, 30, 44, 59] {
        let hash = commits[block].to_base58();
        for target in [format!("/context/{hash}/raw/bytes/data?depth=3"), format!("/commits/{hash}")] {
            let expected = local.get(&target);
            assert_eq!(expected.status, 200, "{target}: {}", expected.text());
            for served in &replicas {
                let got = served.get(&target);
                assert_eq!((got.status, got.text()), (200, expected.text()), "{target}");
            }
        }
    }
    assert_eq!(bucket_files(&bucket), before, "replicas never write to the bucket");

    // The writer goes on; the replicas follow by their reloads alone.
    for block in 60..100 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
        if block % 15 == 14 {
            repo.archive(&commits[block as usize - 4]).unwrap();
            assert!(lower.wait_uploaded(Duration::from_secs(60)));
            publisher.publish_now().unwrap();
        }
    }
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    let generation = publisher.publish_now().unwrap().expect("a newer manifest");
    for served in &replicas {
        wait_for_head(served, &commits[99]);
        let target = format!("/context/{}/raw/bytes/data?depth=3", commits[80].to_base58());
        assert_eq!(served.get(&target).text(), local.get(&target).text());
        // Staleness in /health.
        let (status, health) = served.json("/health");
        assert_eq!(status, 200, "{health}");
        let replica = &health["replica"];
        assert_eq!(replica["manifest_generation"].as_u64(), Some(generation), "{health}");
        assert_eq!(replica["manifest_head"].as_str(), Some(commits[99].to_base58().as_str()), "{health}");
        assert!(replica["manifest_age_seconds"].as_f64().is_some_and(|age| age < 60.0), "{health}");
        assert!(replica["seconds_since_fetch"].as_f64().is_some_and(|s| s < 5.0), "{health}");
        assert!(replica["last_error"].is_null(), "{health}");
    }

    // A third replica that read no history yet: the object store stopped, what it has not
    // cached is 503 (not 500, no crash), and it recovers by itself.
    let cold = replica(&server, &url, root.path().join("r3"));
    wait_for_head(&cold, &commits[99]);
    server.stop();
    let genesis = format!("/context/{}/raw/bytes/data?depth=2", commits[0].to_base58());
    let answer = cold.get(&genesis);
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert!(answer.text().contains("remote_unavailable"), "{}", answer.text());
    assert_eq!(cold.json("/commits/head").0, 200, "the head is served from memory");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cold.json("/health").1["replica"]["last_error"].is_null() {
        assert!(Instant::now() < deadline, "the failed fetch shows in /health");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = cold.get(&genesis);
        if answer.status == 200 {
            assert_eq!(answer.text(), local.get(&genesis).text());
            break;
        }
        assert!(Instant::now() < deadline, "no recovery: {} {}", answer.status, answer.text());
        std::thread::sleep(Duration::from_millis(100));
    }

    // A damaged manifest: refused (reported in /health), the generation applied served. The
    // manifest replicas applied is damaged in place (publishing first would race their reloads).
    let file = server.object_file("served/manifest");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.truncate(bytes.len() - 7);
    std::fs::write(&file, &bytes).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, health) = replicas[0].json("/health");
        // (An error of the outage above may still show until the next fetch.)
        if health["replica"]["last_error"].as_str().is_some_and(|e| e.contains("refused")) {
            assert_eq!(health["replica"]["manifest_generation"].as_u64(), Some(generation), "{health}");
            break;
        }
        assert!(Instant::now() < deadline, "the damaged manifest is not reported: {health}");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_head(&replicas[0], &commits[99]);
    let target = format!("/context/{}/raw/bytes/data?depth=3", commits[90].to_base58());
    assert_eq!(replicas[0].get(&target).text(), local.get(&target).text());
    // The writer's next manifest replaces it: followed again.
    commits.push(commit_block(&mut repo, commits.last().copied(), 100));
    publisher.publish_now().unwrap().expect("a manifest");
    wait_for_head(&replicas[0], &commits[100]);
}
