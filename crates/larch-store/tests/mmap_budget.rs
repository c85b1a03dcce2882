//! Reads through memory maps keep at most `RepoOptions::mmap_budget` bytes of mapped pages
//! resident in the process, however much they read, and read the same values as `pread`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::info;
use larch_core::Hash;
use larch_store::{Repo, RepoOptions, SyncPolicy};
use larch_testkit::seeded_rng;
use rand::Rng;
use std::path::Path;

/// The values a commit added: key and bytes.
type Values = Vec<(String, Vec<u8>)>;

/// The resident bytes (`Rss` in `/proc/self/smaps`) of this process's maps of files under `dir`.
fn mapped_resident(dir: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let dir = dir.to_string_lossy();
    let mut inside = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: `start-end perms offset dev inode [path]`.
            inside = line.contains(&*dir);
        } else if inside && let Some(rss) = line.strip_prefix("Rss:") {
            kib += rss.trim().trim_end_matches("kB").trim().parse::<u64>().expect("Rss in kB");
        }
    }
    kib * 1024
}

/// Options reading through maps within `budget`, in chunks of `chunk_bytes`, with a tiny cache
/// (most reads reach the maps).
fn mapped_options(chunk_bytes: u64, budget: u64) -> RepoOptions {
    RepoOptions {
        sync: SyncPolicy::Never,
        cache_bytes: 64 << 10,
        chunk_bytes,
        mmap: true,
        mmap_budget: budget,
        ..RepoOptions::default()
    }
}

/// Writes `blocks` commits of `per_block` random values of 3 KB each into a new store at `dir`;
/// returns each commit with the values it added.
fn write_commits(
    dir: &Path,
    options: &RepoOptions,
    rng: &mut impl Rng,
    blocks: u64,
    per_block: u32,
) -> Vec<(Hash, Values)> {
    let mut repo = Repo::open_with(dir, options.clone()).unwrap();
    let mut commits: Vec<(Hash, Values)> = Vec::new();
    let mut tree = repo.empty_tree();
    let mut parents = Vec::new();
    for block in 0..blocks {
        let mut values = Vec::new();
        for i in 0..per_block {
            let value: Vec<u8> = (0..3000).map(|_| rng.random()).collect();
            let key = format!("k{block}-{i}");
            tree.add(&["values", &key], value.clone()).unwrap();
            values.push((key, value));
        }
        let hash = repo.commit(&tree, &parents, info(block)).unwrap();
        parents = vec![hash];
        tree = repo.checkout(&hash).unwrap();
        commits.push((hash, values));
    }
    repo.close().unwrap();
    commits
}

/// `0..len` in a random order.
fn shuffled(rng: &mut impl Rng, len: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    order
}

#[test]
fn mapped_pages_stay_within_the_budget_however_much_is_read() {
    let (mut rng, _seed) = seeded_rng("mapped_pages_stay_within_the_budget", 0x5eed_3a90);
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB chunks: a read charges a whole 2 MiB block, so the 4 MiB budget holds two chunks'.
    let budget = 4 << 20;
    let options = mapped_options(1 << 20, budget);
    // 128 commits of 40 values of 3 KB each: ~15 MB of values in ~15 chunk files, several times
    // the budget.
    let commits = write_commits(dir.path(), &options, &mut rng, 128, 40);
    assert!(Repo::open_read_only(dir.path()).unwrap().chunk_files().len() > 8, "too few chunks");

    // A writer and a reader reading through maps, every value of every commit, in random order.
    for writable in [true, false] {
        let repo = if writable {
            Repo::open_with(dir.path(), options.clone()).unwrap()
        } else {
            Repo::open_read_only_options(dir.path(), options.clone()).unwrap()
        };
        let order = shuffled(&mut rng, commits.len());
        let mut most_resident = 0;
        for &at in &order {
            let (hash, values) = &commits[at];
            let tree = repo.checkout(hash).unwrap();
            for (key, value) in values {
                assert_eq!(tree.find(&["values", key]).unwrap().unwrap().as_bytes(), &value[..], "{key}");
            }
            let stats = repo.stats();
            assert!(stats.mapped_bytes <= budget, "charged {} over the budget", stats.mapped_bytes);
            let resident = mapped_resident(dir.path());
            most_resident = most_resident.max(resident);
            assert!(resident <= budget, "{resident} bytes of maps resident, over the budget {budget}");
        }
        let stats = repo.stats();
        assert!(stats.bytes_read > 3 * budget, "read only {} bytes", stats.bytes_read);
        assert!(stats.map_releases > 0, "no map was released");
        assert!(most_resident > 0, "nothing read through a map");
        let report = repo.fsck();
        assert!(report.is_clean(), "{report}");
        println!(
            "writable {writable}: read {} bytes, {} releases, at most {most_resident} bytes of maps resident",
            stats.bytes_read, stats.map_releases
        );
    }
}

#[test]
fn maps_larger_than_the_budget_read_from_two_threads_stay_within_it() {
    let (mut rng, seed) = seeded_rng("maps_larger_than_the_budget", 0x5eed_3a91);
    let dir = tempfile::tempdir().unwrap();
    // 8 MiB chunks (four 2 MiB blocks each) under a 4 MiB budget: one map can hold more than the
    // whole budget, and two threads read the same maps, charging and releasing them at once.
    let budget = 4 << 20;
    let options = mapped_options(8 << 20, budget);
    // 96 commits of 120 values of 3 KB: ~35 MB in ~5 chunk files.
    let commits = write_commits(dir.path(), &options, &mut rng, 96, 120);
    let repo = Repo::open_read_only_options(dir.path(), options).unwrap();
    assert!(repo.chunk_files().len() >= 4, "seed {seed}: too few chunks");
    // Two threads, each every commit's values in its own order, on one handle.
    std::thread::scope(|scope| {
        for thread in 0..2u64 {
            let (repo, commits) = (&repo, &commits);
            scope.spawn(move || {
                let (mut rng, _) = seeded_rng("maps_larger_than_the_budget_reader", seed + thread);
                let order = shuffled(&mut rng, commits.len());
                for &at in &order {
                    let (hash, values) = &commits[at];
                    let tree = repo.checkout(hash).unwrap();
                    for (key, value) in values {
                        assert_eq!(tree.find(&["values", key]).unwrap().unwrap().as_bytes(), &value[..]);
                    }
                    // After a read, the charge is within the budget but for the other thread's
                    // read in flight (a 3 KB value: at most two 2 MiB blocks), however the
                    // scheduler interleaves the two threads' charges and releases.
                    let charged = repo.stats().mapped_bytes;
                    assert!(
                        charged <= budget + (4 << 20),
                        "seed {seed}: charged {charged} after a read, over the budget {budget} and \
                         the other thread's read"
                    );
                }
            });
        }
    });
    // Once both are done, a last read on this thread brings the charge within the budget, and
    // the pages resident with it.
    let (hash, values) = &commits[0];
    let tree = repo.checkout(hash).unwrap();
    assert_eq!(tree.find(&["values", &values[0].0]).unwrap().unwrap().as_bytes(), &values[0].1[..]);
    let stats = repo.stats();
    assert!(stats.mapped_bytes <= budget, "seed {seed}: charged {} after a last read", stats.mapped_bytes);
    assert!(stats.map_releases > 0, "seed {seed}: no map was released");
    assert!(stats.bytes_read > 3 * budget, "seed {seed}: read only {} bytes", stats.bytes_read);
    let resident = mapped_resident(dir.path());
    assert!(resident <= budget + (4 << 20), "seed {seed}: {resident} bytes of maps resident");
    assert!(repo.fsck().is_clean());
}
