//! Walks of a tree too large for the CPU's caches (issue 11): random `find`s, and `add`s to a
//! copy of a hashed tree (each copies the shared nodes on its path with `Node::clone`). Their cost
//! is mostly waiting for memory: the searches' probes and the reference counts a copy increments
//! (the hints of `larch-core/src/tree/prefetch.rs`).
//!
//! Run: `cargo bench -p larch-core --bench tree_walk -- --warm-up-time 1 --measurement-time 3`.
//! Results are in `docs/benchmarks.md` at c117370 ("Issue 11, fifteenth round").

#![allow(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, Criterion, black_box, criterion_group, criterion_main};
use larch_core::Tree;

/// Accounts of the tree: 100,000 directories of 8 values under one large directory (~150 MB).
const ACCOUNTS: u64 = 100_000;
const KEYS: [&str; 8] =
    ["balance", "counter", "delegate", "frozen", "manager", "roll", "spendable", "staked"];

fn account(i: u64) -> String {
    format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A xorshift generator: the same probes in every run.
struct Probes(u64);

impl Probes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn path(&mut self) -> [String; 3] {
        let id = account(self.next() % ACCOUNTS);
        let key = KEYS[(self.next() % KEYS.len() as u64) as usize];
        ["index".to_string(), id, key.to_string()]
    }
}

fn large_tree() -> Tree {
    let mut tree = Tree::empty();
    for i in 0..ACCOUNTS {
        let id = account(i);
        for key in KEYS {
            tree.add(&["index", id.as_str(), key], i.to_be_bytes().to_vec()).unwrap();
        }
    }
    tree.hash();
    tree
}

fn tree_walk(c: &mut Criterion) {
    let tree = large_tree();
    let mut group = c.benchmark_group("tree_walk");
    let mut probes = Probes(0x1234_5678);
    group.bench_function("find_cold", |b| {
        b.iter_batched(|| probes.path(), |path| black_box(tree.find(&path).unwrap()), BatchSize::SmallInput)
    });
    let mut probes = Probes(0x8765_4321);
    group.bench_function("add_to_a_copy_100", |b| {
        b.iter_batched(
            || (tree.clone(), (0..100).map(|_| probes.path()).collect::<Vec<_>>()),
            |(mut copy, paths)| {
                for path in &paths {
                    copy.add(path, vec![7u8; 4]).unwrap();
                }
                copy
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, tree_walk);
criterion_main!(benches);
