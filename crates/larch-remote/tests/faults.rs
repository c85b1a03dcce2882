//! Faults injected by a proxy between larch's client and the S3 test server
//! (`common::proxy`): delayed requests, 500/503/`SlowDown` answers, dropped connections and
//! corrupted answers. The writer keeps committing and archiving with the backlog reported and
//! catches up once the faults stop; the client's retries are bounded in number and time and
//! spaced by backoff; a reader whose fetch fails past its retries gets a typed error, not a hang,
//! and recovers by itself; a corrupted answer is detected, on reads and by the upload's
//! verification.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::proxy::{Fault, FaultProxy, Rule};
use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::{Client, ClientSettings, RemoteError, RemoteLower, RemoteOptions, RemoteUrl};
use larch_store::{Repo, RepoOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn options(settings: ClientSettings, cache: &Path) -> RemoteOptions {
    RemoteOptions { cache_dir: Some(cache.to_path_buf()), cache_bytes: 4 << 20, client: settings }
}

fn repo_options() -> RepoOptions {
    RepoOptions { chunk_bytes: 8 << 10, cache_bytes: 1 << 16, ..RepoOptions::default() }
}

fn value(block: u32, key: u32) -> Vec<u8> {
    format!("block {block} key {key} {}", "y".repeat((block % 5) as usize * 50)).into_bytes()
}

fn commit_block(repo: &mut Repo, parent: Option<Hash>, block: u32) -> Hash {
    let mut tree = match parent {
        Some(parent) => repo.checkout(&parent).unwrap(),
        None => repo.empty_tree(),
    };
    for key in 0..20 {
        tree.add(&["v", &format!("d{}", block % 8), &format!("k{}", block * 20 + key)], value(block, key))
            .unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "b")).unwrap()
}

fn check_commit(repo: &Repo, commits: &[Hash], block: u32) -> larch_store::Result<()> {
    let tree = repo.checkout(&commits[block as usize])?;
    let found = tree.find(&["v", &format!("d{}", block % 8), &format!("k{}", block * 20)])?;
    assert_eq!(found.map(|v| v.as_bytes().to_vec()), Some(value(block, 0)), "block {block}");
    Ok(())
}

#[test]
fn the_writer_commits_through_delays_and_errors_and_catches_up() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/w");
    let lower = RemoteLower::open(&url, &store, true, &options(proxy.settings(&server), &cache)).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    let mut commits = Vec::new();
    // Each phase: 40 blocks, archived every 10, with every request delayed by 3 s, answered
    // `SlowDown`, 500, or its connection dropped.
    let phases = [Fault::Delay(Duration::from_secs(3)), Fault::SlowDown, Fault::Status(500), Fault::Drop];
    for (phase, fault) in phases.iter().enumerate() {
        proxy.set(Some(Rule::all(fault.clone())));
        let started = Instant::now();
        let mut backlog = 0;
        for block in 0..40 {
            let block = phase as u32 * 40 + block;
            commits.push(commit_block(&mut repo, commits.last().copied(), block));
            if block % 10 == 9 {
                repo.archive(commits.last().unwrap()).unwrap();
                backlog = backlog.max(lower.stats().uploads.unwrap().backlog);
            }
        }
        let elapsed = started.elapsed();
        let stats = lower.stats().uploads.unwrap();
        println!("phase {fault:?}: 40 blocks in {elapsed:?}, backlog up to {backlog}, {stats:?}");
        // The commits did not wait for object storage: chunks waited in the spool meanwhile.
        assert!(backlog >= 2, "phase {fault:?}: {stats:?}");
        if matches!(fault, Fault::Delay(_)) {
            assert_eq!(stats.uploaded, 0, "the phase ended before the first delayed answer");
            continue;
        }
        // The phase lasts until the uploader has met it (an attempt failed, after the client's
        // retries).
        let deadline = Instant::now() + Duration::from_secs(30);
        while lower.stats().uploads.unwrap().failures == stats.failures {
            assert!(Instant::now() < deadline, "phase {fault:?}: no failed attempt: {:?}", lower.stats());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let failures = lower.stats().uploads.unwrap().failures;
    assert!(failures >= 3, "{:?}", lower.stats());
    proxy.clear();
    assert!(lower.wait_uploaded(Duration::from_secs(120)), "caught up: {:?}", lower.stats());
    let stats = lower.stats().uploads.unwrap();
    assert_eq!((stats.backlog, stats.last_error.clone()), (0, None), "{stats:?}");
    repo.close().unwrap();
    drop(lower);
    let reader_lower =
        RemoteLower::open(&url, &store, false, &options(server.settings(), &root.path().join("r"))).unwrap();
    let reader = Repo::open_read_only_layered(&store, repo_options(), Some(reader_lower.layer())).unwrap();
    for block in 0..commits.len() as u32 {
        check_commit(&reader, &commits, block).unwrap();
    }
    assert!(reader.fsck().is_clean());
}

/// Client settings of `proxy` with `retries` and `timeout`.
fn bounded(proxy: &FaultProxy, server: &S3Server, retries: usize, timeout: Duration) -> ClientSettings {
    ClientSettings { max_retries: retries, call_timeout: timeout, ..proxy.settings(server) }
}

#[test]
fn retries_are_bounded_in_number_and_time_and_spaced_by_backoff() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let url = RemoteUrl::parse(&format!("s3://{BUCKET}/r")).unwrap();
    let client = Client::connect(&url, bounded(&proxy, &server, 3, Duration::from_secs(20))).unwrap();
    client.put("object", bytes::Bytes::from_static(b"some bytes")).unwrap();
    for fault in [Fault::Status(503), Fault::SlowDown, Fault::Status(500), Fault::Drop] {
        proxy.set(Some(Rule::all(fault.clone())));
        let before = proxy.seen().len();
        let started = Instant::now();
        let error = client.get("object").unwrap_err();
        let elapsed = started.elapsed();
        let seen: Vec<_> = proxy.seen().into_iter().skip(before).collect();
        let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].at - w[0].at).collect();
        println!("{fault:?}: {} requests in {elapsed:?}, gaps {gaps:?}: {error}", seen.len());
        assert!(matches!(error, RemoteError::Request { op: "get", not_found: false, .. }), "{error:?}");
        // The first attempt and three retries, no more; each retry after a backoff.
        assert_eq!(seen.len(), 4, "{fault:?}: {seen:?}");
        assert!(gaps.iter().all(|gap| *gap >= Duration::from_millis(40)), "{fault:?}: {gaps:?}");
        assert!(elapsed < Duration::from_secs(10), "{fault:?}: {elapsed:?}");
    }
    // A request that never gets an answer ends at the call timeout.
    let client = Client::connect(&url, bounded(&proxy, &server, 3, Duration::from_secs(2))).unwrap();
    proxy.set(Some(Rule::all(Fault::Delay(Duration::from_secs(60)))));
    let started = Instant::now();
    let error = client.get("object").unwrap_err();
    println!("never answered: {:?}: {error}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert!(matches!(error, RemoteError::Request { .. }), "{error:?}");
    proxy.clear();
    assert_eq!(client.get("object").unwrap().as_ref(), b"some bytes");
}

/// A store of 60 blocks archived to `url` and uploaded (through the server directly).
fn archived_store(server: &S3Server, root: &Path, url: &str) -> Vec<Hash> {
    let store = root.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let lower =
        RemoteLower::open(url, &store, true, &options(server.settings(), &root.join("cache"))).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    let mut commits = Vec::new();
    for block in 0..60 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
    }
    repo.archive(commits.last().unwrap()).unwrap();
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    repo.close().unwrap();
    commits
}

/// The object-storage error inside an `io::Error` of the storage seam.
fn remote_error(error: &std::io::Error) -> Option<&RemoteError> {
    error.get_ref().and_then(|inner| inner.downcast_ref::<RemoteError>())
}

#[test]
fn a_reader_gets_a_typed_error_not_a_hang_and_recovers() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let root = tempfile::tempdir().unwrap();
    let url = format!("s3://{BUCKET}/reads");
    let commits = archived_store(&server, root.path(), &url);
    let store = root.path().join("store");
    let settings = bounded(&proxy, &server, 2, Duration::from_secs(2));
    let lower = RemoteLower::open(&url, &store, false, &options(settings, &root.path().join("rc"))).unwrap();
    let reader = Repo::open_read_only_layered(&store, repo_options(), Some(lower.layer())).unwrap();
    let chunk = lower.layer().dir.open("chunk.000001", false).unwrap();
    let mut buf = vec![0u8; 64];
    for fault in [Fault::Drop, Fault::Status(503), Fault::Delay(Duration::from_secs(60))] {
        proxy.set(Some(Rule::on("GET", "/reads/chunk.", fault.clone())));
        let started = Instant::now();
        let error = chunk.read_at(100, &mut buf).unwrap_err();
        let elapsed = started.elapsed();
        println!("{fault:?}: {elapsed:?}: {error}");
        assert!(
            matches!(remote_error(&error), Some(RemoteError::Request { op: "get (range)", .. })),
            "{fault:?}: {error:?}"
        );
        assert!(elapsed < Duration::from_secs(5), "{fault:?}: {elapsed:?}");
        // Through the store: an error, in bounded time.
        let started = Instant::now();
        assert!(check_commit(&reader, &commits, 3).is_err(), "{fault:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{fault:?}: {:?}", started.elapsed());
    }
    // The faults gone, the same reader reads again.
    proxy.clear();
    chunk.read_at(100, &mut buf).unwrap();
    for block in 0..commits.len() as u32 {
        check_commit(&reader, &commits, block).unwrap();
    }
}

#[test]
fn a_corrupted_answer_is_detected_on_read_and_by_the_uploads_verification() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let root = tempfile::tempdir().unwrap();
    let url = format!("s3://{BUCKET}/bits");
    archived_store(&server, root.path(), &url);
    let store = root.path().join("store");
    let lower =
        RemoteLower::open(&url, &store, false, &options(proxy.settings(&server), &root.path().join("rc")))
            .unwrap();
    let chunk = lower.layer().dir.open("chunk.000002", false).unwrap();
    proxy.set(Some(Rule::on("GET", "/bits/chunk.000002", Fault::Corrupt)));
    let mut buf = vec![0u8; 64];
    let error = chunk.read_at(100, &mut buf).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
    assert!(matches!(remote_error(&error), Some(RemoteError::Corrupt { .. })), "{error:?}");
    proxy.clear();
    chunk.read_at(100, &mut buf).unwrap();
    drop(lower);

    // A writer whose read-back is corrupted once: the upload is not marked complete, it is
    // retried, and the object in the bucket is the chunk's bytes.
    let (store, cache) = (root.path().join("w"), root.path().join("wc"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/verify");
    let lower = RemoteLower::open(&url, &store, true, &options(proxy.settings(&server), &cache)).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    proxy.add(Rule { times: Some(1), ..Rule::on("GET", "/verify/chunk.000000", Fault::Corrupt) });
    let mut commits = Vec::new();
    for block in 0..30 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
    }
    repo.archive(commits.last().unwrap()).unwrap();
    assert!(lower.wait_uploaded(Duration::from_secs(60)), "{:?}", lower.stats());
    let stats = lower.stats().uploads.unwrap();
    println!("{stats:?}");
    assert!(stats.failures >= 1, "{stats:?}");
    assert!(server.object_file("verify/chunk.000000.sums").exists());
    repo.close().unwrap();
    drop(lower);
    let lower =
        RemoteLower::open(&url, &store, false, &options(server.settings(), &root.path().join("vr"))).unwrap();
    let reader = Repo::open_read_only_layered(&store, repo_options(), Some(lower.layer())).unwrap();
    for block in 0..commits.len() as u32 {
        check_commit(&reader, &commits, block).unwrap();
    }
    assert!(reader.fsck().is_clean());
}
