//! The first GC keeps a mostly live first chunk in place (docs/gc-design.md §13, *Chunks kept in
//! place*): instead of copying the live records of the store's first chunk (the initial state:
//! the setup block, an imported snapshot), it names the chunk in the segment list and reads it as
//! a segment from then on. Stores from seeded random workloads with small chunks: the kept chunk
//! stays on disk through reopening, later GCs and readers; every kept commit reads back equal to
//! its model and collected ones are `Collected`; a compacting GC merges it like any old segment
//! (then it is deleted); a first chunk mostly dead is copied as before; a store whose control
//! file is lost is rebuilt with the kept chunk at the bottom of its segment chain.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::{Hash, Tree};
use larch_store::{GcOptions, GcPolicy, Repo, RepoOptions, StoreError, plan_recovery};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::path::Path;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: 4096, cache_bytes: 1 << 20, ..RepoOptions::default() }
}

/// A writer, its head's tree and model, and every commit of `main` with its model.
struct Store {
    repo: Repo,
    tree: Tree,
    model: Model,
    commits: Vec<(Hash, Model)>,
    rng: TestRng,
}

impl Store {
    fn new(dir: &Path, name: &str, default_seed: u64) -> Store {
        let (rng, seed) = seeded_rng(name, default_seed);
        eprintln!("{name}: seed {seed} (replay with LARCH_SEED={seed})");
        let repo = Repo::open_with(dir, options()).unwrap();
        let tree = repo.empty_tree();
        Store { repo, tree, model: Model::new(), commits: Vec::new(), rng }
    }

    fn commit(&mut self) {
        let n = self.commits.len() as u64;
        let parents: Vec<Hash> = self.commits.last().map(|(hash, _)| *hash).into_iter().collect();
        let commit = self.repo.commit(&self.tree, &parents, info(n)).unwrap();
        self.commits.push((commit, self.model.clone()));
        self.tree = self.repo.checkout(&commit).unwrap();
    }

    /// A first block of `values` values under `cold/` (one commit: one chunk, however large).
    fn setup(&mut self, values: usize) {
        for i in 0..values {
            let path =
                vec![b"cold".to_vec(), format!("k{:02}", i % 37).into_bytes(), format!("v{i}").into_bytes()];
            let value = format!("cold {i} {}", "c".repeat(60 + i % 50)).into_bytes();
            self.tree.add(&path, value.clone()).unwrap();
            self.model.add(&path, value);
        }
        self.commit();
    }

    /// `parts` first blocks of `values` values each, under a directory of their own (`cold<p>/`):
    /// one chunk each, mostly live until something rewrites them.
    fn setup_parts(&mut self, parts: usize, values: usize) {
        for part in 0..parts {
            for i in 0..values {
                let path = cold_path(part, i);
                let value = format!("cold {part} {i} {}", "c".repeat(60 + i % 50)).into_bytes();
                self.tree.add(&path, value.clone()).unwrap();
                self.model.add(&path, value);
            }
            self.commit();
        }
    }

    /// A block rewriting every value of part `part` of [`Store::setup_parts`].
    fn rewrite_part(&mut self, part: usize, values: usize) {
        for i in 0..values {
            let path = cold_path(part, i);
            let value = format!("rewritten {part} {i}").into_bytes();
            self.tree.add(&path, value.clone()).unwrap();
            self.model.add(&path, value);
        }
        self.commit();
    }

    /// Blocks of a few random operations and a churned value (garbage once overwritten);
    /// `rewrite_cold` also overwrites that many of the setup's values per block.
    fn grow(&mut self, blocks: usize, rewrite_cold: usize) {
        for _ in 0..blocks {
            let n = self.commits.len();
            for _ in 0..self.rng.random_range(1..4) {
                random_op(&mut self.rng, &mut self.tree, &mut self.model);
            }
            for j in 0..rewrite_cold {
                let i = (n * rewrite_cold + j) % 400;
                let path = vec![
                    b"cold".to_vec(),
                    format!("k{:02}", i % 37).into_bytes(),
                    format!("v{i}").into_bytes(),
                ];
                let value = format!("rewritten {n} {i}").into_bytes();
                self.tree.add(&path, value.clone()).unwrap();
                self.model.add(&path, value);
            }
            let path = vec![b"churn".to_vec(), format!("c{}", n % 5).into_bytes()];
            let value = format!("block {n} {}", "q".repeat(300 + n % 200)).into_bytes();
            self.tree.add(&path, value.clone()).unwrap();
            self.model.add(&path, value);
            self.commit();
        }
    }
}

fn cold_path(part: usize, i: usize) -> Vec<Vec<u8>> {
    vec![
        format!("cold{part}").into_bytes(),
        format!("k{:02}", i % 37).into_bytes(),
        format!("v{i}").into_bytes(),
    ]
}

/// Every commit from `keep` on reads back as its model, every older one is `Collected`; fsck is
/// clean.
fn check(repo: &Repo, commits: &[(Hash, Model)], keep: usize, what: &str) {
    for (i, (hash, model)) in commits.iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(i >= keep, "{what}: commit {i} should have been collected");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i} reads back as its model");
            }
            Err(StoreError::Collected { commit, .. }) => {
                assert!(i < keep, "{what}: commit {i} was lost");
                assert_eq!(commit, *hash);
            }
            Err(other) => panic!("{what}: commit {i}: {other}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
}

fn chunk_0(dir: &Path) -> bool {
    dir.join("chunk.000000").exists()
}

/// The first chunk's bytes of records (its file less its 32-byte header).
fn chunk_0_records(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("chunk.000000")).unwrap().len() - 32
}

#[test]
fn a_mostly_live_first_chunk_stays_in_place_until_a_compaction_merges_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "a_mostly_live_first_chunk_stays_in_place", 0x6b65_0001);
    store.setup(400);
    let setup_bytes = chunk_0_records(dir.path());
    store.grow(14, 0);
    let report = store.repo.gc(&store.commits[10].0).unwrap();
    assert_eq!(report.kept_in_place, Some(("chunk.000000".to_string(), setup_bytes)), "{report:?}");
    // Only the live records of the other newly old chunks were copied, far less than the setup.
    assert!(report.copied_bytes < setup_bytes / 2, "{report:?}");
    assert!(report.chunks_removed > 0 && chunk_0(dir.path()), "{report:?}");
    let segments = store.repo.segment_files();
    assert_eq!((segments[0].0.as_str(), segments[0].1, segments[0].3), ("chunk.000000", 16, setup_bytes));
    assert_eq!(segments[1].1, 16 + setup_bytes, "the new segment starts where the kept chunk ends");
    check(&store.repo, &store.commits, 10, "after the first GC");
    // A reader in another handle, and the writer reopened (which removes the files its state does
    // not name), see the same store.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    check(&reader, &store.commits, 10, "read-only handle");
    drop(reader);
    let Store { repo, tree, model, commits, rng } = store;
    repo.close().unwrap();
    assert!(chunk_0(dir.path()), "closing and reopening keep it");
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    assert!(chunk_0(dir.path()), "the writer's open keeps it");
    let mut store = Store { repo, tree, model, commits, rng };
    check(&store.repo, &store.commits, 10, "reopened");

    // Later GCs (merging nothing here) leave it in place and read through it.
    store.repo.set_gc_policy(GcPolicy { min_garbage_percent: 101, deep_every: 0, ..GcPolicy::default() });
    let mut keep = 10;
    for round in 0..3 {
        store.grow(8, 3);
        keep = store.commits.len() - 4;
        let report = store.repo.gc(&store.commits[keep].0).unwrap();
        assert_eq!(report.kept_in_place, None, "round {round}: {report:?}");
        assert!(chunk_0(dir.path()), "round {round}");
        check(&store.repo, &store.commits, keep, &format!("round {round}"));
    }
    assert_eq!(store.repo.segment_files()[0].0, "chunk.000000");

    // A compacting GC (its budget large enough for all of them) marks through it and merges it
    // with the segments: then it goes.
    store.repo.set_gc_policy(GcPolicy { compact_budget_percent: 10_000, ..GcPolicy::default() });
    store.grow(6, 3);
    keep = keep.max(store.commits.len() - 4);
    let report = store.repo.gc_with(&store.commits[keep].0, GcOptions { compact: true }).unwrap();
    assert!(report.merged_segments.contains(&"chunk.000000".to_string()), "{report:?}");
    let segments = store.repo.segment_files();
    assert_eq!((segments.len(), segments[0].1), (1, 16), "{segments:?}");
    check(&store.repo, &store.commits, keep, "compacted");
    store.repo.close().unwrap();
    assert!(!chunk_0(dir.path()), "a merged chunk is deleted like a merged segment");
    let repo = Repo::open_read_only(dir.path()).unwrap();
    check(&repo, &store.commits, keep, "compacted, reopened");
}

#[test]
fn a_mostly_dead_first_chunk_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "a_mostly_dead_first_chunk_is_copied", 0x6b65_0002);
    store.setup(400);
    // Every setup value rewritten: the first chunk is mostly garbage by the GC commit.
    store.grow(14, 40);
    let report = store.repo.gc(&store.commits[12].0).unwrap();
    assert_eq!(report.kept_in_place, None, "{report:?}");
    assert!(!chunk_0(dir.path()), "{report:?}");
    check(&store.repo, &store.commits, 12, "after the GC");
    // The same store with the policy's threshold at 0 copies a live first chunk too.
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "a_mostly_dead_first_chunk_is_copied", 0x6b65_0003);
    store.repo.set_gc_policy(GcPolicy { keep_in_place_percent: 0, ..GcPolicy::default() });
    store.setup(400);
    store.grow(14, 0);
    let report = store.repo.gc(&store.commits[10].0).unwrap();
    assert_eq!(report.kept_in_place, None, "{report:?}");
    assert!(!chunk_0(dir.path()) && report.copied_bytes > 0, "{report:?}");
    check(&store.repo, &store.commits, 10, "threshold 0");
}

#[test]
fn a_store_with_a_kept_chunk_is_recovered_without_its_control_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "a_store_with_a_kept_chunk_is_recovered", 0x6b65_0004);
    store.setup(400);
    store.grow(14, 0);
    store.repo.gc(&store.commits[10].0).unwrap();
    store.grow(8, 2);
    store.repo.gc(&store.commits[18].0).unwrap();
    store.grow(4, 2);
    let Store { repo, commits, .. } = store;
    repo.close().unwrap();
    assert!(chunk_0(dir.path()));
    // Bytes past the kept chunk's range, as a crash leaves unpublished ones in a head chunk that
    // a later roll seals: not part of its range, and no obstacle to the rebuild.
    let mut chunk = std::fs::OpenOptions::new().append(true).open(dir.path().join("chunk.000000")).unwrap();
    std::io::Write::write_all(&mut chunk, &[0x5a; 77]).unwrap();
    drop(chunk);
    std::fs::remove_file(dir.path().join("control")).unwrap();
    assert!(matches!(Repo::open_read_only(dir.path()), Err(StoreError::NeedsRecovery { .. })));

    let plan = plan_recovery(dir.path()).unwrap();
    let layout = plan.rebuilt_layout.clone().unwrap();
    assert!(
        layout.contains("chunk.000000 (kept in place)") && layout.contains("GC generation 2"),
        "{layout}"
    );
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
    plan.apply().unwrap();
    let mut repo = Repo::open_with(dir.path(), options()).unwrap();
    assert_eq!(repo.segment_files()[0].0, "chunk.000000");
    check(&repo, &commits, 18, "recovered");
    // A later GC works on the recovered store.
    let report = repo.gc(&commits[commits.len() - 2].0).unwrap();
    assert_eq!(report.generation, 3);
    check(&repo, &commits, commits.len() - 2, "recovered, collected again");
}

/// The chunk files' bytes of records, for chunks `seqs`.
fn records_of(dir: &Path, seqs: std::ops::Range<u32>) -> u64 {
    seqs.map(|seq| std::fs::metadata(dir.join(format!("chunk.{seq:06}"))).unwrap().len() - 32).sum()
}

fn chunks_present(dir: &Path, seqs: std::ops::Range<u32>) -> Vec<bool> {
    seqs.map(|seq| dir.join(format!("chunk.{seq:06}")).exists()).collect()
}

/// The first GC keeps a run of mostly live first chunks in place under one entry of the control
/// slot, read through the bounded pool of open files; readers, a reopened writer and recovery
/// without the control file see them; a compaction merges them all, and they go.
#[test]
fn mostly_live_first_chunks_stay_in_place_under_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "mostly_live_first_chunks_stay_in_place", 0x6b65_0005);
    store.setup_parts(4, 300);
    let setup_bytes = records_of(dir.path(), 0..4);
    store.grow(14, 0);
    let keep = 4 + 10;
    let report = store.repo.gc(&store.commits[keep].0).unwrap();
    let expected = ("chunk.000000 to chunk.000003 (4 chunks)".to_string(), setup_bytes);
    assert_eq!(report.kept_in_place, Some(expected), "{report:?}");
    assert!(report.copied_bytes < setup_bytes / 4, "{report:?}");
    assert_eq!(chunks_present(dir.path(), 0..5), [true, true, true, true, false], "{report:?}");
    let segments = store.repo.segment_files();
    let names: Vec<&str> = segments.iter().map(|segment| segment.0.as_str()).collect();
    assert_eq!(names[..4], ["chunk.000000", "chunk.000001", "chunk.000002", "chunk.000003"]);
    assert_eq!(segments[0].1, 16);
    for pair in segments.windows(2) {
        assert_eq!(pair[0].2, pair[1].1, "the ranges join: {segments:?}");
    }
    check(&store.repo, &store.commits, keep, "after the first GC");
    // A reader with a pool of 2 open files reads through all of them, never holding more.
    let small = RepoOptions { open_files: 2, ..options() };
    let reader = Repo::open_read_only_options(dir.path(), small.clone()).unwrap();
    check(&reader, &store.commits, keep, "read-only handle, 2 open files");
    let stats = reader.stats();
    assert!(stats.chunk_files_open <= 2, "{stats:?}");
    drop(reader);
    let Store { repo, tree, model, commits, rng } = store;
    repo.close().unwrap();
    let repo = Repo::open_with(dir.path(), small).unwrap();
    assert_eq!(chunks_present(dir.path(), 0..4), [true; 4], "the writer's open keeps them");
    let mut store = Store { repo, tree, model, commits, rng };
    check(&store.repo, &store.commits, keep, "reopened");
    store.repo.close().unwrap();

    // Without its control file, the store is rebuilt with the four under one entry.
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "control" {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    let plan = plan_recovery(copy.path()).unwrap();
    let layout = plan.rebuilt_layout.clone().unwrap();
    assert!(layout.contains("chunk.000000 to chunk.000003 (4 chunks) (kept in place)"), "{layout}");
    plan.apply().unwrap();
    let recovered = Repo::open_with(copy.path(), options()).unwrap();
    check(&recovered, &store.commits, keep, "recovered");
    drop(recovered);

    // A compacting GC merges them with the segments: then they go.
    store.repo = Repo::open_with(dir.path(), options()).unwrap();
    store.repo.set_gc_policy(GcPolicy { compact_budget_percent: 10_000, ..GcPolicy::default() });
    store.grow(6, 0);
    let keep = store.commits.len() - 4;
    let report = store.repo.gc_with(&store.commits[keep].0, GcOptions { compact: true }).unwrap();
    let merged = "chunk.000000 to chunk.000003 (4 chunks)".to_string();
    assert!(report.merged_segments.contains(&merged), "{report:?}");
    check(&store.repo, &store.commits, keep, "compacted");
    store.repo.close().unwrap();
    assert_eq!(chunks_present(dir.path(), 0..4), [false; 4], "merged chunks are deleted");
    check(&Repo::open_read_only(dir.path()).unwrap(), &store.commits, keep, "compacted, reopened");
}

/// The run of chunks kept in place stops at the first one mostly dead: it and those after it are
/// copied.
#[test]
fn the_chunks_kept_in_place_stop_at_the_first_mostly_dead_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::new(dir.path(), "the_chunks_kept_in_place_stop", 0x6b65_0006);
    store.setup_parts(4, 300);
    let kept_bytes = records_of(dir.path(), 0..2);
    store.rewrite_part(2, 300);
    store.grow(14, 0);
    let keep = store.commits.len() - 2;
    let report = store.repo.gc(&store.commits[keep].0).unwrap();
    let expected = ("chunk.000000 to chunk.000001 (2 chunks)".to_string(), kept_bytes);
    assert_eq!(report.kept_in_place, Some(expected), "{report:?}");
    assert_eq!(chunks_present(dir.path(), 0..4), [true, true, false, false], "{report:?}");
    check(&store.repo, &store.commits, keep, "after the GC");
}
