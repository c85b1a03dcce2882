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

#[test]
fn mapped_pages_stay_within_the_budget_however_much_is_read() {
    let (mut rng, _seed) = seeded_rng("mapped_pages_stay_within_the_budget", 0x5eed_3a90);
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB chunks: a read charges a whole 2 MiB block, so the 4 MiB budget holds two chunks'.
    let budget = 4 << 20;
    let options = RepoOptions {
        sync: SyncPolicy::Never,
        cache_bytes: 64 << 10,
        chunk_bytes: 1 << 20,
        mmap: true,
        mmap_budget: budget,
        ..RepoOptions::default()
    };
    let mut repo = Repo::open_with(dir.path(), options.clone()).unwrap();
    // 128 commits of 40 values of 3 KB each: ~15 MB of values in ~15 chunk files, several times
    // the budget.
    let mut commits: Vec<(Hash, Values)> = Vec::new();
    let mut tree = repo.empty_tree();
    let mut parents = Vec::new();
    for block in 0..128u64 {
        let mut values = Vec::new();
        for i in 0..40 {
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
    assert!(Repo::open_read_only(dir.path()).unwrap().chunk_files().len() > 8, "too few chunks");

    // A writer and a reader reading through maps, every value of every commit, in random order.
    for writable in [true, false] {
        let repo = if writable {
            Repo::open_with(dir.path(), options.clone()).unwrap()
        } else {
            Repo::open_read_only_options(dir.path(), options.clone()).unwrap()
        };
        let mut order: Vec<usize> = (0..commits.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
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
