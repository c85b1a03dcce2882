//! Root summaries kept from one GC to the next (docs/gc-design.md §4, *Roots*;
//! `GcPolicy::root_span_bytes`): two stores written alike by the same seeded workload, one whose
//! GCs take most of their roots from the summaries of earlier GCs (spans of 2 KiB, so that a
//! small store has many), one whose GCs read their whole window every time (`root_span_bytes: 0`).
//! Every GC of the sequence must find exactly the same live records in both (same records and
//! bytes copied, same base-only records), the summarised one must actually have used summaries,
//! and every kept commit must read back equal to its model, fsck clean, after each GC and after
//! reopening.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info, random_op};
use larch_core::{Hash, Tree};
use larch_store::INLINE_MAX;
use larch_store::{GcPolicy, GcReport, Repo, RepoOptions};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::{Rng, SeedableRng};
use std::path::Path;

/// One store of the pair: its writer, head tree and model, and every commit with its model.
struct Store {
    repo: Repo,
    tree: Tree,
    model: Model,
    commits: Vec<(Hash, Model)>,
    /// The oldest commit the last GC kept.
    oldest_kept: usize,
}

impl Store {
    fn open(dir: &Path, span_bytes: u64) -> Store {
        let options = RepoOptions { chunk_bytes: 8 << 10, ..RepoOptions::default() };
        let mut repo = Repo::open_with(dir, options).unwrap();
        repo.set_gc_policy(GcPolicy { root_span_bytes: span_bytes, ..GcPolicy::default() });
        let tree = repo.empty_tree();
        Store { repo, tree, model: Model::new(), commits: Vec::new(), oldest_kept: 0 }
    }

    /// One block (now and then on an older commit's tree): random operations (drawn from `rng`, the same sequence for both stores), a few
    /// rewrites of hot directories (patches and chains) and a churned long value (garbage later).
    fn block(&mut self, rng: &mut TestRng) {
        let n = self.commits.len() as u64;
        if n >= 40 && n % 4 == 1 {
            // Back to an older commit still kept (often older than the next GC's): the patches
            // written from here on have bases in a tree the next GC commit may not reach, whose
            // other children only the window's patches (decoded) make live.
            let back = rng.random_range(self.oldest_kept..self.commits.len());
            let (commit, model) = self.commits[back].clone();
            self.tree = self.repo.checkout(&commit).unwrap();
            self.model = model;
        }
        for _ in 0..rng.random_range(1..6) {
            random_op(rng, &mut self.tree, &mut self.model);
        }
        for dir in 0..rng.random_range(1..4u32) {
            let key = format!("k{:02}", rng.random_range(0..(12 + 10 * dir)));
            let path = vec![b"hot".to_vec(), format!("d{dir}").into_bytes(), key.into_bytes()];
            let value = format!("v{}-{}", rng.random::<u32>(), "x".repeat(rng.random_range(0..60)));
            self.tree.add(&path, value.clone().into_bytes()).unwrap();
            self.model.add(&path, value.into_bytes());
        }
        let path = vec![b"churn".to_vec(), format!("c{}", n % 7).into_bytes()];
        let value = format!("block {n} {}", "q".repeat(200 + (n as usize % 300))).into_bytes();
        self.tree.add(&path, value.clone()).unwrap();
        self.model.add(&path, value);
        let parents: Vec<Hash> = self.commits.last().map(|(hash, _)| *hash).into_iter().collect();
        let commit = self.repo.commit(&self.tree, &parents, info(n)).unwrap();
        self.commits.push((commit, self.model.clone()));
    }

    /// Every commit from `from` on reads back equal to its model.
    fn check_kept(&self, from: usize, what: &str) {
        for (i, (commit, model)) in self.commits.iter().enumerate().skip(from) {
            let tree = self.repo.checkout(commit).unwrap_or_else(|e| panic!("{what}: commit {i}: {e}"));
            assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
        }
    }
}

/// The parts of a report that depend only on the live set.
fn live_part(report: &GcReport) -> (u64, u64, u64, u64) {
    (report.live_records, report.copied_bytes, report.base_only_records, report.window_bytes)
}

#[test]
fn gcs_taking_roots_from_summaries_find_the_same_live_records_as_full_scans() {
    let (mut rng, seed) = seeded_rng("gc_root_spans", 10);
    let summarised_dir = tempfile::tempdir().unwrap();
    let scanned_dir = tempfile::tempdir().unwrap();
    let mut summarised = Store::open(summarised_dir.path(), 2 << 10);
    let mut scanned = Store::open(scanned_dir.path(), 0);
    let mut used_summaries = 0;
    for round in 0..8 {
        for _ in 0..if round == 0 { 45 } else { 20 } {
            let state = rng.random::<u64>();
            summarised.block(&mut TestRng::seed_from_u64(state));
            scanned.block(&mut TestRng::seed_from_u64(state));
        }
        // Keep the last 30 commits (the window spans about 30 blocks of records).
        let keep = summarised.commits.len() - 30;
        let target = summarised.commits[keep].0;
        assert_eq!(target, scanned.commits[keep].0, "the two stores were written alike");
        let with_summaries = summarised.repo.gc(&target).unwrap();
        let full_scan = scanned.repo.gc(&target).unwrap();
        assert_eq!(
            live_part(&with_summaries),
            live_part(&full_scan),
            "seed {seed}, round {round}: the same live records (records, bytes, base-only, window)"
        );
        assert_eq!(full_scan.window_summarised_bytes, 0, "round {round}: no summaries kept");
        if with_summaries.window_summarised_bytes > 0 {
            used_summaries += 1;
            assert!(with_summaries.window_summarised_bytes < with_summaries.window_bytes);
        }
        summarised.oldest_kept = keep;
        scanned.oldest_kept = keep;
        for store in [&summarised, &scanned] {
            store.check_kept(keep, &format!("round {round}"));
            let report = store.repo.fsck();
            assert!(report.is_clean(), "round {round}: {report:?}");
        }
    }
    // Every GC after the first finds most of its window summarised by the ones before it.
    assert!(used_summaries >= 6, "summaries used by {used_summaries} GCs of 8");
    let kept_from = summarised.commits.len() - 30;
    drop(summarised.repo);
    let reopened = Repo::open(summarised_dir.path()).unwrap();
    for (i, (commit, model)) in summarised.commits.iter().enumerate().skip(kept_from) {
        assert_eq!(contents_of(&reopened.checkout(commit).unwrap()), model.values, "reopened: commit {i}");
    }
}

/// Writes the same history into `repo`: `x` gets 40 long values at block 5 (commit `A`), main
/// rewrites every one of them in each later block (`A`'s values die on main), block 12 also
/// commits a branch `C` off `A` that changes one entry of `x` (a patch on `A`'s `x`, whose other
/// children only that patch reaches), and main goes on to block `blocks`. Returns the main commits
/// and `C` with its contents.
fn history_with_a_late_branch(repo: &mut Repo, blocks: u64) -> (Vec<Hash>, (Hash, Model)) {
    let mut tree = repo.empty_tree();
    let mut main: Vec<Hash> = Vec::new();
    let mut models: Vec<Model> = Vec::new();
    let mut model = Model::new();
    let mut branch = None;
    let value = |n: u64, i: u32| format!("block {n} value {i} {}", "z".repeat(INLINE_MAX)).into_bytes();
    for n in 0..blocks {
        let path = vec![b"filler".to_vec(), format!("f{n}").into_bytes()];
        let filler = format!("filler {n} {}", "f".repeat(300)).into_bytes();
        tree.add(&path, filler.clone()).unwrap();
        model.add(&path, filler);
        if n >= 5 {
            for i in 0..40 {
                let path = vec![b"x".to_vec(), format!("e{i:02}").into_bytes()];
                tree.add(&path, value(n, i)).unwrap();
                model.add(&path, value(n, i));
            }
        }
        let parents: Vec<Hash> = main.last().copied().into_iter().collect();
        main.push(repo.commit(&tree, &parents, info(n)).unwrap());
        models.push(model.clone());
        if n == 12 {
            let mut side = repo.checkout(&main[5]).unwrap();
            let mut side_model = models[5].clone();
            let path = vec![b"x".to_vec(), b"e07".to_vec()];
            side.add(&path, b"changed on the branch".to_vec()).unwrap();
            side_model.add(&path, b"changed on the branch".to_vec());
            let commit = repo.commit_on(Some("late"), &side, &[main[5]], info(1_000)).unwrap();
            branch = Some((commit, side_model));
        }
    }
    (main, branch.unwrap())
}

/// The summaries carry the window's patches whose base lies below a later GC's commit: a GC that
/// takes the roots of the span holding `C` from the summary must still decode `C`'s patch and keep
/// `A`'s values that only it reaches, exactly as a GC reading that span does.
#[test]
fn a_summarised_patch_on_an_old_base_keeps_what_only_it_reaches() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut reports = Vec::new();
    for (dir, span_bytes) in dirs.iter().zip([2 << 10, 0]) {
        let mut repo =
            Repo::open_with(dir.path(), RepoOptions { chunk_bytes: 8 << 10, ..RepoOptions::default() })
                .unwrap();
        repo.set_gc_policy(GcPolicy { root_span_bytes: span_bytes, ..GcPolicy::default() });
        let (main, (late, late_model)) = history_with_a_late_branch(&mut repo, 40);
        // The first GC (before A) reads the whole window and summarises it; the second (after A,
        // before C) takes C's span from the summary when there is one.
        let first = repo.gc(&main[4]).unwrap();
        let second = repo.gc(&main[8]).unwrap();
        assert_eq!(contents_of(&repo.checkout(&late).unwrap()), late_model.values, "span bytes {span_bytes}");
        assert!(repo.fsck().is_clean(), "span bytes {span_bytes}");
        reports.push((live_part(&first), live_part(&second), second.window_summarised_bytes));
    }
    let (summarised, scanned) = (&reports[0], &reports[1]);
    assert!(summarised.2 > 0, "the second GC used summaries");
    assert_eq!(scanned.2, 0);
    assert_eq!((summarised.0, summarised.1), (scanned.0, scanned.1), "the same live records");
}
