//! `Repo::disk_bytes`, sampled for every block's statistics, is the exact sum of the store's file
//! sizes, and looks up on disk only the files that may have changed: not every sealed chunk file at
//! every call (hundreds at mainnet size), but each once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{info, random_op};
use larch_core::Hash;
use larch_store::{Repo, RepoOptions};
use larch_testkit::{Model, seeded_rng};
use std::path::Path;

/// The sizes of the files in `dir`, summed from the file system.
fn real_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().metadata().unwrap().len()).sum()
}

fn chunk_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk."))
        .count()
}

#[test]
fn disk_bytes_is_exact_and_looks_up_sealed_chunks_once() {
    let dir = tempfile::tempdir().unwrap();
    let options = RepoOptions { chunk_bytes: 4096, cache_bytes: 1 << 20, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir.path(), options.clone()).unwrap();
    let (mut rng, seed) = seeded_rng("disk_bytes_is_exact", 7);
    eprintln!("seed {seed}");
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut commits: Vec<Hash> = Vec::new();
    let mut lookups_per_call = Vec::new();
    for block in 0..120 {
        for _ in 0..30 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(repo.commit(&tree, &parents, info(block)).unwrap());
        let before = repo.stats().disk_lookups;
        // Exact, including across each chunk roll.
        assert_eq!(repo.disk_bytes().unwrap(), real_bytes(dir.path()), "seed {seed}, block {block}");
        lookups_per_call.push(repo.stats().disk_lookups - before);
    }
    let chunks = chunk_count(dir.path());
    assert!(chunks > 20, "seed {seed}: {chunks} chunks: too few rolls to test");
    // Past the first calls, a call looks up the head chunk, `control`, `commits` and the chunks
    // sealed since the last call, never all the sealed chunks again.
    let files_now = std::fs::read_dir(dir.path()).unwrap().count() as u64;
    let late = &lookups_per_call[60..];
    assert!(late.iter().all(|&n| n <= 6), "seed {seed}: lookups per call {late:?} of {files_now} files");
    let total: u64 = lookups_per_call.iter().sum();
    assert!(total < 6 * 120 + chunks as u64, "seed {seed}: {total} lookups in 120 calls");

    // After a GC: the chunks it removed leave the sum, its segment enters it.
    let report = repo.gc(&commits[80]).unwrap();
    assert!(report.chunks_removed > 0, "seed {seed}: {report:?}");
    assert_eq!(repo.disk_bytes().unwrap(), real_bytes(dir.path()), "seed {seed}: after the GC");
    assert_eq!(report.disk_after, real_bytes(dir.path()), "seed {seed}: the GC's report");
    for block in 120..140 {
        for _ in 0..30 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(repo.commit(&tree, &parents, info(block)).unwrap());
        assert_eq!(repo.disk_bytes().unwrap(), real_bytes(dir.path()), "seed {seed}, block {block}");
    }
    // A reader agrees.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.disk_bytes().unwrap(), real_bytes(dir.path()), "seed {seed}: a reader");
    repo.close().unwrap();
}
