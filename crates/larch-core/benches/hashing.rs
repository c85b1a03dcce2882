//! Hashing benchmarks (issue #2): contents hashing against raw BLAKE2b on the same bytes, building
//! and hashing a 100,000-entry directory, and updating one entry of a 1,000,000-entry directory.
//!
//! Run: `cargo bench -p larch-core --bench hashing -- --warm-up-time 1 --measurement-time 3`.
//! Results and targets are in `docs/benchmarks.md` at c117370 (`git show c117370:docs/benchmarks.md`).

#![allow(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use larch_core::{Tree, schema};

/// Contents hashing (`u64be(len) ‖ v` through BLAKE2b-256) versus raw BLAKE2b-256 of `v` alone.
fn contents_vs_raw(c: &mut Criterion) {
    let mut group = c.benchmark_group("contents_hash");
    for size in [8usize, 32, 1024, 64 * 1024] {
        let value: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("larch_schema", size), &value, |b, v| {
            b.iter(|| schema::contents_hash(black_box(v)))
        });
        group.bench_with_input(BenchmarkId::new("raw_blake2b_256", size), &value, |b, v| {
            b.iter(|| blake2b_simd::Params::new().hash_length(32).hash(black_box(v)))
        });
        // The same digest as `larch_schema`, from a contiguous copy of the pre-image: isolates the
        // cost of the 8 extra bytes (an extra 128-byte block when `len % 128 > 120`).
        let pre_image = schema::contents_pre_image(&value);
        group.bench_with_input(BenchmarkId::new("raw_blake2b_256_of_pre_image", size), &pre_image, |b, v| {
            b.iter(|| blake2b_simd::Params::new().hash_length(32).hash(black_box(v)))
        });
    }
    group.finish();
}

fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{i}")).collect()
}

fn value_of(i: usize) -> Vec<u8> {
    (i as u64).to_be_bytes().to_vec()
}

fn build(names: &[String]) -> Tree {
    let mut tree = Tree::empty();
    for (i, name) in names.iter().enumerate() {
        tree.add(&[name.as_str()], value_of(i)).unwrap();
    }
    tree
}

/// A root directory of 100,000 contents entries: build and hash, and each half alone.
fn directory_100k(c: &mut Criterion) {
    let names = names(100_000);
    let mut group = c.benchmark_group("dir_100k");
    group.sample_size(10);
    // The built tree is returned, so criterion drops it outside the measurement; the last variant
    // measures the drop too.
    let per_iteration = BatchSize::PerIteration;
    group.bench_function("build_and_hash", |b| {
        b.iter_batched(
            || (),
            |()| {
                let tree = build(black_box(&names));
                black_box(tree.hash());
                tree
            },
            per_iteration,
        )
    });
    group.bench_function("build_only", |b| {
        b.iter_batched(|| (), |()| build(black_box(&names)), per_iteration)
    });
    group.bench_function("hash_only", |b| {
        b.iter_batched(
            || build(&names),
            |tree| {
                black_box(tree.hash());
                tree
            },
            per_iteration,
        )
    });
    group.bench_function("build_hash_and_drop", |b| b.iter(|| build(black_box(&names)).hash()));
    group.finish();
}

/// One entry of a hashed 1,000,000-entry root directory is updated, then the root is rehashed:
/// in place (the path is uniquely owned), and on a clone of a shared tree (copy-on-write).
fn update_in_1m(c: &mut Criterion) {
    let names = names(1_000_000);
    let mut tree = build(&names);
    let _ = tree.hash();
    let mut group = c.benchmark_group("dir_1m_update");
    let mut counter = 0usize;
    group.bench_function("update_one_and_rehash_in_place", |b| {
        b.iter(|| {
            counter = counter.wrapping_add(7919);
            let name = &names[counter % names.len()];
            tree.add(&[name.as_str()], value_of(counter)).unwrap();
            tree.hash()
        })
    });
    let base = tree.clone();
    group.bench_function("update_one_and_rehash_on_clone", |b| {
        b.iter(|| {
            counter = counter.wrapping_add(7919);
            let name = &names[counter % names.len()];
            let mut copy = base.clone();
            copy.add(&[name.as_str()], value_of(counter)).unwrap();
            copy.hash()
        })
    });
    group.finish();
}

criterion_group!(benches, contents_vs_raw, directory_100k, update_in_1m);
criterion_main!(benches);
