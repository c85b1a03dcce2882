//! Garbage collection (issue 10, docs/gc-design.md): `Repo::gc` and its background form on stores
//! built from seeded random workloads with small chunks (8 KiB, so that stores have dozens of
//! chunk files): kept commits read back equal to the reference model, collected ones give
//! `StoreError::Collected`, branches naming them are removed, fsck is clean, reopening and readers
//! in other handles see the same, later GCs work, a writer commits while the GC thread runs, a
//! late root into collected space abandons the GC without losing anything, and the disk shrinks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{contents_of, info, random_op};
use larch_core::{Hash, Tree};
use larch_store::INLINE_MAX;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::path::Path;

const CHUNK: u64 = 8 << 10;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: CHUNK, ..RepoOptions::default() }
}

/// A store under construction: the writer, the head's tree and model, every main commit with its
/// model, and side branches (name, commit, model).
struct Built {
    repo: Repo,
    tree: Tree,
    model: Model,
    main: Vec<(Hash, Model)>,
    sides: Vec<(String, Hash, Model)>,
    /// Blocks only rewrite a bounded set of keys (the live state stops growing).
    churn_only: bool,
}

/// Rewrites a few values of hot directories (patches and patch chains form) and churns some
/// unique long values (dead once overwritten: garbage for the GC).
fn block_ops(rng: &mut TestRng, tree: &mut Tree, model: &mut Model, n: u64, churn_only: bool) {
    for _ in 0..if churn_only { 0 } else { rng.random_range(1..6) } {
        random_op(rng, tree, model);
    }
    for dir in 0..rng.random_range(1..4u32) {
        let path = vec![
            b"hot".to_vec(),
            format!("d{dir}").into_bytes(),
            format!("k{:02}", rng.random_range(0..(12 + 10 * dir))).into_bytes(),
        ];
        let value = format!("v{}-{}", rng.random::<u32>(), "x".repeat(rng.random_range(0..60))).into_bytes();
        tree.add(&path, value.clone()).unwrap();
        model.add(&path, value);
    }
    let path = vec![b"churn".to_vec(), format!("c{}", n % 7).into_bytes()];
    let value = format!("block {n} {}", "q".repeat(200 + (n as usize % 300))).into_bytes();
    tree.add(&path, value.clone()).unwrap();
    model.add(&path, value);
}

fn build(_rng: &mut TestRng, dir: &Path, options: RepoOptions) -> Built {
    let repo = Repo::open_with(dir, options).unwrap();
    let tree = repo.empty_tree();
    Built { repo, tree, model: Model::new(), main: Vec::new(), sides: Vec::new(), churn_only: false }
}

impl Built {
    /// Commits `blocks` more blocks on `main`; every 6th block also leaves a side branch.
    fn grow(&mut self, rng: &mut TestRng, blocks: u64) {
        for _ in 0..blocks {
            let n = self.main.len() as u64;
            block_ops(rng, &mut self.tree, &mut self.model, n, self.churn_only);
            let parents: Vec<Hash> = self.main.last().map(|(hash, _)| *hash).into_iter().collect();
            let commit = self.repo.commit(&self.tree, &parents, info(n)).unwrap();
            self.main.push((commit, self.model.clone()));
            self.tree = self.repo.checkout(&commit).unwrap();
            if n % 6 == 2 {
                let mut side = self.tree.clone();
                let mut side_model = self.model.clone();
                side.add(
                    &["side", &format!("s{n}")],
                    format!("side {n} {}", "y".repeat(INLINE_MAX)).into_bytes(),
                )
                .unwrap();
                side_model.add(
                    &[b"side".to_vec(), format!("s{n}").into_bytes()],
                    format!("side {n} {}", "y".repeat(INLINE_MAX)).into_bytes(),
                );
                let name = format!("side-{n}");
                let hash = self.repo.commit_on(Some(&name), &side, &[commit], info(n)).unwrap();
                self.sides.push((name, hash, side_model));
            }
        }
    }
}

fn offset_of(repo: &Repo, commit: &Hash) -> u64 {
    repo.commit_details(commit).unwrap().offset
}

/// Every commit of `built` at or after `keep_from` reads back equal to its model; every one
/// before is `Collected`.
fn check_store(repo: &Repo, built: &Built, keep: &Hash, seed: u64) {
    let keep_from = offset_of(repo, keep);
    let all = built.main.iter().map(|(hash, model)| (None, hash, model));
    let all = all.chain(built.sides.iter().map(|(name, hash, model)| (Some(name), hash, model)));
    let (mut kept, mut collected) = (0, 0);
    for (name, hash, model) in all {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(offset_of(repo, hash) >= keep_from, "seed {seed}: a commit before K survived");
                assert_eq!(contents_of(&tree), model.values, "seed {seed}: commit {hash}");
                if let Some(name) = name {
                    assert_eq!(repo.branch(name), Some(*hash), "seed {seed}: branch {name} kept");
                }
                kept += 1;
            }
            Err(StoreError::Collected { commit, oldest_kept, .. }) => {
                assert_eq!(commit, *hash);
                assert_eq!(oldest_kept, *keep, "seed {seed}");
                assert!(matches!(repo.commit_details(hash), Err(StoreError::Collected { .. })));
                if let Some(name) = name {
                    assert_eq!(repo.branch(name), None, "seed {seed}: branch {name} removed");
                }
                collected += 1;
            }
            Err(other) => panic!("seed {seed}: commit {hash}: {other}"),
        }
    }
    assert!(kept > 0 && collected > 0, "seed {seed}: {kept} kept, {collected} collected");
    let report = repo.fsck();
    assert!(report.is_clean(), "seed {seed}: {report}");
    assert!(!report.collected_parents.is_empty(), "seed {seed}: the GC commit's parent is collected");
}

fn names(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with(prefix))
        .collect();
    names.sort();
    names
}

#[test]
fn a_gc_keeps_later_commits_and_collects_the_rest() {
    let (mut rng, seed) = seeded_rng("a_gc_keeps_later_commits_and_collects_the_rest", 0x6763_0001);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 60);
    let chunks_before = names(dir.path(), "chunk.").len();
    let keep = built.main[35].0;
    let keep_from = offset_of(&built.repo, &keep);
    let report = built.repo.gc(&keep).unwrap();
    assert_eq!(report.commit, keep);
    assert_eq!(report.generation, 1);
    assert!(report.copied_bytes > 0 && report.live_records > 0, "seed {seed}: {report:?}");
    assert!(report.chunks_removed > 0, "seed {seed}: {report:?}");
    assert!(report.disk_after < report.disk_before, "seed {seed}: {report:?}");
    assert!(report.disk_peak >= report.disk_before, "seed {seed}: {report:?}");
    assert_eq!(report.bytes_waiting, 0);
    assert!(!built.repo.gc_running());
    assert_eq!(built.repo.gc_finish().unwrap(), None, "the report is returned once");
    // Branches naming commits before K were removed and listed.
    let expected_removed: Vec<String> = built
        .sides
        .iter()
        .filter(|(_, hash, _)| offset_of_any(&built, hash) < keep_from)
        .map(|(name, _, _)| name.clone())
        .collect();
    let mut removed = report.branches_removed.clone();
    removed.sort();
    let mut expected_sorted = expected_removed.clone();
    expected_sorted.sort();
    assert_eq!(removed, expected_sorted, "seed {seed}");
    assert!(!expected_removed.is_empty());
    // On disk: one segment, fewer chunk files, no chunk below the new first one.
    assert_eq!(names(dir.path(), "seg."), vec!["seg.000001".to_string()]);
    assert!(names(dir.path(), "chunk.").len() < chunks_before);
    assert_eq!(report.disk_after, built.repo.disk_bytes().unwrap());
    check_store(&built.repo, &built, &keep, seed);
    // History stops at the collected parent and names it.
    let head = built.main.last().unwrap().0;
    let history = built.repo.history(&head).unwrap();
    assert_eq!(history.commits.len(), built.main.len() - 35, "seed {seed}");
    assert_eq!(history.collected_parents, vec![(keep, built.main[34].0)]);
    // The writer continues; a reopened writer and a reader see the same store.
    built.grow(&mut rng, 5);
    let Built { repo, .. } = built;
    repo.close().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    built = Built { repo, tree: Repo::open_read_only(dir.path()).unwrap().empty_tree(), ..built };
    check_store(&built.repo, &built, &keep, seed);
    let reader = Repo::open_read_only(dir.path()).unwrap();
    check_store(&reader, &built, &keep, seed);
}

/// The offset of a commit that may have been collected: from the model's point of view, its
/// position among main commits (side branches sit right after their main commit).
fn offset_of_any(built: &Built, hash: &Hash) -> u64 {
    match built.repo.commit_details(hash) {
        Ok(details) => details.offset,
        Err(_) => 0,
    }
}

#[test]
fn later_gcs_shrink_the_disk_and_merge_segments() {
    let (mut rng, seed) = seeded_rng("later_gcs_shrink_the_disk_and_merge_segments", 0x6763_0002);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 40);
    // From now on the live state stays bounded: the history is mostly dead.
    built.churn_only = true;
    let mut last_generation = 0;
    let mut sizes = Vec::new();
    let (mut merged, mut previous_segments) = (0, Vec::new());
    for round in 0..11 {
        built.grow(&mut rng, 12);
        let keep = built.main[built.main.len() - 10].0;
        let report = built.repo.gc(&keep).unwrap();
        assert_eq!(report.generation, last_generation + 1, "seed {seed}");
        last_generation = report.generation;
        check_store(&built.repo, &built, &keep, seed);
        let segments = names(dir.path(), "seg.");
        assert!(segments.len() <= 8, "seed {seed} round {round}: {segments:?}");
        // Every segment the GC did not merge is still there; the new one is named by the report.
        assert_eq!(segments.last(), report.segment.as_ref(), "seed {seed} round {round}");
        merged += previous_segments.iter().filter(|name| !segments.contains(name)).count();
        previous_segments = segments;
        sizes.push(report.disk_after);
        // A collected commit cannot be the next GC's commit.
        assert!(matches!(built.repo.gc(&built.main[0].0), Err(StoreError::GcRefused(_))));
    }
    // The store stops growing with the history: its size after the last GC is far below the
    // bytes all commits wrote. Segments are recollected when the compaction policy marks and
    // merges them (docs/gc-design.md §6, §13): the size may creep up between those merges, and
    // levels off.
    let written = built.repo.stats().pack_bytes;
    let last = *sizes.last().unwrap();
    assert!(
        last < written / 2,
        "seed {seed}: {last} bytes on disk for {written} bytes written; sizes {sizes:?}"
    );
    assert!(last < sizes[0] * 2, "seed {seed}: the store kept growing: sizes {sizes:?}");
    assert!(
        last < sizes[7] * 5 / 4,
        "seed {seed}: the store kept growing once segments merge: sizes {sizes:?}"
    );
    assert!(merged > 0, "seed {seed}: no segment was ever merged");
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert!(reader.fsck().is_clean());
}

#[test]
fn refusals() {
    let (mut rng, seed) = seeded_rng("gc_refusals", 0x6763_0003);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 12);
    let refused = |result: Result<(), StoreError>| matches!(result, Err(StoreError::GcRefused(_)));
    // The first commit: nothing is older.
    assert!(refused(built.repo.gc_start(&built.main[0].0)), "seed {seed}");
    assert!(refused(built.repo.gc_start(&Hash([7; 32]))));
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    assert!(refused(reader.gc_start(&built.main[5].0)));
    assert!(!reader.gc_running());
    built.repo.gc_start(&built.main[6].0).unwrap();
    assert!(refused(built.repo.gc_start(&built.main[7].0)), "a second GC while one runs");
    assert!(built.repo.gc_running());
    assert!(built.repo.gc_progress().is_some());
    built.repo.gc_wait().unwrap().unwrap();
    assert!(built.repo.gc_progress().is_none());
    assert!(refused(built.repo.gc_start(&built.main[3].0)), "older than the last GC");
    assert!(matches!(built.repo.checkout(&built.main[3].0), Err(StoreError::Collected { .. })));
    assert!(matches!(built.repo.log(&built.main[3].0), Err(StoreError::Collected { .. })));
    let parents = [built.main[3].0];
    assert!(matches!(built.repo.commit(&built.tree, &parents, info(99)), Err(StoreError::Collected { .. })));
    // A staged commit (sync never) is not published: refused until a flush.
    let Built { repo, .. } = built;
    repo.close().unwrap();
    let mut repo = Repo::open_with(dir.path(), RepoOptions { sync: SyncPolicy::Never, ..options() }).unwrap();
    let head = repo.head().unwrap();
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["staged"], b"not yet published".to_vec()).unwrap();
    let staged = repo.commit(&tree, &[head], info(100)).unwrap();
    assert!(refused(repo.gc_start(&staged)));
    repo.flush().unwrap();
    repo.gc(&staged).unwrap();
    assert!(reader.reload().unwrap());
    assert!(matches!(reader.checkout(&head), Err(StoreError::Collected { .. })));
    assert_eq!(contents_of(&reader.checkout(&staged).unwrap()), contents_of(&tree));
}

#[test]
fn a_writer_commits_while_the_gc_thread_runs() {
    let (mut rng, seed) = seeded_rng("a_writer_commits_while_the_gc_thread_runs", 0x6763_0004);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 50);
    let mut gcs = 0;
    let mut overlapped = 0;
    for _ in 0..4 {
        let keep = built.main[built.main.len() - 15].0;
        built.repo.gc_start(&keep).unwrap();
        let mut report = None;
        for _ in 0..15 {
            built.grow(&mut rng, 1);
            if built.repo.gc_running() {
                overlapped += 1;
            }
            if let Some(done) = built.repo.gc_finish().unwrap() {
                report = Some(done);
                break;
            }
        }
        let report = match report {
            Some(report) => report,
            None => built.repo.gc_wait().unwrap().unwrap(),
        };
        assert_eq!(report.commit, keep);
        gcs += 1;
        check_store(&built.repo, &built, &keep, seed);
    }
    assert_eq!(gcs, 4);
    assert!(overlapped > 0, "seed {seed}: no commit overlapped a GC");
    let Built { repo, .. } = built;
    repo.close().unwrap();
    assert!(Repo::open_read_only(dir.path()).unwrap().fsck().is_clean());
}

#[test]
fn a_reader_in_another_handle_reloads_across_gcs() {
    let (mut rng, seed) = seeded_rng("a_reader_in_another_handle_reloads_across_gcs", 0x6763_0005);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 30);
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    // A reader that never reloads: it holds every file of its state open.
    let frozen = Repo::open_read_only(dir.path()).unwrap();
    let frozen_commits = built.main.len();
    let old = built.main[10].0;
    let old_tree = reader.checkout(&old).unwrap();
    let recent = built.main[25].0;
    let recent_tree = reader.checkout(&recent).unwrap();
    for round in 0..3 {
        built.grow(&mut rng, 10);
        let keep = built.main[built.main.len() - 12].0;
        built.repo.gc(&keep).unwrap();
        assert!(reader.reload().unwrap(), "seed {seed} round {round}");
        check_store(&reader, &built, &keep, seed);
    }
    // The frozen reader still reads every commit of its state, collected ones included: the
    // files the GCs unlinked stay readable through its descriptors.
    assert!(!dir.path().join("chunk.000000").exists(), "seed {seed}: the first chunk was unlinked");
    for (hash, model) in &built.main[..frozen_commits] {
        assert_eq!(&contents_of(&frozen.checkout(hash).unwrap()), &model.values, "seed {seed}");
    }
    // A tree obtained before the GCs: its kept parts read back (from the cache or the files the
    // reader still holds); the old one reads whatever was cached or fails with a typed error.
    let recent_model = &built.main[25].1;
    if offset_of_any(&built, &recent) > 0 {
        assert_eq!(&contents_of(&recent_tree), &recent_model.values);
    }
    let mut walked = old_tree.clone();
    let probe: [&[u8]; 1] = [b"hot"];
    match walked.find_tree(&probe) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().contains("garbage collection"), "seed {seed}: {e}"),
    }
    walked.add(&["x"], b"y".to_vec()).ok();
}

#[test]
fn a_late_root_into_collected_space_abandons_the_gc() {
    // The late root is checked by the worker (a commit while it marks) or by the writer at the
    // switch (a commit after the worker is done): both must abandon.
    for after_worker in [false, true] {
        late_root_abandons(after_worker);
    }
}

fn late_root_abandons(after_worker: bool) {
    let (mut rng, seed) = seeded_rng("a_late_root_into_collected_space_abandons_the_gc", 0x6763_0006);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 40);
    let keep = built.main[30].0;
    built.repo.gc_start(&keep).unwrap();
    while after_worker
        && built.repo.gc_progress().is_some_and(|p| p.phase != larch_store::GcPhase::WaitingForSwitch)
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // While the GC runs, a commit reuses the tree of a commit it will collect (a branch off an
    // old block): its records are reachable from no kept commit the GC saw.
    let (old, old_model) = built.main[8].clone();
    let mut revived = built.repo.checkout(&old).unwrap();
    revived.add(&["revived"], b"a branch off block 8 committed during the GC".to_vec()).unwrap();
    let mut revived_model = old_model.clone();
    revived_model.add(&[b"revived".to_vec()], b"a branch off block 8 committed during the GC".to_vec());
    let hash = built.repo.commit_on(Some("revived"), &revived, &[old], info(1000)).unwrap();
    let outcome = built.repo.gc_wait();
    assert!(
        matches!(outcome, Err(StoreError::GcAbandoned(_))),
        "seed {seed}, after worker {after_worker}: {outcome:?}"
    );
    // Nothing was collected: every commit still reads, the segment is gone.
    assert!(names(dir.path(), "seg.").is_empty());
    for (hash, model) in &built.main {
        assert_eq!(&contents_of(&built.repo.checkout(hash).unwrap()), &model.values);
    }
    assert_eq!(contents_of(&built.repo.checkout(&hash).unwrap()), revived_model.values);
    assert!(built.repo.fsck().is_clean());
    // A later GC sees the revived branch as a kept commit and keeps what it needs.
    built.grow(&mut rng, 3);
    built.repo.gc(&keep).unwrap();
    assert_eq!(contents_of(&built.repo.checkout(&hash).unwrap()), revived_model.values);
    assert!(matches!(built.repo.checkout(&built.main[8].0), Err(StoreError::Collected { .. })));
    assert!(built.repo.fsck().is_clean(), "seed {seed}");
}

#[test]
fn files_a_crash_left_are_removed_by_the_next_writer() {
    let (mut rng, seed) = seeded_rng("files_a_crash_left_are_removed_by_the_next_writer", 0x6763_0007);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 30);
    let chunk0 = std::fs::read(dir.path().join("chunk.000000")).unwrap();
    let keep = built.main[20].0;
    built.repo.gc(&keep).unwrap();
    let Built { repo, .. } = built;
    repo.close().unwrap();
    assert!(!dir.path().join("chunk.000000").exists());
    // A retired chunk whose unlink was lost, and a segment of a GC that never switched.
    std::fs::write(dir.path().join("chunk.000000"), &chunk0).unwrap();
    std::fs::write(dir.path().join("seg.000007"), b"an orphan segment").unwrap();
    // A reader ignores them.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    assert!(reader.fsck().is_clean(), "seed {seed}");
    drop(reader);
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    assert!(!dir.path().join("chunk.000000").exists(), "seed {seed}");
    assert!(!dir.path().join("seg.000007").exists());
    assert!(dir.path().join("seg.000001").exists());
    assert!(repo.fsck().is_clean());
}

#[test]
fn recovery_rebuilds_the_commit_index_of_a_collected_store() {
    let (mut rng, seed) = seeded_rng("recovery_rebuilds_the_commit_index_of_a_collected_store", 0x6763_0008);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 30);
    let keep = built.main[20].0;
    built.repo.gc(&keep).unwrap();
    built.grow(&mut rng, 6);
    let Built { repo, .. } = built;
    repo.close().unwrap();
    // The commit index loses its last entries (below what the published state says is durable).
    let index = dir.path().join("commits");
    let len = std::fs::metadata(&index).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&index).unwrap();
    file.set_len(len - 3 * 44).unwrap();
    drop(file);
    assert!(matches!(Repo::open_read_only(dir.path()), Err(StoreError::NeedsRecovery { .. })), "seed {seed}");
    let plan = larch_store::plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(built.main.last().unwrap().0));
    plan.apply().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    built.repo = repo;
    check_store(&built.repo, &built, &keep, seed);
    // And a later GC works on the recovered store.
    built.grow(&mut rng, 3);
    let keep = built.main[built.main.len() - 4].0;
    built.repo.gc(&keep).unwrap();
    check_store(&built.repo, &built, &keep, seed);
}

/// A format-2 store (the fixture `tests/data/format-v2`, its `pack` read as chunk 0) continued by
/// a format-3 writer, then collected: the legacy `pack` is part of the region, its live records go
/// to a segment and the file is removed; the kept commits read back.
#[test]
fn a_gc_collects_the_pack_of_a_format_2_store() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v2");
    let dir = tempfile::tempdir().unwrap();
    for name in ["control", "pack", "commits"] {
        std::fs::copy(fixture.join(name), dir.path().join(name)).unwrap();
    }
    let mut repo = Repo::open(dir.path()).unwrap();
    let old_head = repo.head().unwrap();
    let mut tree = repo.checkout(&old_head).unwrap();
    let mut kept = Vec::new();
    let mut parent = old_head;
    for i in 0..3u8 {
        tree.add(&["data", "version"], vec![b'a' + i; INLINE_MAX + 8]).unwrap();
        parent = repo.commit(&tree, &[parent], info(10 + u64::from(i))).unwrap();
        kept.push((parent, contents_of(&repo.checkout(&parent).unwrap())));
    }
    let report = repo.gc(&kept[0].0).unwrap();
    assert!(report.copied_bytes > 0, "{report:?}");
    assert!(!dir.path().join("pack").exists(), "the format-2 pack was collected");
    assert!(report.branches_removed.contains(&"side".to_string()), "{report:?}");
    repo.close().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    for (hash, contents) in &kept {
        assert_eq!(&contents_of(&repo.checkout(hash).unwrap()), contents);
    }
    assert!(matches!(repo.checkout(&old_head), Err(StoreError::Collected { .. })));
    assert_eq!(repo.history(&parent).unwrap().collected_parents, vec![(kept[0].0, old_head)]);
    assert!(repo.fsck().is_clean());
}

/// A reader far behind: the GC commit is newer than anything it has seen, so the index entries
/// between its end and the oldest kept commit name collected commits; its reload skips them.
#[test]
fn a_reader_behind_the_gc_commit_reloads() {
    let (mut rng, seed) = seeded_rng("a_reader_behind_the_gc_commit_reloads", 0x6763_0009);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 10);
    let mut reader = Repo::open_read_only(dir.path()).unwrap();
    built.grow(&mut rng, 25);
    let keep = built.main[built.main.len() - 3].0;
    built.repo.gc(&keep).unwrap();
    assert!(reader.reload().unwrap(), "seed {seed}");
    assert_eq!(reader.commit_count(), built.repo.commit_count());
    check_store(&reader, &built, &keep, seed);
}

/// Damage in a segment is reported, never misread: a flipped byte inside its records is found by
/// fsck (and by the reads that touch it) as corruption; damage to its mapping or footer makes the
/// state's layout fail to open (a typed error, the store needs recovery).
#[test]
fn a_damaged_segment_gives_typed_errors() {
    let (mut rng, seed) = seeded_rng("a_damaged_segment_gives_typed_errors", 0x6763_000a);
    let dir = tempfile::tempdir().unwrap();
    let mut built = build(&mut rng, dir.path(), options());
    built.grow(&mut rng, 30);
    let keep = built.main[20].0;
    built.repo.gc(&keep).unwrap();
    let Built { repo, .. } = built;
    repo.close().unwrap();
    let path = dir.path().join("seg.000001");
    let good = std::fs::read(&path).unwrap();
    let map_at = u64::from_le_bytes(good[good.len() - 32..good.len() - 24].try_into().unwrap()) as usize;
    assert!(map_at > 96 + 64, "seed {seed}: a segment with records");
    let (mut found, mut clean) = (0, 0);
    for _ in 0..12 {
        let mut bad = good.clone();
        let at = rng.random_range(96..map_at);
        bad[at] ^= 1 << rng.random_range(0..8);
        std::fs::write(&path, &bad).unwrap();
        let repo = Repo::open_read_only(dir.path()).unwrap();
        let report = repo.fsck();
        if report.is_clean() {
            clean += 1; // a byte of a record no kept commit reaches (a base only's unread tail)
        } else {
            found += 1;
            assert!(report.problems.iter().all(|problem| !problem.what.is_empty()));
        }
        for (hash, _) in &built.main[20..] {
            let _ = repo.checkout(hash).map(|tree| contents_of_checked(&tree));
        }
    }
    assert!(found > clean, "seed {seed}: {found} damaged reads found, {clean} clean");
    for at in [map_at, good.len() - 20, good.len() - 5] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        match Repo::open_read_only(dir.path()) {
            Err(StoreError::NeedsRecovery { reason, .. }) => assert!(reason.contains("seg"), "{reason}"),
            other => panic!("seed {seed}: byte {at}: {other:?}"),
        }
    }
    std::fs::write(&path, &good).unwrap();
    assert!(Repo::open_read_only(dir.path()).unwrap().fsck().is_clean());
}

/// Walks a tree, returning an error instead of panicking on a damaged record.
fn contents_of_checked(tree: &Tree) -> Result<usize, larch_core::TreeError> {
    let empty: [&[u8]; 0] = [];
    let mut count = 0;
    let mut stack = vec![tree.clone()];
    while let Some(tree) = stack.pop() {
        for (_, child) in tree.list(&empty, 0, None)? {
            count += 1;
            if child.find(&empty)?.is_none() {
                stack.push(child);
            }
        }
    }
    Ok(count)
}
