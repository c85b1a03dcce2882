//! Commits while a garbage collection runs, on a real store: the writer commits small blocks
//! (a few hundred rewritten values under the head's tree) without GC, then while a GC of the
//! commit N behind the head runs on its thread, until the GC has switched, then as many again
//! without GC; prints the block times of the three phases (median, p90, max) and the GC's report
//! (the switch pause is the writer's share).
//!
//! ```text
//! cargo run --release -p larch-store --example gc_concurrent -- STORE --behind N [--blocks B]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: failing loudly is right

use larch_core::CommitInfo;
use larch_store::Repo;
use std::time::{Duration, Instant};

fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    format!("{} blocks: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms", times.len(), at(0.5), at(0.9), at(1.0))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store = args.first().expect("usage: gc_concurrent STORE --behind N [--blocks B]");
    let value = |flag: &str| -> Option<usize> {
        args.iter().position(|arg| arg == flag).map(|i| args[i + 1].parse().expect("a number"))
    };
    let behind = value("--behind").expect("--behind N");
    let blocks = value("--blocks").unwrap_or(40);
    let mut repo = Repo::open(std::path::Path::new(store)).unwrap();
    let mut head = repo.head().expect("a `main` branch");
    let mut chain = vec![head];
    while let Ok(details) = repo.commit_details(chain.last().unwrap()) {
        match details.parents.first() {
            Some(parent) if repo.contains(parent) => chain.push(*parent),
            _ => break,
        }
    }
    let gc_commit = chain[behind.min(chain.len() - 1)];
    let mut tree = repo.checkout(&head).unwrap();
    let mut level = 0u64;
    let mut block = |repo: &mut Repo, tree: &mut larch_core::Tree, head: &mut larch_core::Hash| -> Duration {
        let start = Instant::now();
        for i in 0..300u64 {
            let key = format!("{:04}", (level * 7919 + i * 104_729) % 5000);
            tree.add(&["gc-bench", &format!("d{}", i % 16), &key], format!("{level}-{i}").into_bytes())
                .unwrap();
        }
        *head = repo.commit(tree, &[*head], CommitInfo::tezos(level as i64, "gc bench")).unwrap();
        *tree = repo.checkout(head).unwrap();
        level += 1;
        start.elapsed()
    };
    let mut without = Vec::new();
    for _ in 0..blocks {
        without.push(block(&mut repo, &mut tree, &mut head));
    }
    repo.gc_start(&gc_commit).unwrap();
    let started = Instant::now();
    let mut during = Vec::new();
    let report = loop {
        during.push(block(&mut repo, &mut tree, &mut head));
        let finish = Instant::now();
        if let Some(report) = repo.gc_finish().unwrap() {
            println!(
                "gc_finish (switch if not done yet + deletion publish): {:.2} ms",
                finish.elapsed().as_secs_f64() * 1e3
            );
            break report;
        }
    };
    let mut after = Vec::new();
    for _ in 0..blocks {
        after.push(block(&mut repo, &mut tree, &mut head));
    }
    println!("before GC: {}", summary(&mut without));
    println!("during GC: {}", summary(&mut during));
    println!("after GC:  {}", summary(&mut after));
    println!(
        "GC: {:.2} s from start to report; mark {:.2} s, copy {:.2} s, switch pause {:.3} ms; copied {:.1} MiB; disk {:.1} → peak {:.1} → {:.1} MiB",
        started.elapsed().as_secs_f64(),
        report.mark_time.as_secs_f64(),
        report.copy_time.as_secs_f64(),
        report.switch_pause.as_secs_f64() * 1e3,
        report.copied_bytes as f64 / f64::from(1 << 20),
        report.disk_before as f64 / f64::from(1 << 20),
        report.disk_peak as f64 / f64::from(1 << 20),
        report.disk_after as f64 / f64::from(1 << 20),
    );
    repo.close().unwrap();
}
