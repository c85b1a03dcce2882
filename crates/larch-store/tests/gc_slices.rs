//! Sliced garbage collection (issue 10, docs/gc-design.md §6): a GC whose newly old chunks hold
//! more live bytes than its slice budget copies them a few chunks at a time, each slice switched
//! and its chunks deleted before the next. Checked here: a sliced GC keeps exactly what the same
//! GC unsliced keeps (same segment record bytes, same commits readable), takes several slices
//! whose chunks go one slice at a time, keeps working with commits between the slices, and a
//! store closed between two slices reopens after the GC (collected commits `Collected`, fsck
//! clean), a later GC collecting the rest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info, random_op};
use larch_core::{Hash, Tree};
use larch_store::{GcPolicy, GcReport, Repo, RepoOptions, StoreError};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::path::Path;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: 4 << 10, ..RepoOptions::default() }
}

/// Slices of at most `bytes` of copy (at least one chunk each); no merging, no deep marks.
fn sliced(bytes: u64) -> GcPolicy {
    GcPolicy {
        slice_percent: 1,
        slice_min_bytes: bytes,
        min_garbage_percent: 101,
        deep_growth_percent: 1_000_000,
        deep_every: 0,
        ..GcPolicy::default()
    }
}

fn unsliced() -> GcPolicy {
    GcPolicy { slice_percent: 0, ..sliced(0) }
}

/// A store of `blocks` random blocks on `main`: the commits with their models.
fn build(dir: &Path, rng: &mut TestRng, blocks: usize) -> (Repo, Vec<(Hash, Model)>) {
    let mut repo = Repo::open_with(dir, options()).unwrap();
    let mut tree: Tree = repo.empty_tree();
    let mut model = Model::new();
    let mut main: Vec<(Hash, Model)> = Vec::new();
    for n in 0..blocks {
        for _ in 0..rng.random_range(4..16) {
            random_op(rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = main.last().map(|(hash, _)| *hash).into_iter().collect();
        let commit = repo.commit(&tree, &parents, info(n as u64)).unwrap();
        main.push((commit, model.clone()));
        tree = repo.checkout(&commit).unwrap();
    }
    (repo, main)
}

/// Kept commits read back as their models, older ones are `Collected`, fsck is clean.
fn check(repo: &Repo, main: &[(Hash, Model)], keep: usize, what: &str) {
    for (i, (hash, model)) in main.iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(i >= keep, "{what}: commit {i} survived the GC of {keep}");
                assert_eq!(contents_of(&tree), model.values, "{what}: commit {i}");
            }
            Err(StoreError::Collected { .. }) => {
                assert!(i < keep, "{what}: commit {i} collected (keep {keep})")
            }
            Err(e) => panic!("{what}: commit {i}: {e}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{what}: {report}");
}

fn segment_record_bytes(repo: &Repo) -> u64 {
    repo.segment_files().iter().map(|(_, _, _, bytes)| bytes).sum()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_sliced_gc_keeps_what_the_unsliced_one_keeps() {
    let (mut rng, seed) = seeded_rng("a_sliced_gc_keeps_what_the_unsliced_one_keeps", 71);
    let dir = tempfile::tempdir().unwrap();
    let (repo, main) = build(&dir.path().join("a"), &mut rng, 60);
    drop(repo);
    copy_dir(&dir.path().join("a"), &dir.path().join("b"));
    let keep = 40;
    let mut results = Vec::new();
    // The unsliced GC first: its copy, in quarters, is the sliced one's budget.
    let mut quarter = 0;
    for name in ["b", "a"] {
        let policy = if name == "a" { sliced(quarter) } else { unsliced() };
        let mut repo = Repo::open_with(dir.path().join(name), options()).unwrap();
        repo.set_gc_policy(policy);
        let chunks_before = repo.chunk_files().len();
        let report: GcReport = repo.gc(&main[keep].0).unwrap();
        assert!(report.complete, "seed {seed} {name}: {report:?}");
        check(&repo, &main, keep, &format!("seed {seed} {name}"));
        // Every chunk wholly below the GC commit's chunk is gone.
        let chunks = repo.chunk_files();
        assert!(chunks.len() < chunks_before, "seed {seed} {name}: no chunk removed");
        quarter = report.copied_bytes / 4;
        results.push((
            report,
            segment_record_bytes(&repo),
            repo.segment_files().len(),
            chunks.first().cloned(),
        ));
    }
    let (sliced_report, sliced_bytes, sliced_segments, sliced_first) = &results[1];
    let (unsliced_report, unsliced_bytes, unsliced_segments, unsliced_first) = &results[0];
    assert!(sliced_report.slice >= 2, "seed {seed}: {} slices only", sliced_report.slice + 1);
    assert_eq!(unsliced_report.slice, 0, "seed {seed}");
    assert_eq!(*unsliced_segments, 1, "seed {seed}");
    assert!(*sliced_segments > 1, "seed {seed}: one segment per slice (merges when the list fills)");
    assert_eq!(sliced_bytes, unsliced_bytes, "seed {seed}: the same live records kept");
    assert_eq!(sliced_report.copied_bytes, unsliced_report.copied_bytes, "seed {seed}");
    assert_eq!(sliced_first.as_ref().map(|c| c.1), unsliced_first.as_ref().map(|c| c.1), "seed {seed}");
}

#[test]
fn slices_switch_between_commits_and_survive_a_reopen() {
    let (mut rng, seed) = seeded_rng("slices_switch_between_commits_and_survive_a_reopen", 72);
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut main) = build(dir.path(), &mut rng, 60);
    // About a tenth of the store per slice (its live part is smaller: several slices).
    repo.set_gc_policy(sliced(repo.disk_bytes().unwrap() / 40));
    let keep = 45;
    repo.gc_start(&main[keep].0).unwrap();
    // Commits go on while the slices run; each finished slice starts the next at once.
    let mut reports: Vec<GcReport> = Vec::new();
    let mut tree = repo.checkout(&main.last().unwrap().0).unwrap();
    let mut model = main.last().unwrap().1.clone();
    let mut chunk_counts = Vec::new();
    while reports.len() < 2 {
        for _ in 0..rng.random_range(1..6) {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents = vec![main.last().unwrap().0];
        let commit = repo.commit(&tree, &parents, info(main.len() as u64)).unwrap();
        main.push((commit, model.clone()));
        tree = repo.checkout(&commit).unwrap();
        if let Some(report) = repo.gc_finish().unwrap() {
            assert_eq!(report.slice as usize, reports.len(), "seed {seed}");
            reports.push(report);
            chunk_counts.push(repo.chunk_files().first().map(|c| c.1));
        }
        assert!(main.len() < 400, "seed {seed}: the slices never finished");
    }
    assert!(!reports[0].complete, "seed {seed}: the first slice was the whole GC");
    assert!(chunk_counts[1] > chunk_counts[0], "seed {seed}: the second slice removed no chunk");
    // Closed between two slices (the second switched, more due): after the GC, nothing lost.
    let running = repo.gc_running();
    drop(repo);
    let mut repo = Repo::open_with(dir.path(), options()).unwrap();
    assert!(!repo.gc_running());
    check(&repo, &main, keep, &format!("seed {seed} reopened (a slice was running: {running})"));
    // A GC of the same commit collects the rest.
    let first_before = repo.chunk_files().first().map(|c| c.1);
    repo.set_gc_policy(unsliced());
    let report = repo.gc(&main[keep].0).unwrap();
    assert!(report.complete && report.region_bytes > 0, "seed {seed}: {report:?}");
    assert!(repo.chunk_files().first().map(|c| c.1) > first_before, "seed {seed}");
    check(&repo, &main, keep, &format!("seed {seed} after the rest"));
}

/// Commits written between two slices (the first switched inside a commit's publish, the next
/// not started yet) are late roots of the next slice, which takes over the first one's mark: a
/// commit there of an older tree, pointing to records that mark found dead, makes the next slice
/// mark anew, and nothing that commit needs is collected.
#[test]
fn a_commit_between_slices_keeps_the_dead_records_it_points_to() {
    let (mut rng, seed) = seeded_rng("a_commit_between_slices_keeps_the_dead_records_it_points_to", 74);
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut main) = build(dir.path(), &mut rng, 60);
    repo.set_gc_policy(sliced(1));
    let keep = 45;
    // Trees of commits the GC collects, just below its commit: their records lie in the region's
    // last chunks, which the first slice leaves in place.
    let mut olds: Vec<(Tree, Model)> =
        (keep - 4..keep).rev().map(|i| (repo.checkout(&main[i].0).unwrap(), main[i].1.clone())).collect();
    repo.gc_start(&main[keep].0).unwrap();
    while repo.gc_progress().map(|progress| progress.phase) != Some(larch_store::GcPhase::WaitingForSwitch) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // A commit of the head's tree switches the first slice.
    let (head, head_model) = main.last().unwrap().clone();
    let tree = repo.checkout(&head).unwrap();
    let commit = repo.commit(&tree, &[head], info(1000)).unwrap();
    main.push((commit, head_model));
    assert!(!repo.gc_running(), "seed {seed}: the commit switched the first slice");
    // Between the slices: an older tree, changed a little, committed on its own (refused when it
    // points into the chunks the first slice already collected: then the next older one).
    let mut gap = None;
    for (old, model) in olds.iter_mut() {
        random_op(&mut rng, old, model);
        match repo.commit(old, &[], info(1001)) {
            Ok(commit) => {
                gap = Some((commit, model.clone()));
                break;
            }
            Err(StoreError::CollectedObject { .. }) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    let (gap, gap_model) = gap.expect("a tree whose records the first slice left in place");
    let mut reports: Vec<GcReport> = Vec::new();
    while !reports.last().is_some_and(|report| report.complete) {
        if let Some(report) = repo.gc_finish().unwrap() {
            reports.push(report);
        }
        assert!(reports.len() < 100, "seed {seed}: the slices never end");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let tree = repo.checkout(&gap).unwrap_or_else(|e| panic!("seed {seed}: the commit between slices: {e}"));
    assert_eq!(contents_of(&tree), gap_model.values, "seed {seed}");
    check(&repo, &main, keep, &format!("seed {seed}"));
    let marks: Vec<u32> = reports.iter().map(|report| report.marks).collect();
    assert!(reports.len() >= 2, "seed {seed}: {} slices", reports.len());
    assert_eq!(marks[1], 1, "seed {seed}: the slice after the commit marked anew ({marks:?})");
    drop(repo);
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    assert_eq!(contents_of(&repo.checkout(&gap).unwrap()), gap_model.values, "seed {seed} reopened");
    check(&repo, &main, keep, &format!("seed {seed} reopened"));
}

#[test]
fn the_slices_waited_for_together_from_the_first_are_reported_as_the_whole_gc() {
    // A replay that waits for a sliced GC (at its end, or `--gc-when-busy wait`) gets one summary
    // for the slices run: that GC's, so slice 0, counted as a finished GC, not as a later slice.
    use larch_core::ContextRepo;
    let (mut rng, seed) = seeded_rng("the_slices_waited_for_together_from_the_first", 73);
    let dir = tempfile::tempdir().unwrap();
    let (repo, main) = build(&dir.path().join("a"), &mut rng, 60);
    drop(repo);
    copy_dir(&dir.path().join("a"), &dir.path().join("b"));
    let keep = 40;
    let mut unsliced_repo = Repo::open_with(dir.path().join("b"), options()).unwrap();
    unsliced_repo.set_gc_policy(unsliced());
    let quarter = unsliced_repo.gc(&main[keep].0).unwrap().copied_bytes / 4;
    let mut repo = Repo::open_with(dir.path().join("a"), options()).unwrap();
    repo.set_gc_policy(sliced(quarter));
    assert!(ContextRepo::gc_start(&mut repo, &main[keep].0).unwrap());
    let summary = ContextRepo::gc_finish(&mut repo, true).unwrap().expect("the GC's summary");
    assert!(!summary.abandoned, "seed {seed}");
    assert_eq!(summary.slice, 0, "seed {seed}: {summary:?}");
    assert!(summary.copied_bytes >= 2 * quarter, "seed {seed}: every slice's copy: {summary:?}");
    check(&repo, &main, keep, &format!("seed {seed}"));
}
