//! Segment compaction (issue 10, docs/gc-design.md §6): after GCs that never merge their segments
//! while random commits rewrite old keys (records in old segments die), a compacting GC
//! (`GcOptions::compact`) marks through every segment and merges them: the one segment left holds
//! exactly the records an independent brute force finds reachable from the kept commits (a
//! checkout and full walk of each through the public API, plus the patch bases of what it
//! reaches, read from the segment file's bytes with a parser written here). Kept commits read
//! back as their models, collected ones give `Collected`, fsck is clean. Also: the default policy
//! merges a garbage-holding segment once a deep mark is due, and a GC on a store whose segment
//! list is full merges at least the newest one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info, leb, random_op, reached_offsets};
use larch_core::{Hash, Tree};
use larch_store::testing::segment::Segment;
use larch_store::testing::storage::FileStorage;
use larch_store::{GcOptions, GcPolicy, Repo, RepoOptions, StoreError};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: 8 << 10, ..RepoOptions::default() }
}

/// A policy under which GCs never merge segments (unless the list is full) nor mark deeply.
fn never_merge() -> GcPolicy {
    GcPolicy {
        min_garbage_percent: 101,
        deep_growth_percent: 1_000_000,
        deep_every: 0,
        compact_budget_percent: 10_000,
        // The merge rules alone: the first chunk is copied like any other (tests/gc_keep_in_place.rs).
        keep_in_place_percent: 0,
        ..GcPolicy::default()
    }
}

struct Built {
    repo: Repo,
    tree: Tree,
    model: Model,
    main: Vec<(Hash, Model)>,
}

impl Built {
    fn new(dir: &Path) -> Built {
        let repo = Repo::open_with(dir, options()).unwrap();
        let tree = repo.empty_tree();
        Built { repo, tree, model: Model::new(), main: Vec::new() }
    }

    /// Commits `blocks` blocks of random operations (adds, removals, copies, bursts into large
    /// directories) over a bounded key space: old keys are rewritten, old records die.
    fn grow(&mut self, rng: &mut TestRng, blocks: usize) {
        for _ in 0..blocks {
            for _ in 0..rng.random_range(2..10) {
                random_op(rng, &mut self.tree, &mut self.model);
            }
            let n = self.main.len() as u64;
            let parents: Vec<Hash> = self.main.last().map(|(hash, _)| *hash).into_iter().collect();
            let commit = self.repo.commit(&self.tree, &parents, info(n)).unwrap();
            self.main.push((commit, self.model.clone()));
            self.tree = self.repo.checkout(&commit).unwrap();
        }
    }

    /// Every main commit from `keep` on reads back as its model, every one before is `Collected`;
    /// fsck is clean.
    fn check(&self, keep: usize, seed: u64, what: &str) {
        for (i, (hash, model)) in self.main.iter().enumerate() {
            match self.repo.checkout(hash) {
                Ok(tree) => {
                    assert!(i >= keep, "seed {seed} {what}: commit {i} survived the GC of {keep}");
                    assert_eq!(contents_of(&tree), model.values, "seed {seed} {what}: commit {i}");
                }
                Err(StoreError::Collected { .. }) => {
                    assert!(i < keep, "seed {seed} {what}: commit {i} was collected (keep {keep})")
                }
                Err(e) => panic!("seed {seed} {what}: commit {i}: {e}"),
            }
        }
        let report = self.repo.fsck();
        assert!(report.is_clean(), "seed {seed} {what}: {report}");
    }
}

/// Parses the record at `at` of `bytes` (global offset `global`): its length with framing and its
/// base if a patch (kinds 6 and 7 start their body with the base pointer: a 32-byte hash and
/// `back`).
fn parse_record(bytes: &[u8], at: usize, global: u64) -> (u64, Option<u64>) {
    let kind = bytes[at];
    let (body_len, len_len) = leb(bytes, at + 1);
    let total = 1 + len_len as u64 + body_len + 4;
    let base = matches!(kind, 6 | 7).then(|| {
        let (back, _) = leb(bytes, at + 1 + len_len + 32);
        global - back
    });
    (total, base)
}

/// The records of the chunk files (each a 32-byte header: magic, version, reserved, seq, start;
/// then the records of [start, next start)), up to `end`: global offset → (length, base).
fn chunk_records(dir: &Path, end: u64) -> BTreeMap<u64, (u64, Option<u64>)> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("chunk."))
        .collect();
    names.sort();
    let mut image = Vec::new();
    let mut first = None;
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        let start = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
        let first = *first.get_or_insert(start);
        assert_eq!(start, first + image.len() as u64, "{name} continues the previous chunk");
        image.extend_from_slice(&bytes[32..]);
    }
    let first = first.unwrap();
    let mut records = BTreeMap::new();
    let mut global = first;
    while global < end {
        let record = parse_record(&image, (global - first) as usize, global);
        records.insert(global, record);
        global += record.0;
    }
    records
}

/// The records of a segment file: global offset → (length with framing, base if a patch: kinds
/// 6 and 7 start their body with the base pointer, a 32-byte hash and `back`). Parsed from the
/// file's bytes along the runs its mapping names.
fn segment_records(path: &Path) -> BTreeMap<u64, (u64, Option<u64>)> {
    let segment = Segment::open(Arc::new(FileStorage::open(path, false, false).unwrap())).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let mut records = BTreeMap::new();
    for (global, position, len) in segment.runs() {
        let mut at = 0u64;
        while at < len {
            let record = parse_record(&bytes, (position + at) as usize, global + at);
            records.insert(global + at, record);
            at += record.0;
        }
        assert_eq!(at, len, "a run of whole records");
    }
    records
}

/// The brute-force live set below `region_end`: every record reached from a commit the store
/// still holds, and the bases of reached patches (transitively), with their lengths, from
/// `records` (every record of the store).
fn brute_force(
    repo: &Repo,
    records: &BTreeMap<u64, (u64, Option<u64>)>,
    region_end: u64,
) -> BTreeMap<u64, u64> {
    let kept: Vec<Hash> = repo.commits();
    let mut reached = BTreeSet::new();
    for commit in &kept {
        reached_offsets(&repo.checkout(commit).unwrap(), &mut reached);
    }
    let mut live = BTreeSet::new();
    for &offset in &reached {
        let mut at = offset;
        while live.insert(at) {
            let (_, base) = records.get(&at).unwrap_or_else(|| panic!("the record at {at} is missing"));
            match base {
                Some(base) => at = *base,
                None => break,
            }
        }
    }
    live.into_iter()
        .filter(|offset| *offset < region_end)
        .map(|offset| (offset, records[&offset].0))
        .collect()
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("seg."))
        .collect();
    names.sort();
    names
}

#[test]
fn a_compacting_gc_leaves_exactly_the_live_records_in_the_segments() {
    let (mut rng, seed) =
        seeded_rng("a_compacting_gc_leaves_exactly_the_live_records_in_the_segments", 0x636f_6d70);
    for store in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let mut built = Built::new(dir.path());
        built.repo.set_gc_policy(never_merge());
        built.grow(&mut rng, 30);
        // GCs that keep every segment: the records that die later stay in them.
        let rounds = rng.random_range(3..6);
        let mut keep = 0;
        for round in 0..rounds {
            let blocks = rng.random_range(8..16);
            built.grow(&mut rng, blocks);
            keep = built.main.len() - 6;
            let report = built.repo.gc(&built.main[keep].0).unwrap();
            assert!(report.merged_segments.is_empty(), "seed {seed} store {store} round {round}: {report:?}");
            assert!(!report.deep_mark, "seed {seed}: {report:?}");
            assert_eq!(segment_names(dir.path()).len(), round + 1, "seed {seed} store {store} round {round}");
            built.check(keep, seed, &format!("store {store} round {round}"));
        }
        built.grow(&mut rng, 10);
        let before: u64 = built.repo.segment_files().iter().map(|(_, _, _, bytes)| bytes).sum();
        let old_segments = segment_names(dir.path());
        keep = keep.max(built.main.len() - 6);
        let report = built.repo.gc_with(&built.main[keep].0, GcOptions { compact: true }).unwrap();
        assert!(report.deep_mark, "seed {seed} store {store}: {report:?}");
        assert_eq!(report.segments_marked, old_segments.len(), "seed {seed}: {report:?}");
        assert_eq!(report.merged_segments, old_segments, "seed {seed} store {store}: {report:?}");
        assert!(report.segments_garbage > 0, "seed {seed} store {store}: no record died in the old segments");
        built.check(keep, seed, &format!("store {store} compacted"));
        // One segment is left; it holds exactly the brute-force live records of its range.
        let segments = built.repo.segment_files();
        assert_eq!(segments.len(), 1, "seed {seed} store {store}: {segments:?}");
        let (name, range_start, range_end, bytes) = segments[0].clone();
        assert_eq!((name.clone(), range_start), (report.segment.clone().unwrap(), 16));
        assert_eq!(segment_names(dir.path()), vec![name.clone()], "seed {seed}: merged files are deleted");
        let records = segment_records(&dir.path().join(&name));
        let stored: BTreeMap<u64, u64> = records.iter().map(|(offset, (len, _))| (*offset, *len)).collect();
        let mut all = chunk_records(dir.path(), built.repo.stats().pack_bytes);
        all.extend(records);
        let live = brute_force(&built.repo, &all, range_end);
        assert_eq!(stored, live, "seed {seed} store {store}: the segment's records against the brute force");
        assert_eq!(bytes, live.values().sum::<u64>(), "seed {seed} store {store}");
        // Everything merged: the old segments' live bytes plus the new region's were copied.
        assert_eq!(bytes, report.copied_bytes, "seed {seed} store {store}");
        assert!(report.segments_garbage <= before, "seed {seed} store {store}");
        // Reopened and read by another handle, the store is the same.
        let Built { repo, .. } = built;
        repo.close().unwrap();
        let repo = Repo::open_with(dir.path(), options()).unwrap();
        built = Built { repo, ..built };
        built.check(keep, seed, &format!("store {store} reopened"));
        let reader = Repo::open_read_only(dir.path()).unwrap();
        assert!(reader.fsck().is_clean());
        // A later ordinary GC still works.
        built.repo.set_gc_policy(never_merge());
        built.grow(&mut rng, 10);
        keep = built.main.len() - 4;
        built.repo.gc(&built.main[keep].0).unwrap();
        built.check(keep, seed, &format!("store {store} after a later GC"));
    }
}

#[test]
fn the_default_policy_compacts_once_a_deep_mark_is_due() {
    let (mut rng, seed) = seeded_rng("the_default_policy_compacts_once_a_deep_mark_is_due", 0x636f_6d71);
    let dir = tempfile::tempdir().unwrap();
    let mut built = Built::new(dir.path());
    built.repo.set_gc_policy(GcPolicy { copy_budget_percent: 100, ..GcPolicy::default() });
    built.grow(&mut rng, 30);
    let (mut deep, mut merged_deep) = (0, 0);
    for round in 0..9 {
        built.grow(&mut rng, 12);
        let keep = built.main.len() - 6;
        // Segment files, and the first chunk when the first GC kept it in place.
        let segments_before = built.repo.segment_files().len();
        let report = built.repo.gc(&built.main[keep].0).unwrap();
        // Generation 8 marks deeply (`deep_every`); the growth rule may too.
        if report.generation == 8 {
            assert!(report.deep_mark, "seed {seed} round {round}: {report:?}");
        }
        if report.deep_mark {
            deep += 1;
            assert_eq!(report.segments_marked, segments_before, "seed {seed} round {round}: {report:?}");
            merged_deep += usize::from(!report.merged_segments.is_empty());
        }
        assert!(segment_names(dir.path()).len() <= 8, "seed {seed} round {round}");
        built.check(keep, seed, &format!("round {round}"));
    }
    assert!(deep > 0 && merged_deep > 0, "seed {seed}: {deep} deep marks, {merged_deep} merged");
}

#[test]
fn a_full_segment_list_merges_at_least_the_newest_segment() {
    let (mut rng, seed) = seeded_rng("a_full_segment_list_merges_at_least_the_newest_segment", 0x636f_6d72);
    let dir = tempfile::tempdir().unwrap();
    let mut built = Built::new(dir.path());
    built.repo.set_gc_policy(never_merge());
    built.grow(&mut rng, 20);
    for round in 0..10 {
        built.grow(&mut rng, 8);
        let keep = built.main.len() - 4;
        let before = segment_names(dir.path());
        let report = built.repo.gc(&built.main[keep].0).unwrap();
        let after = segment_names(dir.path());
        assert!(after.len() <= 8, "seed {seed} round {round}: {after:?}");
        if before.len() == 8 {
            assert_eq!(report.merged_segments, vec![before[7].clone()], "seed {seed} round {round}");
            assert_eq!(after.len(), 8, "seed {seed} round {round}");
        } else {
            assert!(report.merged_segments.is_empty(), "seed {seed} round {round}: {report:?}");
        }
        built.check(keep, seed, &format!("round {round}"));
    }
}
