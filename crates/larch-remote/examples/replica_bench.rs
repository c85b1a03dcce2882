//! Four read replicas reading random historical values from one bucket at once, each with a
//! block cache of its own (256 MiB by default): throughput, latency and errors. A writer in
//! archive mode first commits `BLOCKS` blocks (100 values each, 256 KiB chunks, archiving all but
//! the last 10 blocks every 50) and publishes a manifest; the object store is the in-process
//! `s3s-fs` server of the tests, on loopback. Each replica is a `Replica` with its own cache
//! directory and store handle (in one process: the replicas share the machine's cores, as four
//! processes would), read by `THREADS` threads; every value read is compared with the value
//! written. Before that, a replica's first open is timed in a fresh cache directory, its
//! checksum objects fetched one at a time against `SUMS_IN_FLIGHT` at once, alternated (5 rounds).
//!
//! `cargo run --release -p larch-remote --example replica_bench -- [BLOCKS] [SECONDS] [THREADS] [CACHE_MIB]`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::{BUCKET, S3Server};
use larch_core::{CommitInfo, Hash};
use larch_remote::replica::SUMS_IN_FLIGHT;
use larch_remote::{PublishOptions, Publisher, RemoteLower, RemoteOptions, Replica, ReplicaOptions};
use larch_store::{Repo, RepoOptions};
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

const VALUES: u32 = 100;
const REPLICAS: usize = 4;

fn value(block: u32, key: u32) -> Vec<u8> {
    format!("block {block} key {key} {}", "v".repeat(48)).into_bytes()
}

fn path(block: u32, key: u32) -> [String; 3] {
    ["data".into(), format!("d{}", key % 32), format!("k{block}-{key}")]
}

fn commit_block(repo: &mut Repo, parent: Option<Hash>, block: u32) -> Hash {
    let mut tree = match parent {
        Some(parent) => repo.checkout(&parent).unwrap(),
        None => repo.empty_tree(),
    };
    for key in 0..VALUES {
        let [a, b, c] = path(block, key);
        tree.add(&[a.as_str(), b.as_str(), c.as_str()], value(block, key)).unwrap();
    }
    let parents: Vec<Hash> = parent.into_iter().collect();
    repo.commit(&tree, &parents, CommitInfo::tezos(1_600_000_000 + i64::from(block), "b")).unwrap()
}

fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times.get(((times.len().max(1) - 1) as f64 * q) as usize).copied().unwrap_or_default()
}

fn main() {
    let arg =
        |i: usize, default: u64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (blocks, seconds, threads, cache_mib) =
        (arg(1, 1000) as u32, arg(2, 20), arg(3, 2) as usize, arg(4, 256));
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (store, cache) = (root.path().join("store"), root.path().join("writer-cache"));
    std::fs::create_dir(&store).unwrap();
    let url = format!("s3://{BUCKET}/bench");
    let options = RemoteOptions { cache_dir: Some(cache), cache_bytes: 64 << 20, client: server.settings() };
    let lower = RemoteLower::open(&url, &store, true, &options).unwrap();
    let repo_options = RepoOptions { chunk_bytes: 256 << 10, ..RepoOptions::default() };
    let mut repo = Repo::open_with_layer(&store, repo_options, Some(lower.layer())).unwrap();
    let started = Instant::now();
    let mut commits = Vec::new();
    for block in 0..blocks {
        commits.push(commit_block(&mut repo, commits.last().copied(), block));
        if block % 50 == 49 {
            repo.archive(&commits[block as usize - 10]).unwrap();
        }
    }
    assert!(lower.wait_uploaded(Duration::from_secs(600)));
    let publisher = Publisher::start(
        &lower,
        &store,
        PublishOptions { poll: Duration::ZERO, ..PublishOptions::default() },
    )
    .unwrap();
    publisher.publish_now().unwrap().expect("a manifest");
    let pack = repo.stats().pack_bytes;
    println!(
        "writer: {blocks} blocks ({} values, pack {:.1} MiB) committed, archived and published in {:.1} s; {:?}",
        blocks * VALUES,
        pack as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64(),
        publisher.stats()
    );
    let commits = Arc::new(commits);
    // The seed is printed; each reader thread draws from its own RNG derived from it.
    let (_, seed) = larch_testkit::seeded_rng("replica_bench", 0x04e9_1ca5);
    // A replica's first open, its checksum objects fetched one after the other (1 in flight)
    // against `SUMS_IN_FLIGHT` at once, alternated, each in a fresh cache directory.
    let open_fresh = |dir: &std::path::Path, in_flight: usize| {
        let options = ReplicaOptions {
            cache_dir: dir.to_path_buf(),
            cache_bytes: cache_mib << 20,
            client: server.settings(),
        };
        let opened = Instant::now();
        let replica = Replica::open_in_flight(&url, &options, in_flight).unwrap();
        let reader =
            Repo::open_read_only_layered(replica.mirror(), RepoOptions::default(), Some(replica.layer()))
                .unwrap();
        assert_eq!(reader.head(), commits.last().copied());
        let took = opened.elapsed().as_secs_f64();
        std::fs::remove_dir_all(dir).unwrap();
        took
    };
    for round in 0..5 {
        let order = if round % 2 == 0 { [1, SUMS_IN_FLIGHT] } else { [SUMS_IN_FLIGHT, 1] };
        let mut took = [0.0; 2];
        for in_flight in order {
            took[usize::from(in_flight != 1)] = open_fresh(&root.path().join("fresh"), in_flight);
        }
        println!(
            "first open, round {round}: 1 in flight {:.3} s, {SUMS_IN_FLIGHT} in flight {:.3} s: ratio {:.2}",
            took[0],
            took[1],
            took[0] / took[1]
        );
    }
    let mut replicas = Vec::new();
    for r in 0..REPLICAS {
        let options = ReplicaOptions {
            cache_dir: root.path().join(format!("replica-{r}")),
            cache_bytes: cache_mib << 20,
            client: server.settings(),
        };
        let opened = Instant::now();
        let replica = Arc::new(Replica::open(&url, &options).unwrap());
        let reader = Arc::new(
            Repo::open_read_only_layered(
                replica.mirror(),
                RepoOptions { cache_bytes: 16 << 20, ..RepoOptions::default() },
                Some(replica.layer()),
            )
            .unwrap(),
        );
        println!("replica {r}: opened in {:.3} s", opened.elapsed().as_secs_f64());
        replicas.push((replica, reader));
    }
    // Every replica reads from the same instant on, cold.
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut handles = Vec::new();
    for (r, (_, reader)) in replicas.iter().enumerate() {
        for t in 0..threads {
            let (reader, commits) = (reader.clone(), commits.clone());
            let mut rng = larch_testkit::TestRng::seed_from_u64(seed ^ ((r * 64 + t) as u64));
            handles.push(std::thread::spawn(move || {
                let (mut times, mut errors) = (Vec::new(), 0u64);
                while Instant::now() < deadline {
                    let at = rng.random_range(0..blocks);
                    let written = rng.random_range(0..=at);
                    let key = rng.random_range(0..VALUES);
                    let began = Instant::now();
                    let [a, b, c] = path(written, key);
                    let found =
                        reader.checkout(&commits[at as usize]).map_err(|e| e.to_string()).and_then(|tree| {
                            tree.find(&[a.as_str(), b.as_str(), c.as_str()]).map_err(|e| e.to_string())
                        });
                    times.push(began.elapsed());
                    match found {
                        Ok(Some(v)) if v.as_bytes() == value(written, key).as_slice() => {}
                        other => {
                            errors += 1;
                            if errors < 4 {
                                eprintln!("replica {r}: block {at} value {written}/{key}: {other:?}");
                            }
                        }
                    }
                }
                (r, times, errors)
            }));
        }
    }
    let mut per_replica = vec![(Vec::new(), 0u64); REPLICAS];
    for handle in handles {
        let (r, times, errors) = handle.join().unwrap();
        per_replica[r].0.extend(times);
        per_replica[r].1 += errors;
    }
    let (mut total, mut total_errors) = (0usize, 0u64);
    for (r, (times, errors)) in per_replica.iter_mut().enumerate() {
        let cache = replicas[r].0.status().cache;
        println!(
            "replica {r}: {} reads ({:.0}/s), p50 {:?}, p99 {:?}, {errors} errors, block cache hit ratio {:.3} ({} misses, {:.1} MiB used)",
            times.len(),
            times.len() as f64 / seconds as f64,
            quantile(times, 0.5),
            quantile(times, 0.99),
            cache.hit_ratio(),
            cache.misses,
            cache.used as f64 / (1 << 20) as f64
        );
        total += times.len();
        total_errors += *errors;
    }
    println!(
        "all {REPLICAS} replicas ({threads} threads each, {cache_mib} MiB caches): {total} reads in {seconds} s = {:.0} reads/s, {total_errors} errors",
        total as f64 / seconds as f64
    );
    assert_eq!(total_errors, 0, "every value read is the value written");
}
