//! Benchmarks of the pack store on a Tezos-shaped workload (docs/benchmarks.md at c117370, "larch-store").
//!
//! ```text
//! cargo run --release -p larch-store --example store_bench -- workload [BLOCKS] [DIR]
//! cargo run --release -p larch-store --example store_bench -- open [GIB] [DIR]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark driver: failing loudly is right

use larch_core::{CommitInfo, Hash, Tree};
use larch_store::{Repo, RepoOptions, SyncPolicy};
use larch_testkit::{TestRng, seeded_rng};
use rand::Rng;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn hex_id(rng: &mut TestRng, bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", rng.random::<u8>())).collect()
}

fn info(level: u64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * level as i64, format!("lvl {level}"))
}

struct Keys {
    accounts: Vec<String>,
    big_map: Vec<String>,
}

fn path_of(keys: &Keys, rng: &mut TestRng) -> Vec<String> {
    // Hot keys: a Zipf-like skew by squaring a uniform draw.
    let pick = |n: usize, rng: &mut TestRng| {
        let u: f64 = rng.random();
        ((u * u) * n as f64) as usize % n
    };
    match rng.random_range(0..10) {
        0..=6 => {
            let account = &keys.accounts[pick(keys.accounts.len(), rng)];
            let field = ["balance", "counter", "manager"][rng.random_range(0..3)];
            vec!["data".into(), "contracts".into(), "index".into(), account.clone(), field.into()]
        }
        7..=8 => {
            let key = &keys.big_map[pick(keys.big_map.len(), rng)];
            vec![
                "data".into(),
                "big_maps".into(),
                "index".into(),
                "1".into(),
                "contents".into(),
                key.clone(),
                "data".into(),
            ]
        }
        _ => vec!["data".into(), "contracts".into(), "global_counter".into()],
    }
}

fn small_value(rng: &mut TestRng) -> Vec<u8> {
    let len = rng.random_range(1..24);
    (0..len).map(|_| rng.random()).collect()
}

/// Resident memory of this process: total, anonymous, file-backed (from /proc/self/status).
fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|line| {
            line.starts_with("VmHWM") || line.starts_with("RssAnon") || line.starts_with("RssFile")
        })
        .map(|line| line.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

fn workload(blocks: u64, dir: &Path) {
    let (mut rng, _) = seeded_rng("store_bench", 1);
    let sync = match std::env::var("LARCH_SYNC").as_deref() {
        Ok("never") => SyncPolicy::Never,
        _ => SyncPolicy::Commit,
    };
    let mmap = std::env::var("LARCH_MMAP").is_ok();
    let options = RepoOptions { sync, mmap, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir, options).unwrap();
    let keys = Keys {
        accounts: (0..20_000).map(|_| hex_id(&mut rng, 22)).collect(),
        big_map: (0..30_000).map(|_| hex_id(&mut rng, 32)).collect(),
    };
    // Setup block.
    let started = Instant::now();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    for (i, account) in keys.accounts.iter().enumerate() {
        let base = ["data", "contracts", "index", account.as_str()];
        for field in ["balance", "counter", "manager"] {
            let path: Vec<&str> = base.iter().copied().chain([field]).collect();
            tree.add(&path, small_value(&mut rng)).unwrap();
        }
        if i % 20 == 0 {
            let code: Vec<u8> = (0..rng.random_range(100..30_000)).map(|_| rng.random()).collect();
            let path: Vec<&str> = base.iter().copied().chain(["code"]).collect();
            tree.add(&path, code).unwrap();
        }
    }
    for key in &keys.big_map {
        tree.add(&["data", "big_maps", "index", "1", "contents", key, "data"], small_value(&mut rng))
            .unwrap();
        tree.add(&["data", "big_maps", "index", "1", "contents", key, "len"], vec![1]).unwrap();
    }
    let mut head = repo.commit(&tree, &[], info(1)).unwrap();
    let setup = started.elapsed();
    let setup_bytes = repo.stats().pack_bytes;
    drop(tree);
    println!("setup block: {:.2?}, pack {:.1} MB; memory: {}", setup, setup_bytes as f64 / 1e6, rss());

    let mut ops = 0u64;
    let mut commit_time = Duration::ZERO;
    let mut checkout_time = Duration::ZERO;
    let mut hash_time = Duration::ZERO;
    let mut appended = 0u64;
    let before = repo.stats();
    let run = Instant::now();
    for level in 2..blocks + 2 {
        let t = Instant::now();
        let mut tree = repo.checkout(&head).unwrap();
        checkout_time += t.elapsed();
        for _ in 0..2000 {
            let path = path_of(&keys, &mut rng);
            match rng.random_range(0..100) {
                0..=39 => {
                    let _ = tree.find(&path).unwrap();
                }
                40..=69 => tree.add(&path, small_value(&mut rng)).unwrap(),
                70..=91 => {
                    let _ = tree.mem(&path).unwrap();
                }
                92..=94 => tree.remove(&path).unwrap(),
                _ => {
                    let _ = tree.mem_tree(&path[..path.len() - 1]).unwrap();
                }
            }
            ops += 1;
        }
        let t = Instant::now();
        let _ = tree.hash();
        hash_time += t.elapsed();
        let t = Instant::now();
        let pack_before = repo.stats().pack_bytes;
        head = repo.commit(&tree, &[head], info(level)).unwrap();
        commit_time += t.elapsed();
        appended += repo.stats().pack_bytes - pack_before;
        ops += 2;
    }
    let elapsed = run.elapsed();
    let after = repo.stats();
    println!(
        "{blocks} blocks, {ops} ops in {elapsed:.2?}: {:.0} ops/s; hash {:.2?}/block, commit (after hash) {:.2?}/block, checkout {:.2?}/block",
        ops as f64 / elapsed.as_secs_f64(),
        hash_time / blocks as u32,
        commit_time / blocks as u32,
        checkout_time / blocks as u32
    );
    println!(
        "per commit: {:.0} objects, {:.0} bytes appended to the pack, {:.0} bytes to pack+index; cache hits {} misses {} ({:.1}% hit), cache {:.1} MB",
        (after.objects_written - before.objects_written) as f64 / blocks as f64,
        appended as f64 / blocks as f64,
        (after.bytes_written - before.bytes_written) as f64 / blocks as f64,
        after.cache_hits - before.cache_hits,
        after.cache_misses - before.cache_misses,
        100.0 * (after.cache_hits - before.cache_hits) as f64
            / ((after.cache_hits + after.cache_misses) - (before.cache_hits + before.cache_misses)).max(1)
                as f64,
        after.cache_bytes as f64 / 1e6
    );
    println!("store: pack {:.1} MB, index {} B", after.pack_bytes as f64 / 1e6, after.index_bytes);
    println!("memory after the blocks: {}", rss());
    if std::env::var("LARCH_BENCH_SMAPS").is_ok() {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
        let mut current = String::new();
        for line in smaps.lines() {
            if line.contains('-') && !line.starts_with(|c: char| c.is_ascii_uppercase()) {
                current = line.to_string();
            } else if let Some(rest) = line.strip_prefix("Rss:") {
                let kb: u64 = rest.trim().trim_end_matches(" kB").parse().unwrap_or(0);
                if kb > 10_000 {
                    println!("{kb} kB  {current}");
                }
            }
        }
    }
    repo.close().unwrap();
    if std::env::var("LARCH_BENCH_QUICK").is_ok() {
        return;
    }

    // Read latency: a fresh reader (empty object cache, OS page cache warm), then the same reads warm.
    let reader = Repo::open_read_only_options(dir, RepoOptions { mmap, ..RepoOptions::default() }).unwrap();
    let tree = reader.checkout(&head).unwrap();
    let paths: Vec<Vec<String>> = (0..20_000).map(|_| path_of(&keys, &mut rng)).collect();
    for (label, tree) in [("cold cache", tree.clone()), ("warm cache", tree)] {
        let t = Instant::now();
        for path in &paths {
            let _ = tree.find(path).unwrap();
        }
        println!("find latency, {label}: {:.2?}/find", t.elapsed() / paths.len() as u32);
    }
    let t = Instant::now();
    let report = reader.fsck();
    println!("fsck: {:.2?}, clean: {}\n{report}", t.elapsed(), report.is_clean());
    let t = Instant::now();
    let _ = Tree::clone(&reader.checkout(&head).unwrap()).hash();
    let _ = t;
}

fn open_large(gib: u64, dir: &Path) {
    if !dir.join("control").exists() {
        let (mut rng, _) = seeded_rng("store_bench_open", 2);
        let options = RepoOptions { sync: SyncPolicy::Never, cache_bytes: 8 << 20, ..RepoOptions::default() };
        let mut repo = Repo::open_with(dir, options).unwrap();
        let mut tree = repo.empty_tree();
        let mut parents: Vec<Hash> = vec![];
        let target = gib << 30;
        let mut level = 0;
        let blob: Vec<u8> = (0..64 * 1024).map(|_| rng.random()).collect();
        while repo.stats().pack_bytes < target {
            for i in 0..4u64 {
                let mut value = blob.clone();
                value[..8].copy_from_slice(&(level * 4 + i).to_le_bytes());
                tree.add(&["data", "blobs", &format!("{:04x}", (level * 4 + i) % 4096)], value).unwrap();
            }
            tree.add(&["data", "level"], level.to_le_bytes().to_vec()).unwrap();
            let hash = repo.commit(&tree, &parents, info(level)).unwrap();
            parents = vec![hash];
            tree = repo.checkout(&hash).unwrap();
            level += 1;
        }
        repo.close().unwrap();
        println!("built {} commits", level);
    }
    let size: u64 = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("chunk."))
        .map(|entry| entry.metadata().unwrap().len())
        .sum();
    for round in 0..3 {
        let t = Instant::now();
        let repo = Repo::open_read_only(dir).unwrap();
        let read_only = t.elapsed();
        let commits = repo.commit_count();
        drop(repo);
        let t = Instant::now();
        let repo = Repo::open(dir).unwrap();
        let writer = t.elapsed();
        let head = repo.head().unwrap();
        let t = Instant::now();
        let value = repo.checkout(&head).unwrap().find(&["data", "level"]).unwrap();
        println!(
            "round {round}: pack {:.2} GB, {commits} commits: open read-only {read_only:.2?}, open writer {writer:.2?}, first find {:.2?} ({:?})",
            size as f64 / 1e9,
            t.elapsed(),
            value.map(|v| v.len())
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let temp = std::env::temp_dir().join(format!("larch-store-bench-{}", std::process::id()));
    let arg = |i: usize| args.get(i).cloned();
    match arg(1).as_deref() {
        Some("open") => {
            let gib = arg(2).and_then(|a| a.parse().ok()).unwrap_or(1);
            let dir = arg(3).map(PathBuf::from).unwrap_or(temp);
            open_large(gib, &dir);
        }
        _ => {
            let blocks = arg(2).and_then(|a| a.parse().ok()).unwrap_or(200);
            let dir = arg(3).map(PathBuf::from).unwrap_or(temp);
            let _ = std::fs::remove_dir_all(&dir);
            workload(blocks, &dir);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
