//! A store of 40 GiB of chunk files (2,600 chunks, sparse-extended to 16 MiB each) served under a
//! limit of 1,024 descriptors: a writer, a reader and the server open it at once in this process
//! (its own test binary, so the limit lowered here binds nothing else), every chunk is read through
//! each of them, the writer rolls to new chunks meanwhile, and the process's open descriptors
//! (`/proc/self/fd`, sampled every millisecond) never exceed what the bounded pools allow
//! (issue 39 item 11).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use larch_core::{CommitInfo, Hash};
use larch_server::ServerConfig;
use larch_store::{DEFAULT_OPEN_FILES, Repo, RepoOptions, SyncPolicy};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const CHUNKS: u64 = 2_600;
const SPARSE_LEN: u64 = 16 << 20;
const LIMIT: u64 = 1_024;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i} of its own chunk").into_bytes()
}

fn key(i: u64) -> String {
    format!("{i:05}")
}

#[test]
fn a_40_gib_store_is_served_under_1024_descriptors() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("store");
    // One commit per chunk: the writer rolls at every commit once the head holds a byte.
    let options = RepoOptions { chunk_bytes: 1, sync: SyncPolicy::Never, ..RepoOptions::default() };
    let mut hashes: Vec<Hash> = Vec::new();
    {
        let mut repo = Repo::open_with(&path, options.clone()).unwrap();
        let mut tree = repo.empty_tree();
        for i in 0..CHUNKS {
            tree.add(&["k", &key(i)], value(i)).unwrap();
            let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
            hashes.push(repo.commit(&tree, &parents, CommitInfo::tezos(i as i64, "c")).unwrap());
        }
        repo.close().unwrap();
    }
    // Every sealed chunk sparse-extended to 16 MiB (bytes past a chunk's range are never read).
    let mut chunk_files = 0u64;
    let mut apparent = 0u64;
    let names: Vec<String> = std::fs::read_dir(&path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("chunk."))
        .collect();
    let head = names.iter().max().unwrap().clone();
    for name in &names {
        let file = std::fs::OpenOptions::new().write(true).open(path.join(name)).unwrap();
        if *name != head {
            file.set_len(SPARSE_LEN).unwrap();
        }
        chunk_files += 1;
        apparent += file.metadata().unwrap().len();
    }
    assert!(chunk_files >= CHUNKS, "{chunk_files} chunk files");
    assert!(apparent >= 40 << 30, "{apparent} bytes of chunk files");

    // The limit, hard too (so nothing here may raise it back).
    let limit = rustix::process::Rlimit { current: Some(LIMIT), maximum: Some(LIMIT) };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
    let baseline = open_fds();
    // Per handle: the pool's files, the writer's head, control, commits, the lock, the directory
    // (at most 8 GC segments: none here), and one file being opened per reading thread.
    let per_handle = DEFAULT_OPEN_FILES + 8;
    let bound = baseline + 3 * per_handle + 16; // + the server's runtime, sockets and threads
    assert!(bound < LIMIT as usize, "the bound {bound} must be below the limit");

    let mut writer =
        Repo::open_with(&path, RepoOptions { sync: SyncPolicy::Commit, ..options.clone() }).unwrap();
    let reader = Repo::open_read_only(&path).unwrap();
    let server = TestServer::start(&path, ServerConfig::default());
    let at_open = open_fds();
    assert!(at_open <= bound, "{at_open} descriptors after opening (bound {bound})");

    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(open_fds(), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let hashes = Arc::new(hashes);
    std::thread::scope(|scope| {
        // The reader, from two threads: every commit's value, each in a chunk of its own.
        for part in 0..2u64 {
            let (reader, hashes) = (&reader, hashes.clone());
            scope.spawn(move || {
                for i in (part..CHUNKS).step_by(2) {
                    let tree = reader.checkout(&hashes[i as usize]).unwrap();
                    let found = tree.find(&["k", &key(i)]).unwrap().expect("a value");
                    assert_eq!(found.as_bytes(), value(i), "reader: commit {i}");
                }
            });
        }
        // The server: the same, over HTTP, from two clients.
        for part in 0..2u64 {
            let (server, hashes) = (&server, hashes.clone());
            scope.spawn(move || {
                for i in (part..CHUNKS).rev().step_by(2) {
                    let target = format!("/context/{}/raw/bytes/k/{}", hashes[i as usize], key(i));
                    let response = server.get(&target);
                    assert_eq!(response.status, 200, "{target}: {}", response.text());
                    let expected = format!("\"{}\"", hex::encode(value(i)));
                    assert_eq!(response.text().trim(), expected, "{target}");
                }
            });
        }
        // The writer: every commit's value too, then more commits (new chunks) on top.
        let hashes = hashes.clone();
        let writer = &mut writer;
        scope.spawn(move || {
            for i in (0..CHUNKS).step_by(3) {
                let tree = writer.checkout(&hashes[i as usize]).unwrap();
                let found = tree.find(&["k", &key(i)]).unwrap().expect("a value");
                assert_eq!(found.as_bytes(), value(i), "writer: commit {i}");
            }
            let mut tree = writer.checkout(hashes.last().unwrap()).unwrap();
            let mut parent = *hashes.last().unwrap();
            for i in CHUNKS..CHUNKS + 20 {
                tree.add(&["k", &key(i)], value(i)).unwrap();
                parent = writer.commit(&tree, &[parent], CommitInfo::tezos(i as i64, "c")).unwrap();
            }
        });
    });
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    assert!(peak <= bound, "{peak} descriptors open at the peak (bound {bound}, baseline {baseline})");
    for (name, handle) in [("writer", &writer), ("reader", &reader)] {
        let stats = handle.stats();
        assert!(stats.chunk_files >= CHUNKS, "{name}: {} chunk files", stats.chunk_files);
        assert!(stats.chunk_files_open <= DEFAULT_OPEN_FILES as u64 + 2, "{name}: {stats:?}");
        assert!(stats.chunk_file_opens > CHUNKS, "{name}: chunks were reopened after eviction: {stats:?}");
    }
    eprintln!(
        "{chunk_files} chunk files, {apparent} bytes; descriptors: {baseline} before opening, {at_open} \
         after, {peak} at the peak (bound {bound}, limit {LIMIT})"
    );
    drop(server);
    writer.close().unwrap();
}
