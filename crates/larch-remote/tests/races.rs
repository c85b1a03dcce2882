//! GC and uploads (`larch_remote::retire`): a chunk retired while its upload is in flight (the
//! ordering injected by the fault proxy, which holds the upload's read-back until the retirement
//! is done) is not resurrected by the upload's completion; objects whose deletion failed are
//! swept by the writer, while it runs and at its next open, and are not listed meanwhile; a
//! reader never sweeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::proxy::{Fault, FaultProxy, Rule};
use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::{RemoteLower, RemoteOptions};
use larch_store::{Repo, RepoOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn options(settings: larch_remote::ClientSettings, cache: &Path) -> RemoteOptions {
    RemoteOptions { cache_dir: Some(cache.to_path_buf()), cache_bytes: 4 << 20, client: settings }
}

/// A writer store of 40 blocks whose sealed chunks are archived (moved to the spool).
fn archive_some(store: &Path, lower: &RemoteLower) -> Repo {
    let options = RepoOptions { chunk_bytes: 8 << 10, ..RepoOptions::default() };
    let mut repo = Repo::open_with_layer(store, options, Some(lower.layer())).unwrap();
    let mut parent: Option<Hash> = None;
    for block in 0..40u32 {
        let mut tree = match parent {
            Some(parent) => repo.checkout(&parent).unwrap(),
            None => repo.empty_tree(),
        };
        for key in 0..20 {
            tree.add(
                &["d", &format!("k{}", block * 20 + key)],
                format!("value {block} {key} {}", "z".repeat(99)).into_bytes(),
            )
            .unwrap();
        }
        let parents: Vec<Hash> = parent.into_iter().collect();
        parent = Some(repo.commit(&tree, &parents, CommitInfo::tezos(i64::from(block), "b")).unwrap());
    }
    repo.archive(&parent.unwrap()).unwrap();
    repo
}

/// Waits (at most 20 s) until `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_upload_in_flight_does_not_resurrect_a_chunk_retired_meanwhile() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/race");
    let lower = RemoteLower::open(&url, &store, true, &options(proxy.settings(&server), &cache)).unwrap();
    // The upload of chunk 1 is held for 2 s in the proxy: its PUT sent, the object not written.
    proxy.add(Rule {
        times: Some(1),
        ..Rule::on("PUT", "/race/chunk.000001", Fault::Delay(Duration::from_secs(2)))
    });
    let repo = archive_some(&store, &lower);
    let put_sent =
        || proxy.arrived().iter().any(|(method, path)| method == "PUT" && path.ends_with("/chunk.000001"));
    eventually("the upload of chunk 1 started", put_sent);
    // What a GC's deletion of a retired chunk does, while the upload is in flight: the spooled
    // copy and the (absent) objects deleted; then the PUT lands, and the read-back matches.
    lower.layer().dir.remove("chunk.000001").unwrap();
    assert!(!server.object_file("race/chunk.000001").exists());
    assert!(lower.wait_uploaded(Duration::from_secs(60)), "{:?}", lower.stats());
    eventually("the upload's own deletion", || !server.object_file("race/chunk.000001").exists());
    assert!(!server.object_file("race/chunk.000001.sums").exists(), "the upload did not complete");
    // Its checksum object was never written (the upload saw the retirement after its
    // verification), so no reader could trust the object in between.
    let sums_put =
        proxy.seen().iter().any(|seen| seen.method == "PUT" && seen.path.ends_with("/chunk.000001.sums"));
    assert!(!sums_put, "{:?}", proxy.seen());
    assert!(!lower.layer().dir.list().unwrap().contains(&"chunk.000001".to_string()));
    // The chunks around it uploaded as usual.
    for name in ["chunk.000000", "chunk.000002"] {
        assert!(server.object_file(&format!("race/{name}.sums")).exists(), "{name}");
    }
    assert!(!cache.join("spool/chunk.000001").exists());
    assert_eq!(std::fs::read_dir(cache.join("retired")).unwrap().count(), 0, "the journal is empty");
    drop(repo);
}

#[test]
fn objects_whose_deletion_failed_are_swept_by_the_writer_only() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(&server);
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/sweep");
    let lower = RemoteLower::open(&url, &store, true, &options(proxy.settings(&server), &cache)).unwrap();
    let repo = archive_some(&store, &lower);
    assert!(lower.wait_uploaded(Duration::from_secs(60)));
    let object = |name: &str| server.object_file(&format!("sweep/{name}"));
    assert!(object("chunk.000002.sums").exists() && object("chunk.000003.sums").exists());

    // Deletions fail (500; `object_store` deletes with S3's `DeleteObjects`, `POST /BUCKET?delete`): the retirement succeeds for the store, the objects stay, unlisted.
    proxy.set(Some(Rule::on("POST", "/larch", Fault::Status(500))));
    lower.layer().dir.remove("chunk.000002").unwrap();
    assert!(object("chunk.000002").exists() && object("chunk.000002.sums").exists());
    assert!(!lower.layer().dir.list().unwrap().contains(&"chunk.000002".to_string()));
    assert!(cache.join("retired/chunk.000002").exists(), "journaled");
    // The faults stop: the upload thread sweeps them while the writer runs.
    proxy.clear();
    eventually("swept while running", || {
        !object("chunk.000002").exists() && !object("chunk.000002.sums").exists()
    });
    eventually("journal cleared", || !cache.join("retired/chunk.000002").exists());

    // A deletion failing until the writer exits: a reader does not sweep; the next writer does.
    proxy.set(Some(Rule::on("POST", "/larch", Fault::Status(503))));
    lower.layer().dir.remove("chunk.000003").unwrap();
    drop(repo);
    drop(lower);
    assert!(object("chunk.000003").exists());
    proxy.clear();
    let reader =
        RemoteLower::open(&url, &store, false, &options(server.settings(), &root.path().join("reader")))
            .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(object("chunk.000003").exists(), "a reader never sweeps");
    drop(reader);
    let lower = RemoteLower::open(&url, &store, true, &options(server.settings(), &cache)).unwrap();
    eventually("swept at the writer's open", || {
        !object("chunk.000003").exists() && !object("chunk.000003.sums").exists()
    });
    assert!(object("chunk.000004.sums").exists(), "the other chunks stay");
    drop(lower);
}
