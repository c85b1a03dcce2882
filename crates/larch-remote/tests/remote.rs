//! Archive mode's lower layer on a real S3-compatible server on loopback (`common`: `s3s-fs`
//! in-process): sealed chunks upload in the background while the writer commits, through an
//! outage (server stopped) and a period of 503 answers, and catch up; every commit then reads
//! back, through a reader with a cache of its own, and fsck is clean; a second store is refused on
//! the same prefix; a damaged object is detected; an upload cut short is redone at the next open.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::{RemoteError, RemoteLower, RemoteOptions};
use larch_store::{Repo, RepoOptions};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn remote_options(server: &S3Server, cache: &Path) -> RemoteOptions {
    RemoteOptions { cache_dir: Some(cache.to_path_buf()), cache_bytes: 4 << 20, client: server.settings() }
}

fn repo_options() -> RepoOptions {
    RepoOptions { chunk_bytes: 8 << 10, cache_bytes: 1 << 16, ..RepoOptions::default() }
}

/// Opens the store at `store` as its writer over `lower`.
fn writer(store: &Path, lower: &RemoteLower) -> larch_store::Result<Repo> {
    Repo::open_with_layer(store, repo_options(), Some(lower.layer()))
}

/// Opens the store at `store` read-only over `lower`.
fn reader(store: &Path, lower: &RemoteLower) -> larch_store::Result<Repo> {
    Repo::open_read_only_layered(store, repo_options(), Some(lower.layer()))
}

/// The value of `key` in block `block`.
fn value(block: u32, key: u32) -> Vec<u8> {
    format!("block {block} key {key} {}", "x".repeat((block % 7) as usize * 40)).into_bytes()
}

/// Commits block `block` on top of `parent`: 20 new values.
fn commit_block(repo: &mut Repo, parent: Option<Hash>, block: u32) -> Hash {
    let mut tree = match parent {
        Some(parent) => repo.checkout(&parent).unwrap(),
        None => repo.empty_tree(),
    };
    for key in 0..20 {
        let name = format!("k{}", block * 20 + key);
        tree.add(&["data", &format!("d{}", block % 16), &name], value(block, key)).unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "block")).unwrap()
}

/// Every commit's values read back.
fn check_commits(repo: &Repo, commits: &[Hash]) {
    for (block, hash) in commits.iter().enumerate() {
        let block = block as u32;
        let tree = repo.checkout(hash).unwrap_or_else(|e| panic!("commit {block}: {e}"));
        for key in [0, 19] {
            let name = format!("k{}", block * 20 + key);
            let found = tree.find(&["data", &format!("d{}", block % 16), &name]).unwrap();
            assert_eq!(
                found.map(|v| v.as_bytes().to_vec()),
                Some(value(block, key)),
                "block {block} key {key}"
            );
        }
    }
}

fn chunk_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk."))
        .count()
}

#[test]
fn the_writer_commits_through_an_outage_and_uploads_catch_up() {
    let mut server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/stores/a");
    let lower = RemoteLower::open(&url, &store, true, &remote_options(&server, &cache)).unwrap();
    let mut repo = writer(&store, &lower).unwrap();
    let mut commits = Vec::new();
    let mut backlog_seen = 0;
    let started = Instant::now();
    for block in 0..240u32 {
        let hash = commit_block(&mut repo, commits.last().copied(), block);
        commits.push(hash);
        match block {
            80 => server.stop(),
            140 => {
                backlog_seen = lower.stats().uploads.unwrap().backlog;
                // The outage lasts until the uploader has met it (a fast machine commits these 60
                // blocks well within the client's retries of one request).
                let deadline = Instant::now() + Duration::from_secs(60);
                while lower.stats().uploads.unwrap().failures == 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                server.restart();
                server.failing.store(true, Ordering::SeqCst);
            }
            180 => server.failing.store(false, Ordering::SeqCst),
            _ => {}
        }
        if block % 10 == 9 {
            let report = repo.archive(&hash).unwrap();
            assert!(report.commit_chunk > 0);
        }
    }
    println!("240 blocks committed and archived in {:?}", started.elapsed());
    assert!(backlog_seen > 0, "chunks waited in the spool while the server was stopped");
    assert!(lower.wait_uploaded(Duration::from_secs(120)), "uploads caught up: {:?}", lower.stats());
    let stats = lower.stats().uploads.unwrap();
    println!("uploads: {stats:?}");
    assert_eq!((stats.backlog, stats.backlog_bytes, stats.last_error.clone()), (0, 0, None));
    assert!(stats.uploaded >= 10 && stats.failures > 0, "{stats:?}");
    assert_eq!(std::fs::read_dir(cache.join("spool")).unwrap().count(), 0, "the spool is empty");
    assert!(
        chunk_files(&store) <= 3,
        "the store directory keeps the recent chunks only: {}",
        chunk_files(&store)
    );
    check_commits(&repo, &commits);
    repo.close().unwrap();
    drop(lower);

    // A reader with a cache of its own (as on another machine, but with the store directory).
    let reader_cache = root.path().join("reader-cache");
    let lower = RemoteLower::open(&url, &store, false, &remote_options(&server, &reader_cache)).unwrap();
    let reader = reader(&store, &lower).unwrap();
    check_commits(&reader, &commits);
    let report = reader.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    let cache_stats = lower.stats().cache;
    println!("reader cache: {cache_stats:?}, hit ratio {:.3}", cache_stats.hit_ratio());
    assert!(cache_stats.misses > 0 && cache_stats.hits > 0 && cache_stats.used <= cache_stats.capacity);
    // A reader never writes the bucket.
    assert!(lower.layer().dir.create("chunk.999999.tmp").is_err());
    assert!(lower.layer().dir.remove("chunk.000001").is_err());
}

#[test]
fn a_reader_of_an_unclaimed_prefix_does_not_let_the_writer_skip_its_claim() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir(&b).unwrap();
    std::fs::create_dir(&a).unwrap();
    // Store a has its identity (archived once to another prefix) before this prefix is claimed.
    let first = RemoteLower::open(
        &format!("s3://{BUCKET}/first"),
        &a,
        true,
        &remote_options(&server, &root.path().join("c1")),
    )
    .unwrap();
    let mut repo = writer(&a, &first).unwrap();
    commit_block(&mut repo, None, 0);
    repo.close().unwrap();
    drop(first);
    let url = format!("s3://{BUCKET}/late");
    let cache = root.path().join("ca");
    // A reader first (no marker yet), then the writer with the same cache directory.
    drop(RemoteLower::open(&url, &a, false, &remote_options(&server, &cache)).unwrap());
    drop(RemoteLower::open(&url, &a, true, &remote_options(&server, &cache)).unwrap());
    assert!(server.object_file("late/larch-lower").exists(), "the writer claimed the prefix");
    let refused = RemoteLower::open(&url, &b, true, &remote_options(&server, &root.path().join("cb")));
    assert!(matches!(refused, Err(RemoteError::Foreign { .. })), "{refused:?}");
}

#[test]
fn a_second_store_is_refused_on_the_same_prefix() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let url = format!("s3://{BUCKET}/shared");
    let lower_a =
        RemoteLower::open(&url, &a, true, &remote_options(&server, &root.path().join("ca"))).unwrap();
    let mut repo = writer(&a, &lower_a).unwrap();
    commit_block(&mut repo, None, 0);
    repo.close().unwrap();
    for writable in [true, false] {
        let refused =
            RemoteLower::open(&url, &b, writable, &remote_options(&server, &root.path().join("cb")));
        match refused {
            Err(RemoteError::Foreign { reason, .. }) => assert!(reason.contains("larch-lower"), "{reason}"),
            other => panic!("store b opened a's prefix (writable: {writable}): {other:?}"),
        }
    }
    // Store a still opens it, as writer and reader; a prefix holding something else is refused.
    assert!(RemoteLower::open(&url, &a, true, &remote_options(&server, &root.path().join("ca"))).is_ok());
    assert!(RemoteLower::open(&url, &a, false, &remote_options(&server, &root.path().join("ca2"))).is_ok());
    std::fs::create_dir_all(server.object_file("other")).unwrap();
    std::fs::write(server.object_file("other/notes.txt"), b"not a chunk").unwrap();
    let refused = RemoteLower::open(
        &format!("s3://{BUCKET}/other"),
        &b,
        true,
        &remote_options(&server, &root.path().join("cb")),
    );
    assert!(matches!(refused, Err(RemoteError::Foreign { .. })), "{refused:?}");
    // One cache directory serves one prefix.
    let refused = RemoteLower::open(
        &format!("s3://{BUCKET}/third"),
        &a,
        true,
        &remote_options(&server, &root.path().join("ca")),
    );
    assert!(matches!(refused, Err(RemoteError::Foreign { .. })), "{refused:?}");
}

/// A store of `blocks` blocks on `url`, every sealed chunk archived and uploaded.
fn archived_store(server: &S3Server, root: &Path, url: &str, blocks: u32) -> Vec<Hash> {
    let (store, cache) = (root.join("store"), root.join("cache"));
    std::fs::create_dir_all(&store).unwrap();
    let lower = RemoteLower::open(url, &store, true, &remote_options(server, &cache)).unwrap();
    let mut repo = writer(&store, &lower).unwrap();
    let mut commits = Vec::new();
    for block in 0..blocks {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
    }
    repo.archive(commits.last().unwrap()).unwrap();
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    repo.close().unwrap();
    commits
}

#[test]
fn a_damaged_object_is_detected() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let url = format!("s3://{BUCKET}/damaged");
    let commits = archived_store(&server, root.path(), &url, 40);
    let object = server.object_file("damaged/chunk.000001");
    let mut bytes = std::fs::read(&object).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&object, &bytes).unwrap();

    let store = root.path().join("store");
    let lower =
        RemoteLower::open(&url, &store, false, &remote_options(&server, &root.path().join("fresh"))).unwrap();
    let file = lower.layer().dir.open("chunk.000001", false).unwrap();
    let mut buf = vec![0u8; 16];
    let error = file.read_at(at as u64, &mut buf).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
    assert!(error.to_string().contains("do not match the checksum"), "{error}");
    // The store's open reads the chunk's header (in the damaged block here) or fsck reads the
    // damaged records: either way the damage is reported, never read as data.
    match reader(&store, &lower) {
        Err(e) => assert!(format!("{e:?}").contains("do not match the checksum"), "{e:?}"),
        Ok(reader) => {
            let report = reader.fsck();
            assert!(!report.is_clean(), "fsck finds the damaged chunk");
            assert!(reader.checkout(&commits[1]).is_err() || !report.is_clean());
        }
    }
    assert_eq!(commits.len(), 40);
}

#[test]
fn an_upload_cut_short_is_redone_at_the_next_open() {
    let mut server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/cut");
    let lower = RemoteLower::open(&url, &store, true, &remote_options(&server, &cache)).unwrap();
    let mut repo = writer(&store, &lower).unwrap();
    // The server goes away: the chunks wait in the spool; a torn object without its checksum
    // object stands in the bucket, as an upload cut short leaves it.
    server.stop();
    let mut commits = Vec::new();
    for block in 0..40 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
    }
    repo.archive(commits.last().unwrap()).unwrap();
    std::fs::write(server.object_file("cut/chunk.000001"), b"torn").unwrap();
    repo.close().unwrap();
    let backlog = lower.stats().uploads.unwrap().backlog;
    assert!(backlog > 0);
    drop(lower);
    let spooled = std::fs::read_dir(cache.join("spool")).unwrap().count() as u64;
    assert_eq!(spooled, backlog);

    server.restart();
    // The torn object is not listed, so not trusted.
    let early =
        RemoteLower::open(&url, &store, false, &remote_options(&server, &root.path().join("r"))).unwrap();
    assert!(!early.layer().dir.list().unwrap().contains(&"chunk.000001".to_string()));
    let lower = RemoteLower::open(&url, &store, true, &remote_options(&server, &cache)).unwrap();
    assert!(lower.wait_uploaded(Duration::from_secs(60)), "{:?}", lower.stats());
    assert_eq!(lower.stats().uploads.unwrap().uploaded, backlog);
    drop(lower);
    let reader_lower =
        RemoteLower::open(&url, &store, false, &remote_options(&server, &root.path().join("r2"))).unwrap();
    let reader = reader(&store, &reader_lower).unwrap();
    check_commits(&reader, &commits);
    assert!(reader.fsck().is_clean());
    assert_ne!(std::fs::read(server.object_file("cut/chunk.000001")).unwrap(), b"torn");
}
