//! Proof benchmark (docs/benchmarks.md at c117370, "Merkle proofs"): for 1, 10 and 100 random keys of a
//! store's head, the size of the proof of their `find`s (V1, V2, JSON) against the raw values, and
//! the time to produce and to verify it (minimum of several runs, after one warm-up).
//!
//! ```sh
//! cargo run --release -p larch-cli --example proof_bench -- STORE [COMMIT|head] [SEED]
//! ```

use anyhow::Context;
use larch_core::Tree;
use larch_proof::encoding::{v1, v2};
use larch_proof::{Op, OpResult};
use std::time::{Duration, Instant};

/// xorshift64*: deterministic key choice without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// Every contents path below `tree` (iterative walk).
fn all_paths(tree: &Tree) -> anyhow::Result<Vec<Vec<Vec<u8>>>> {
    let mut out = Vec::new();
    let mut stack: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
    while let Some(path) = stack.pop() {
        for (name, sub) in tree.list(&path, 0, None)? {
            let mut child = path.clone();
            child.push(name.as_bytes().to_vec());
            match sub.kind() {
                larch_core::Kind::Contents => out.push(child),
                larch_core::Kind::Node => stack.push(child),
            }
        }
    }
    Ok(out)
}

fn min_time(runs: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    f()?;
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        best = best.min(start.elapsed());
    }
    Ok(best)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let store = args.next().context("usage: proof_bench STORE [COMMIT|head] [SEED]")?;
    let commit = args.next().filter(|c| c != "head");
    let seed: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let repo = larch_store::Repo::open_read_only(&store)?;
    let head = match commit {
        Some(text) => text.parse::<larch_core::Hash>()?,
        None => repo.head().context("no head commit")?,
    };
    let tree = repo.checkout(&head)?;
    let start = Instant::now();
    let paths = all_paths(&tree)?;
    eprintln!("head {head}: {} values (listed in {:.1?})", paths.len(), start.elapsed());
    let mut rng = Rng(seed.max(1));
    println!(
        "| keys | raw values | V1 | V2 | repr JSON | V2 / raw | produce | verify (V2 decode + verify) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for n in [1usize, 10, 100] {
        let ops: Vec<Op> = (0..n).map(|_| Op::Find(paths[rng.below(paths.len())].clone())).collect();
        let produced = larch_core::proof::produce(&tree, &ops)?;
        let raw: usize = produced
            .results
            .iter()
            .map(|r| match r {
                OpResult::Value(Some(v)) => v.len(),
                _ => 0,
            })
            .sum();
        let v1_bytes = v1::encode(&produced.proof)?;
        let v2_bytes = v2::encode(&produced.proof)?;
        let json = larch_proof::json::write(&produced.proof)?;
        let produce_time = min_time(20, || {
            // A fresh checkout each time: the proof is built from the store's (cached) objects.
            let tree = repo.checkout(&head)?;
            larch_core::proof::produce(&tree, &ops)?;
            Ok(())
        })?;
        let verify_time = min_time(20, || {
            let proof = v2::decode(&v2_bytes)?;
            larch_proof::verify(&proof, &ops)?;
            Ok(())
        })?;
        println!(
            "| {n} | {raw} B | {} B | {} B | {} B | {:.1}× | {:.2?} | {:.2?} |",
            v1_bytes.len(),
            v2_bytes.len(),
            json.len(),
            v2_bytes.len() as f64 / raw.max(1) as f64,
            produce_time,
            verify_time
        );
    }
    Ok(())
}
