//! Hashing a large-burst commit's tree on one thread against two (`larch_store::parallel_tree_hash`):
//! a store holding `ACCOUNTS` account directories below an inode trie, then `CHANGED` of them
//! rewritten, as a large-burst block of the default trace does (~16k directories).
//!
//! ```text
//! cargo run --release -p larch-store --example hash_split -- [ACCOUNTS] [CHANGED] [REPS]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark driver: failing loudly is right

use larch_core::{CommitInfo, Tree};
use larch_store::{Repo, RepoOptions};
use std::time::{Duration, Instant};

fn path(account: usize, field: &str) -> [String; 5] {
    ["data".into(), "contracts".into(), "index".into(), format!("tz1{account:040x}"), field.into()]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let accounts = args.first().copied().unwrap_or(20_000);
    let changed = args.get(1).copied().unwrap_or(16_000).min(accounts);
    let reps = args.get(2).copied().unwrap_or(7);
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), RepoOptions::default()).unwrap();
    let mut tree = Tree::empty();
    for a in 0..accounts {
        for field in ["balance", "counter", "manager"] {
            tree.add(&path(a, field), format!("{a}/{field}/initial value").into_bytes()).unwrap();
        }
    }
    let base = repo.commit(&tree, &[], CommitInfo::tezos(0, "setup")).unwrap();
    let burst = |repo: &Repo, round: usize| {
        let mut tree = repo.checkout(&base).unwrap();
        for i in 0..changed {
            let a = (i * 7919 + round) % accounts;
            tree.add(&path(a, "balance"), format!("{round}:{i}").into_bytes()).unwrap();
        }
        tree
    };
    let (mut serial, mut parallel) = (Duration::MAX, Duration::MAX);
    for round in 0..reps {
        // Built one after the other: the tree built last is warmer in the CPU caches, so the
        // order alternates between rounds.
        let (first, second) = (burst(&repo, round), burst(&repo, round));
        let (one, two) = if round % 2 == 0 { (second, first) } else { (first, second) };
        let start = Instant::now();
        let h1 = one.hash();
        serial = serial.min(start.elapsed());
        let start = Instant::now();
        let h2 = larch_store::parallel_tree_hash(&two);
        parallel = parallel.min(start.elapsed());
        assert_eq!(h1, h2);
    }
    println!(
        "{accounts} accounts, {changed} rewritten: one thread {:.2} ms, two threads {:.2} ms ({:.2}x), best of {reps}",
        serial.as_secs_f64() * 1e3,
        parallel.as_secs_f64() * 1e3,
        serial.as_secs_f64() / parallel.as_secs_f64()
    );
}
