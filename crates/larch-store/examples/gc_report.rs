//! One garbage collection on a real store (docs/gc-design.md §13, step 4 measured): opens the store
//! for writing, takes the commit of block B on the first-parent chain of `main`, runs `Repo::gc`
//! on it and prints the report (times, bytes copied, disk before, peak and after); then checks that
//! the head still reads (its whole tree is walked) and, with `--fsck`, the whole store.
//!
//! ```text
//! cargo run --release -p larch-store --example gc_report -- STORE (--block B | --behind N) [--fsck]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: failing loudly is right

use larch_core::{Entry, Tree};
use larch_store::Repo;
use std::time::Instant;

const MIB: f64 = (1u64 << 20) as f64;

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// Walks the whole tree (every node loaded): returns the number of contents values.
fn walk(tree: &Tree) -> u64 {
    let empty: [&[u8]; 0] = [];
    let mut values = 0;
    let mut stack = vec![tree.clone()];
    while let Some(tree) = stack.pop() {
        for (_, child) in tree.list(&empty, 0, None).unwrap() {
            match child.root() {
                Entry::Contents(_) => values += 1,
                Entry::Node(_) => stack.push(child),
            }
        }
    }
    values
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store = args.first().expect("usage: gc_report STORE --block B [--fsck]");
    let value = |flag: &str| -> Option<usize> {
        args.iter().position(|arg| arg == flag).map(|i| args[i + 1].parse().expect("a number"))
    };
    let mut repo = Repo::open(std::path::Path::new(store)).unwrap();
    let head = repo.head().expect("a `main` branch");
    let mut chain = vec![head];
    while let Ok(details) = repo.commit_details(chain.last().unwrap()) {
        match details.parents.first() {
            Some(parent) if repo.contains(parent) => chain.push(*parent),
            _ => break,
        }
    }
    chain.reverse();
    // `--block B` on a store never collected (the chain starts at genesis); `--behind N`: N commits
    // behind the head (also on a collected store, whose chain starts at its oldest kept commit).
    let block = match (value("--block"), value("--behind")) {
        (Some(block), _) => block.min(chain.len() - 1),
        (None, Some(behind)) => chain.len() - 1 - behind.min(chain.len() - 1),
        _ => panic!("give --block B or --behind N"),
    };
    let commit = chain[block];
    let start = Instant::now();
    let report = repo.gc(&commit).unwrap();
    let wall = start.elapsed();
    println!("GC of chain position {block} (commit {commit}), generation {}", report.generation);
    println!(
        "  wall {:.2} s: mark {:.2} s, copy {:.2} s, switch pause {:.2} ms, total to switch {:.2} s",
        wall.as_secs_f64(),
        report.mark_time.as_secs_f64(),
        report.copy_time.as_secs_f64(),
        report.switch_pause.as_secs_f64() * 1e3,
        report.total_time.as_secs_f64()
    );
    println!(
        "  copied {} live records, {:.2} MiB ({} base-only), of a region of {:.1} MiB in files",
        report.live_records,
        report.copied_bytes as f64 / MIB,
        report.base_only_records,
        report.region_bytes as f64 / MIB
    );
    println!(
        "  disk before {:.1} MiB, peak {:.1} MiB (+{:.1}%), after {:.1} MiB; {} chunk files removed, {} bytes waiting; branches removed {:?}",
        report.disk_before as f64 / MIB,
        report.disk_peak as f64 / MIB,
        100.0 * (report.disk_peak as f64 / report.disk_before as f64 - 1.0),
        report.disk_after as f64 / MIB,
        report.chunks_removed,
        report.bytes_waiting,
        report.branches_removed
    );
    println!("  peak RSS of this process {:.1} MiB", vm_hwm_kib() as f64 / 1024.0);
    let start = Instant::now();
    let values = walk(&repo.checkout(&head).unwrap());
    println!("head reads back: {values} values walked in {:.2} s", start.elapsed().as_secs_f64());
    if args.iter().any(|arg| arg == "--fsck") {
        let start = Instant::now();
        let fsck = repo.fsck();
        println!(
            "fsck: {} problems, {} collected parents, in {:.1} s",
            fsck.problems.len(),
            fsck.collected_parents.len(),
            start.elapsed().as_secs_f64()
        );
        for problem in fsck.problems.iter().take(5) {
            println!("  {problem}");
        }
    }
    repo.close().unwrap();
}
