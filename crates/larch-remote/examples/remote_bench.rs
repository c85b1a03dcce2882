//! Archive mode on object storage against archive mode on a local lower directory, alternated in
//! one process: the same blocks committed, `archive` called every 10 blocks; per-block latency
//! (commit plus archive) p50/p99 for each, then reads of values in old commits through a reader
//! with a fresh cache (cold) and again (warm). The object store is the in-process `s3s-fs`
//! server of the tests, on loopback.
//!
//! `cargo run --release -p larch-remote --example remote_bench -- [ROUNDS] [BLOCKS]`; with
//! `PROBE=1` in the environment, then the latency of single range GETs of 256, 64, 16 and 4 KiB
//! (the request's own cost, apart from the store's reads).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::{RemoteLower, RemoteOptions};
use larch_store::{LowerLayer, Repo, RepoOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn commit_block(repo: &mut Repo, parent: Option<Hash>, block: u32) -> Hash {
    let mut tree = match parent {
        Some(parent) => repo.checkout(&parent).unwrap(),
        None => repo.empty_tree(),
    };
    for key in 0..200u32 {
        let value = format!("block {block} key {key} {}", "v".repeat(64)).into_bytes();
        tree.add(&["data", &format!("d{}", key % 32), &format!("k{block}-{key}")], value).unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "b")).unwrap()
}

fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times[((times.len() - 1) as f64 * q) as usize]
}

/// Commits `blocks` blocks, archiving every 10; returns the per-block latencies and the commits.
fn write(
    options: RepoOptions,
    lower: Option<LowerLayer>,
    store: &Path,
    blocks: u32,
) -> (Vec<Duration>, Vec<Hash>) {
    let mut repo = Repo::open_with_layer(store, options, lower).unwrap();
    let (mut times, mut commits) = (Vec::new(), Vec::new());
    for block in 0..blocks {
        let started = Instant::now();
        let hash = commit_block(&mut repo, commits.last().copied(), block);
        if block % 10 == 9 {
            repo.archive(&hash).unwrap();
        }
        times.push(started.elapsed());
        commits.push(hash);
    }
    repo.close().unwrap();
    (times, commits)
}

/// Reads one value of each of the first `n` commits: per-read latencies.
fn read(repo: &Repo, commits: &[Hash], n: usize) -> Vec<Duration> {
    commits
        .iter()
        .take(n)
        .enumerate()
        .map(|(block, hash)| {
            let started = Instant::now();
            let tree = repo.checkout(hash).unwrap();
            let key = (block * 7) % 200;
            let found = tree.find(&["data", &format!("d{}", key % 32), &format!("k{block}-{key}")]).unwrap();
            assert!(found.is_some());
            started.elapsed()
        })
        .collect()
}

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rounds, blocks) = (args.first().copied().unwrap_or(3), args.get(1).copied().unwrap_or(300));
    let server = S3Server::start();
    let chunk_bytes = 256 << 10;
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let root = tempfile::tempdir().unwrap();
        // Local lower directory.
        let (store, lower) = (root.path().join("local"), root.path().join("lower"));
        let options = RepoOptions { chunk_bytes, lower: Some(lower.clone()), ..RepoOptions::default() };
        let (mut local_times, local_commits) = write(options.clone(), None, &store, blocks);
        let local_reader = Repo::open_read_only_options(&store, options).unwrap();
        let local_reads = read(&local_reader, &local_commits, 100);
        // Object storage.
        let store = root.path().join("s3");
        std::fs::create_dir(&store).unwrap();
        let url = format!("s3://{BUCKET}/bench{round}");
        let remote_options = |cache: &str| RemoteOptions {
            cache_dir: Some(root.path().join(cache)),
            cache_bytes: 256 << 20,
            client: server.settings(),
        };
        let lower = RemoteLower::open(&url, &store, true, &remote_options("cache")).unwrap();
        let options = RepoOptions { chunk_bytes, ..RepoOptions::default() };
        let started = Instant::now();
        let (mut s3_times, s3_commits) = write(options, Some(lower.layer()), &store, blocks);
        let written = started.elapsed();
        assert!(lower.wait_uploaded(Duration::from_secs(300)));
        let drained = started.elapsed();
        let uploads = lower.stats().uploads.unwrap();
        drop(lower);
        let reader_lower = RemoteLower::open(&url, &store, false, &remote_options("reader")).unwrap();
        let reader =
            Repo::open_read_only_layered(&store, RepoOptions::default(), Some(reader_lower.layer())).unwrap();
        let mut cold = read(&reader, &s3_commits, 100);
        let mut slowest: Vec<(usize, Duration)> = cold.iter().copied().enumerate().collect();
        slowest.sort_by_key(|(_, time)| std::cmp::Reverse(*time));
        println!("round {round}: slowest cold reads (commit index, time): {:?}", &slowest[..3]);
        drop(reader);
        let reader =
            Repo::open_read_only_layered(&store, RepoOptions::default(), Some(reader_lower.layer())).unwrap();
        let mut warm = read(&reader, &s3_commits, 100);
        let cache = reader_lower.stats().cache;
        let mut local_reads = local_reads;
        let (lp99, sp99) = (quantile(&mut local_times, 0.99), quantile(&mut s3_times, 0.99));
        ratios.push(sp99.as_secs_f64() / lp99.as_secs_f64());
        println!(
            "round {round}: block p50/p99 local {:?}/{lp99:?}, s3 {:?}/{sp99:?} (ratio {:.2}); s3 writer {written:?}, uploads drained at {drained:?} ({} chunks, {} bytes)",
            quantile(&mut local_times, 0.5),
            quantile(&mut s3_times, 0.5),
            ratios.last().unwrap(),
            uploads.uploaded,
            uploads.uploaded_bytes,
        );
        println!(
            "round {round}: read of a value in an old commit p50/p99: local {:?}/{:?}, s3 cold {:?}/{:?}, s3 warm {:?}/{:?}; cache hit ratio {:.3}",
            quantile(&mut local_reads, 0.5),
            quantile(&mut local_reads, 0.99),
            quantile(&mut cold, 0.5),
            quantile(&mut cold, 0.99),
            quantile(&mut warm, 0.5),
            quantile(&mut warm, 0.99),
            cache.hit_ratio(),
        );
    }
    if std::env::var_os("PROBE").is_some() {
        let url = larch_remote::RemoteUrl::parse(&format!("s3://{BUCKET}/bench0")).unwrap();
        let client = larch_remote::Client::connect(&url, server.settings()).unwrap();
        for size in [256u64 << 10, 64 << 10, 16 << 10, 4 << 10] {
            let mut times = Vec::new();
            for i in 0..30u64 {
                let at = (i * 7919 * 4096) % (200 << 10);
                let started = Instant::now();
                client.get_range("chunk.000005", at..at + size.min(256 << 10)).unwrap();
                times.push(started.elapsed());
            }
            println!(
                "range GET {size} bytes: p50 {:?} max {:?}",
                quantile(&mut times, 0.5),
                quantile(&mut times, 1.0)
            );
        }
    }
    ratios.sort_by(f64::total_cmp);
    println!("median p99 ratio (s3 / local lower): {:.2}", ratios[ratios.len() / 2]);
}
