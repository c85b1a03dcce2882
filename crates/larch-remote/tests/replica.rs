//! Read replicas against a real S3-compatible server on loopback (`common`: `s3s-fs`
//! in-process): a writer in archive mode commits, archives and publishes manifests; replicas with
//! caches of their own follow it with no store directory, read every commit's values as the
//! writer's store holds them, refuse a damaged manifest while serving the previous one, and never
//! write to the bucket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::{
    Manifest, PublishOptions, Publisher, RemoteError, RemoteLower, RemoteOptions, Replica, ReplicaError,
    ReplicaOptions,
};
use larch_store::{Repo, RepoOptions};
use std::path::Path;
use std::time::Duration;

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
        tree.add(&["data", &format!("d{}", block % 8), &format!("k{}", block * 20 + key)], value(block, key))
            .unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "block")).unwrap()
}

fn replica_options(server: &S3Server, dir: &Path) -> ReplicaOptions {
    ReplicaOptions { cache_dir: dir.to_path_buf(), cache_bytes: 1 << 20, client: server.settings() }
}

fn open_reader(replica: &Replica) -> Repo {
    Repo::open_read_only_layered(replica.mirror(), repo_options(), Some(replica.layer())).unwrap()
}

/// Every value of every commit in `commits` (block numbers from 0) as `repo` reads it.
fn check(repo: &Repo, commits: &[Hash]) {
    check_from(repo, commits, 0);
}

/// [`check`] of commits whose block numbers start at `first`.
fn check_from(repo: &Repo, commits: &[Hash], first: u32) {
    for (block, hash) in commits.iter().enumerate() {
        let block = block as u32 + first;
        let tree = repo.checkout(hash).unwrap_or_else(|e| panic!("commit {block}: {e}"));
        for key in [0, 7, 19] {
            let found =
                tree.find(&["data", &format!("d{}", block % 8), &format!("k{}", block * 20 + key)]).unwrap();
            assert_eq!(
                found.map(|v| v.as_bytes().to_vec()),
                Some(value(block, key)),
                "block {block} key {key}"
            );
        }
    }
}

#[test]
fn replicas_follow_the_writer_and_refuse_a_damaged_manifest() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/replicated");
    let options = RemoteOptions { cache_dir: Some(cache), cache_bytes: 1 << 20, client: server.settings() };
    let lower = RemoteLower::open(&url, &store, true, &options).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    let publish = PublishOptions { poll: Duration::ZERO, grace: Duration::ZERO, ..PublishOptions::default() };
    let mut commits = Vec::new();
    for block in 0..40 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
        if block == 29 {
            repo.archive(&commits[20]).unwrap();
        }
    }
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    // No manifest yet: a replica says so with a typed error.
    let dirs = [root.path().join("r1"), root.path().join("r2")];
    assert!(matches!(
        Replica::open(&url, &replica_options(&server, &dirs[0])),
        Err(ReplicaError::NoManifest { .. })
    ));
    let publisher = Publisher::start(&lower, &store, publish).unwrap();
    let first = publisher.publish_now().unwrap().expect("a first manifest");
    assert_eq!(publisher.publish_now().unwrap(), None, "nothing new to publish");
    let replicas: Vec<Replica> =
        dirs.iter().map(|dir| Replica::open(&url, &replica_options(&server, dir)).unwrap()).collect();
    let mut readers: Vec<Repo> = replicas.iter().map(open_reader).collect();
    for (replica, reader) in replicas.iter().zip(&readers) {
        assert_eq!(reader.head(), repo.head());
        assert_eq!(replica.status().generation, first);
        check(reader, &commits);
    }
    // The writer goes on: more blocks, a chunk archived, manifests published.
    for block in 40..90 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
        if block % 10 == 9 {
            repo.archive(&commits[block as usize - 5]).unwrap();
            assert!(lower.wait_uploaded(Duration::from_secs(60)));
            publisher.publish_now().unwrap();
        }
    }
    let stats = publisher.stats();
    println!("publisher: {stats:?}");
    assert!(stats.published >= 6 && stats.pieces > 0, "{stats:?}");
    for (replica, reader) in replicas.iter().zip(readers.iter_mut()) {
        assert!(replica.fetch().unwrap());
        assert!(replica.apply().unwrap());
        assert!(reader.reload().unwrap());
        assert_eq!(reader.head(), repo.head());
        check(reader, &commits);
        assert_eq!(replica.status().head, repo.head());
    }
    // Retired pieces are deleted once their grace period is over (zero here), never the
    // manifest's own.
    assert!(publisher.sweep(Duration::ZERO) + publisher.stats().deleted > 0);

    // A damaged manifest: refused with a typed error; the replica serves the previous state.
    let generation = replicas[0].status().generation;
    commits.push(commit_block(&mut repo, commits.last().copied(), 90));
    publisher.publish_now().unwrap().unwrap();
    let file = server.object_file("replicated/manifest");
    let mut bytes = std::fs::read(&file).unwrap();
    let good = bytes.clone();
    bytes[60] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let refused = replicas[0].fetch();
    assert!(matches!(refused, Err(ReplicaError::Manifest { .. })), "{refused:?}");
    assert!(!replicas[0].apply().unwrap());
    assert_eq!(replicas[0].status().generation, generation);
    assert!(replicas[0].status().last_error.is_some());
    check(&readers[0], &commits[..90]);
    // Repaired: followed again.
    std::fs::write(&file, &good).unwrap();
    assert!(replicas[0].fetch().unwrap() && replicas[0].apply().unwrap());
    assert!(readers[0].reload().unwrap());
    check(&readers[0], &commits);
    assert_eq!(replicas[0].status().last_error, None);
    drop(readers);
    drop(replicas);
    drop(publisher);
    drop(repo);
}

/// A replica's open fetches the checksum object of every archived chunk (concurrently), each
/// verified: one damaged or missing refuses the open with an error naming it; once repaired, the
/// open succeeds, every one is in the cache directory, and every value reads back.
#[test]
fn a_replica_open_fetches_and_verifies_every_checksum_object() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/sums");
    let options = RemoteOptions { cache_dir: Some(cache), cache_bytes: 1 << 20, client: server.settings() };
    let lower = RemoteLower::open(&url, &store, true, &options).unwrap();
    let mut repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
    let mut commits = Vec::new();
    for block in 0..60 {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
    }
    repo.archive(&commits[55]).unwrap();
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    let publisher = Publisher::start(
        &lower,
        &store,
        PublishOptions { poll: Duration::ZERO, grace: Duration::ZERO, ..PublishOptions::default() },
    )
    .unwrap();
    publisher.publish_now().unwrap().expect("a manifest");
    let mut sums: Vec<String> = std::fs::read_dir(server.object_file("sums"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("chunk.") && name.ends_with(".sums"))
        .collect();
    sums.sort();
    assert!(sums.len() >= 10, "archived chunks: {sums:?}");
    let victim = sums[sums.len() / 2].clone();
    let file = server.object_file(&format!("sums/{victim}"));
    let good = std::fs::read(&file).unwrap();
    let dir = root.path().join("replica");

    // Damaged: refused as corrupt, naming the object.
    let mut bad = good.clone();
    let at = bad.len() - 40;
    bad[at] ^= 0x01;
    std::fs::write(&file, &bad).unwrap();
    match Replica::open(&url, &replica_options(&server, &dir)) {
        Err(ReplicaError::Remote(RemoteError::Corrupt { name, .. })) => assert_eq!(name, victim),
        other => panic!("a damaged {victim} is refused: {other:?}"),
    }
    assert!(!dir.join("sums").join(&victim).exists(), "a damaged checksum object is never kept");
    // Missing: refused, naming the object (not found, not "unavailable").
    std::fs::remove_file(&file).unwrap();
    match Replica::open(&url, &replica_options(&server, &dir)) {
        Err(ReplicaError::Remote(RemoteError::Request { name, not_found: true, .. })) => {
            assert_eq!(name, victim)
        }
        other => panic!("a missing {victim} is refused: {other:?}"),
    }
    // Repaired: the open fetches what is missing and keeps all of them.
    std::fs::write(&file, &good).unwrap();
    let replica = Replica::open(&url, &replica_options(&server, &dir)).unwrap();
    for name in &sums {
        assert_eq!(
            std::fs::read(server.object_file(&format!("sums/{name}"))).unwrap(),
            std::fs::read(dir.join("sums").join(name)).unwrap(),
            "{name} kept at open"
        );
    }
    let reader = open_reader(&replica);
    assert_eq!(reader.head(), repo.head());
    check(&reader, &commits);
    // A second open needs none of them: with the object store failing, it stops at the manifest
    // (its first request), never at a checksum object.
    drop(reader);
    drop(replica);
    server.failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let refused = Replica::open(&url, &replica_options(&server, &dir));
    assert!(matches!(&refused, Err(e) if e.is_unavailable()), "{refused:?}");
    server.failing.store(false, std::sync::atomic::Ordering::SeqCst);
    drop(publisher);
    drop(repo);
}

/// A writer archiving to `s3://BUCKET/{prefix}` with a publisher that publishes when asked and
/// retires at once (grace zero).
struct Writer {
    repo: Repo,
    lower: RemoteLower,
    publisher: Publisher,
    commits: Vec<Hash>,
    url: String,
}

impl Writer {
    fn start(server: &S3Server, root: &Path, prefix: &str, name: &str) -> Writer {
        let (store, cache) = (root.join(format!("store-{name}")), root.join(format!("cache-{name}")));
        std::fs::create_dir(&store).unwrap();
        let url = format!("s3://{BUCKET}/{prefix}");
        let options =
            RemoteOptions { cache_dir: Some(cache), cache_bytes: 1 << 20, client: server.settings() };
        let lower = RemoteLower::open(&url, &store, true, &options).unwrap();
        let repo = Repo::open_with_layer(&store, repo_options(), Some(lower.layer())).unwrap();
        let publish =
            PublishOptions { poll: Duration::ZERO, grace: Duration::ZERO, ..PublishOptions::default() };
        let publisher = Publisher::start(&lower, &store, publish).unwrap();
        Writer { repo, lower, publisher, commits: Vec::new(), url }
    }

    /// Commits the blocks `blocks`, archiving every tenth one's predecessors.
    fn commit(&mut self, blocks: std::ops::Range<u32>) {
        for block in blocks {
            let hash = commit_block(&mut self.repo, self.commits.last().copied(), block);
            self.commits.push(hash);
            if block % 10 == 9 {
                self.repo.archive(&self.commits[self.commits.len() - 5]).unwrap();
                assert!(self.lower.wait_uploaded(Duration::from_secs(60)));
            }
        }
    }
}

/// The manifest in the bucket, decoded.
fn bucket_manifest(server: &S3Server, prefix: &str) -> Manifest {
    Manifest::decode(&std::fs::read(server.object_file(&format!("{prefix}/manifest"))).unwrap()).unwrap()
}

#[test]
fn a_manifest_that_may_have_been_written_never_shares_its_generation() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let mut writer = Writer::start(&server, root.path(), "maybe", "w");
    writer.commit(0..15);
    let first = writer.publisher.publish_now().unwrap().unwrap();
    let replica = Replica::open(&writer.url, &replica_options(&server, &root.path().join("r"))).unwrap();
    let mut reader = open_reader(&replica);
    writer.commit(15..25);
    // The manifest's PUT succeeds, its read-back fails: the attempt fails, the manifest is there.
    *server.failing_gets.lock().unwrap() = Some("/manifest".into());
    assert!(writer.publisher.publish_now().is_err());
    *server.failing_gets.lock().unwrap() = None;
    let written = bucket_manifest(&server, "maybe").generation;
    assert!(written > first);
    // A replica applies it.
    assert!(replica.fetch().unwrap() && replica.apply().unwrap());
    assert!(reader.reload().unwrap());
    assert_eq!(replica.status().generation, written);
    check(&reader, &writer.commits);
    // The retry is a newer generation, which the replica follows; nothing it still reads is
    // deleted (grace zero) before it did.
    let retry = writer.publisher.publish_now().unwrap().expect("the retry publishes");
    assert!(retry > written, "the retry reuses generation {written}");
    writer.publisher.sweep(Duration::ZERO);
    assert!(replica.fetch().unwrap() && replica.apply().unwrap());
    reader.reload().unwrap(); // the same state as the manifest applied: nothing new to see
    assert_eq!(replica.status().generation, retry);
    check(&reader, &writer.commits);
    writer.commit(25..30);
    writer.publisher.publish_now().unwrap().unwrap();
    assert!(writer.publisher.sweep(Duration::ZERO) > 0, "the objects of the manifests replaced are retired");
    assert!(replica.fetch().unwrap() && replica.apply().unwrap());
    assert!(reader.reload().unwrap());
    check(&reader, &writer.commits);
}

#[test]
fn a_replica_never_moves_back_to_an_older_manifest() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let mut writer = Writer::start(&server, root.path(), "back", "w");
    writer.commit(0..12);
    writer.publisher.publish_now().unwrap().unwrap();
    let replica = Replica::open(&writer.url, &replica_options(&server, &root.path().join("r"))).unwrap();
    let mut reader = open_reader(&replica);
    writer.commit(12..20);
    let older = writer.publisher.publish_now().unwrap().unwrap();
    let file = server.object_file("back/manifest");
    let older_bytes = std::fs::read(&file).unwrap();
    writer.commit(20..28);
    let newer = writer.publisher.publish_now().unwrap().unwrap();
    assert!(replica.fetch().unwrap() && replica.apply().unwrap());
    assert!(reader.reload().unwrap());
    let head = reader.head();
    assert_eq!(replica.status().generation, newer);
    // The older manifest fetched after the newer one was applied (a concurrent reload, or the
    // bucket's object going back): ignored, the head stays.
    std::fs::write(&file, &older_bytes).unwrap();
    assert_eq!(bucket_manifest(&server, "back").generation, older);
    let fetched = replica.fetch().unwrap();
    let applied = replica.apply().unwrap();
    assert!(!fetched && !applied, "fetched {fetched}, applied {applied}");
    assert_eq!(replica.status().generation, newer);
    reader.reload().unwrap();
    assert_eq!(reader.head(), head);
    check(&reader, &writer.commits);
}

#[test]
fn a_manifest_claiming_a_huge_index_is_refused_without_allocating_it() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let mut writer = Writer::start(&server, root.path(), "huge", "w");
    writer.commit(0..12);
    writer.publisher.publish_now().unwrap().unwrap();
    // Resealed (its checksum recomputed): the commit index claimed 1 PiB long.
    let mut manifest = bucket_manifest(&server, "huge");
    let huge = 1u64 << 50;
    manifest.index_end = huge;
    let commits = manifest.files.iter_mut().find(|f| f.name == "commits").unwrap();
    commits.len = huge;
    commits.pieces.last_mut().unwrap().to = huge;
    std::fs::write(server.object_file("huge/manifest"), manifest.encode()).unwrap();
    let opened = Replica::open(&writer.url, &replica_options(&server, &root.path().join("r")));
    assert!(matches!(opened, Err(ReplicaError::Remote(_) | ReplicaError::TooLarge { .. })), "{opened:?}");
}

#[test]
fn a_replica_cache_of_another_store_under_the_same_names_is_never_served() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("r");
    // Store A published; a replica reads all of it (checksum copies and blocks cached).
    let mut a = Writer::start(&server, root.path(), "same", "a");
    a.commit(0..30);
    a.publisher.publish_now().unwrap().unwrap();
    {
        let replica = Replica::open(&a.url, &replica_options(&server, &dir)).unwrap();
        check(&open_reader(&replica), &a.commits);
        assert!(replica.status().cache.used > 0);
    }
    drop(a);
    let chunks = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("chunk.") && name.ends_with(".sums"))
            .collect();
        names.sort();
        names
    };
    let of_a = chunks(&server.object_file("same"));
    // The prefix wiped, store B publishes there: other values under the same object names.
    std::fs::remove_dir_all(server.object_file("same")).unwrap();
    let mut b = Writer::start(&server, root.path(), "same", "b");
    b.commit(1000..1030);
    b.publisher.publish_now().unwrap().unwrap();
    let reused: Vec<String> =
        chunks(&server.object_file("same")).into_iter().filter(|name| of_a.contains(name)).collect();
    assert!(!reused.is_empty(), "B names no chunk as A did: {of_a:?}");
    let replica = Replica::open(&b.url, &replica_options(&server, &dir)).unwrap();
    let reader = open_reader(&replica);
    assert_eq!(reader.head(), b.commits.last().copied());
    check_from(&reader, &b.commits, 1000);
}
