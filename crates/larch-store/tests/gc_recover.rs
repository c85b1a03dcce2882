//! Recovery of collected and archived stores whose control file has no valid slot
//! (docs/gc-design.md §8, *`larch recover`*; docs/store.md, *Recovery*): stores built from seeded
//! random workloads with small chunks (4 KiB, dozens of chunk files), collected several times,
//! then the control file zeroed, truncated or deleted. `plan_recovery` rebuilds the layout from
//! the chunk and segment headers; once applied, the head is the newest commit, every kept commit
//! reads back equal to the reference model, collected ones are `Collected` (or readable again when
//! the retired chunks are still there), fsck is clean and a later GC works. A missing or damaged
//! segment, or a commit index cut short, gives a typed error (or no commit to publish), never a
//! panic; an archived store recovers with its lower directory and says `--lower` without it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::{Hash, Tree};
use larch_store::{GcPolicy, Repo, RepoOptions, StoreError, plan_recovery, plan_recovery_with};
use larch_testkit::{Model, TestRng, seeded_rng};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::Path;

fn options() -> RepoOptions {
    RepoOptions { chunk_bytes: 4096, cache_bytes: 1 << 20, ..RepoOptions::default() }
}

/// A writer, its head's tree and model, and every commit of `main` with its model.
struct Built {
    repo: Repo,
    tree: Tree,
    model: Model,
    commits: Vec<(Hash, Model)>,
    rng: TestRng,
}

impl Built {
    fn new(dir: &Path, options: RepoOptions, name: &str, default_seed: u64) -> Built {
        let (rng, seed) = seeded_rng(name, default_seed);
        eprintln!("{name}: seed {seed} (replay with LARCH_SEED={seed})");
        let mut repo = Repo::open_with(dir, options).unwrap();
        // Chunk 0 is copied like the others here; recovery of a chunk kept in place is tested in
        // tests/gc_keep_in_place.rs.
        repo.set_gc_policy(GcPolicy { keep_in_place_percent: 0, ..GcPolicy::default() });
        let tree = repo.empty_tree();
        Built { repo, tree, model: Model::new(), commits: Vec::new(), rng }
    }

    /// Commits `blocks` blocks: a few random operations and a churned long value (garbage once
    /// overwritten), so that GCs have something to collect.
    fn grow(&mut self, blocks: usize) {
        for _ in 0..blocks {
            let n = self.commits.len() as u64;
            for _ in 0..self.rng.random_range(1..4) {
                random_op(&mut self.rng, &mut self.tree, &mut self.model);
            }
            let path = vec![b"churn".to_vec(), format!("c{}", n % 5).into_bytes()];
            let value = format!("block {n} {}", "q".repeat(300 + (n as usize % 200))).into_bytes();
            self.tree.add(&path, value.clone()).unwrap();
            self.model.add(&path, value);
            let parents: Vec<Hash> = self.commits.last().map(|(hash, _)| *hash).into_iter().collect();
            let commit = self.repo.commit(&self.tree, &parents, info(n)).unwrap();
            self.commits.push((commit, self.model.clone()));
            self.tree = self.repo.checkout(&commit).unwrap();
        }
    }

    /// Commits a first block of `values` cold values (never rewritten: the live records that the
    /// first GC copies to its segment, large enough that later GCs do not merge it).
    fn setup(&mut self, values: usize) {
        assert!(self.commits.is_empty());
        for i in 0..values {
            let path =
                vec![b"cold".to_vec(), format!("k{:02}", i % 37).into_bytes(), format!("v{i}").into_bytes()];
            let value = format!("cold {i} {}", "c".repeat(60 + i % 50)).into_bytes();
            self.tree.add(&path, value.clone()).unwrap();
            self.model.add(&path, value);
        }
        let commit = self.repo.commit(&self.tree, &[], info(0)).unwrap();
        self.commits.push((commit, self.model.clone()));
        self.tree = self.repo.checkout(&commit).unwrap();
    }

    /// Collects everything before commit `keep` (an index into `commits`).
    fn gc(&mut self, keep: usize) {
        let hash = self.commits[keep].0;
        self.repo.gc(&hash).unwrap();
    }
}

/// The files of `dir` and their bytes.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_file())
        .map(|entry| (entry.file_name().into_string().unwrap(), std::fs::read(entry.path()).unwrap()))
        .collect()
}

fn names(dir: &Path, prefix: &str) -> Vec<String> {
    files_of(dir).into_keys().filter(|name| name.starts_with(prefix)).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Damage {
    /// Both slots and the confirmation overwritten with zeros.
    Zeroed,
    /// The file cut inside slot 0 (both slots torn).
    Truncated,
    /// The file deleted.
    Deleted,
}

fn destroy_control(dir: &Path, damage: Damage) {
    let control = dir.join("control");
    match damage {
        Damage::Zeroed => {
            let len = std::fs::metadata(&control).unwrap().len();
            std::fs::write(&control, vec![0u8; len as usize]).unwrap();
        }
        Damage::Truncated => {
            let file = std::fs::OpenOptions::new().write(true).open(&control).unwrap();
            file.set_len(40).unwrap();
        }
        Damage::Deleted => std::fs::remove_file(&control).unwrap(),
    }
}

/// Every commit from `commits[readable_from]` on reads back equal to its model; every one
/// before is `Collected` naming `oldest_kept`; the head is the newest commit; fsck is clean.
fn check(repo: &Repo, commits: &[(Hash, Model)], readable_from: usize, oldest_kept: Option<Hash>) {
    assert_eq!(repo.head(), commits.last().map(|(hash, _)| *hash), "the head is the newest commit");
    for (i, (hash, model)) in commits.iter().enumerate() {
        match repo.checkout(hash) {
            Ok(tree) => {
                assert!(i >= readable_from, "commit {i} should have been collected");
                assert_eq!(contents_of(&tree), model.values, "commit {i} reads back as its model");
            }
            Err(StoreError::Collected { commit, oldest_kept: kept, .. }) => {
                assert!(i < readable_from, "commit {i} was lost");
                assert_eq!(commit, *hash);
                assert_eq!(Some(kept), oldest_kept, "commit {i}");
            }
            Err(other) => panic!("commit {i}: {other}"),
        }
    }
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
}

/// A store collected three times (the last GC keeping commit 27 of 36), closed: a cold first
/// block, then GCs collecting small regions, so that the segments form a chain.
fn collected_store(dir: &Path, name: &str) -> (Vec<(Hash, Model)>, usize) {
    let mut built = Built::new(dir, options(), name, 0x7265_0001);
    built.setup(400);
    built.grow(14);
    built.gc(10);
    built.grow(6);
    built.gc(16);
    built.grow(12);
    built.gc(27);
    built.grow(8);
    assert_eq!(built.repo.gc_generation(), 3);
    let Built { repo, commits, .. } = built;
    repo.close().unwrap();
    assert!(!Path::new(&dir.join("chunk.000000")).exists(), "chunk 0 was collected");
    let segments = names(dir, "seg.");
    assert!(segments.len() >= 2, "the segments form a chain: {segments:?}");
    (commits, 27)
}

#[test]
fn a_collected_store_without_a_valid_slot_is_rebuilt_from_its_segments() {
    for damage in [Damage::Zeroed, Damage::Truncated, Damage::Deleted] {
        let dir = tempfile::tempdir().unwrap();
        let (commits, keep) = collected_store(dir.path(), "a_collected_store_without_a_valid_slot");
        let before = files_of(dir.path());
        destroy_control(dir.path(), damage);
        assert!(Repo::open_read_only(dir.path()).is_err(), "{damage:?}: the store does not open");
        if damage == Damage::Deleted {
            // No control file beside chunks and segments: a store to recover, not a foreign
            // directory.
            let error = Repo::open_read_only(dir.path()).err().unwrap();
            assert!(matches!(error, StoreError::NeedsRecovery { .. }), "{error}");
        }

        let plan = plan_recovery(dir.path()).unwrap();
        assert!(plan.published.is_none(), "{damage:?}");
        let layout = plan.rebuilt_layout.clone().unwrap();
        assert!(layout.contains("GC generation 3"), "{damage:?}: {layout}");
        let segments = names(dir.path(), "seg.");
        assert!(segments.iter().all(|name| layout.contains(name.as_str())), "{layout}: {segments:?}");
        assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
        // Only the kept commits are found: the scan starts at the oldest kept one.
        assert_eq!(plan.found.len(), commits.len() - keep, "{damage:?}");
        assert_eq!(plan.found.first().map(|found| found.hash), Some(commits[keep].0));
        plan.apply().unwrap();
        // Recovery unlinked nothing and wrote only `control` and `commits`.
        let after = files_of(dir.path());
        for (name, bytes) in &before {
            if name != "control" && name != "commits" {
                assert_eq!(after.get(name), Some(bytes), "{damage:?}: {name} unchanged");
            }
        }

        let reader = Repo::open_read_only(dir.path()).unwrap();
        check(&reader, &commits, keep, Some(commits[keep].0));
        drop(reader);
        let mut repo = Repo::open_with(dir.path(), options()).unwrap();
        assert_eq!(repo.gc_generation(), 3, "{damage:?}");
        check(&repo, &commits, keep, Some(commits[keep].0));
        // A later GC works on the recovered store.
        let newer = commits[commits.len() - 3].0;
        let report = repo.gc(&newer).unwrap();
        assert_eq!(report.generation, 4);
        check(&repo, &commits, commits.len() - 3, Some(newer));
    }
}

/// Chunks a GC retired but did not unlink yet (a crash before the deletion): with chunk 0 among
/// them, the pre-GC layout is used and the collected commits read again.
#[test]
fn retired_chunks_from_chunk_0_give_the_pre_gc_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mut built = Built::new(dir.path(), options(), "retired_chunks_from_chunk_0", 0x7265_0002);
    built.grow(20);
    let before_gc = files_of(dir.path());
    built.gc(12);
    built.grow(4);
    let Built { repo, commits, .. } = built;
    repo.close().unwrap();
    let restored: Vec<&String> = before_gc
        .keys()
        .filter(|name| name.starts_with("chunk.") && !dir.path().join(name).exists())
        .collect();
    assert!(restored.iter().any(|name| *name == "chunk.000000"), "{restored:?}");
    for name in &restored {
        std::fs::write(dir.path().join(name), &before_gc[*name]).unwrap();
    }
    destroy_control(dir.path(), Damage::Zeroed);

    let plan = plan_recovery(dir.path()).unwrap();
    let layout = plan.rebuilt_layout.clone().unwrap();
    assert!(layout.contains("pre-GC"), "{layout}");
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
    assert_eq!(plan.found.len(), commits.len());
    plan.apply().unwrap();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    check(&repo, &commits, 0, None);
    drop(repo);
    // The writer's open removes the segment the state does not name; a GC works again.
    let mut repo = Repo::open_with(dir.path(), options()).unwrap();
    assert!(names(dir.path(), "seg.").is_empty());
    assert_eq!(repo.gc_generation(), 0);
    let keep = commits[15].0;
    repo.gc(&keep).unwrap();
    check(&repo, &commits, 15, Some(keep));
}

/// The files a second GC retired are still there (chunks and the merged segment): the lowest
/// chunk that a chain of segments joins is the first live one, the state after the first GC.
#[test]
fn retired_files_of_a_later_gc_give_the_earlier_collected_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mut built = Built::new(dir.path(), options(), "retired_files_of_a_later_gc", 0x7265_0003);
    built.grow(16);
    built.gc(8);
    built.grow(14);
    let before_second = files_of(dir.path());
    built.gc(24);
    built.grow(3);
    let Built { repo, commits, .. } = built;
    repo.close().unwrap();
    let mut restored = 0;
    for (name, bytes) in &before_second {
        if (name.starts_with("chunk.") || name.starts_with("seg.")) && !dir.path().join(name).exists() {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            restored += 1;
        }
    }
    assert!(restored > 0);
    destroy_control(dir.path(), Damage::Deleted);

    let plan = plan_recovery(dir.path()).unwrap();
    let layout = plan.rebuilt_layout.clone().unwrap();
    assert!(layout.contains("GC generation 1"), "{layout}");
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
    plan.apply().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    assert_eq!(repo.gc_generation(), 1);
    check(&repo, &commits, 8, Some(commits[8].0));
}

/// A live chunk above the first one lost: the run below the gap is recovered, up to the newest
/// commit whose records lie wholly below it.
#[test]
fn a_lost_chunk_leaves_the_commits_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let (commits, keep) = collected_store(dir.path(), "a_lost_chunk_leaves_the_commits_below_it");
    let chunks = names(dir.path(), "chunk.");
    assert!(chunks.len() >= 4, "{chunks:?}");
    let lost = &chunks[chunks.len() - 2];
    let header = std::fs::read(dir.path().join(lost)).unwrap();
    let lost_start = u64::from_le_bytes(header[24..32].try_into().unwrap());
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let offsets: Vec<u64> =
        commits[keep..].iter().map(|(hash, _)| reader.commit_details(hash).unwrap().offset).collect();
    drop(reader);
    let below = offsets.iter().filter(|offset| **offset < lost_start).count();
    assert!(below >= 2, "kept commits below {lost}: {below}");
    let newest = keep + below - 1;
    std::fs::remove_file(dir.path().join(lost)).unwrap();
    destroy_control(dir.path(), Damage::Deleted);

    let plan = plan_recovery(dir.path()).unwrap();
    let layout = plan.rebuilt_layout.clone().unwrap();
    assert!(layout.contains("GC generation 3"), "{layout}");
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits[newest].0), "{layout}");
    plan.apply().unwrap();
    let reader = Repo::open_read_only(dir.path()).unwrap();
    check(&reader, &commits[..=newest], keep, Some(commits[keep].0));
    for (hash, _) in &commits[newest + 1..] {
        assert!(reader.checkout(hash).is_err(), "a commit above the lost chunk");
    }
}

/// Segments missing or damaged, the commit index cut short: a typed error saying what is missing,
/// or a plan with nothing to publish; never a panic, and nothing written.
#[test]
fn missing_or_damaged_files_give_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (commits, _) = collected_store(dir.path(), "missing_or_damaged_files_give_typed_errors");
    destroy_control(dir.path(), Damage::Zeroed);
    let pristine = files_of(dir.path());
    let reset = || {
        for (name, bytes) in &pristine {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
    };
    let segments = names(dir.path(), "seg.");

    // Every segment deleted.
    for name in &segments {
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    match plan_recovery(dir.path()) {
        Err(StoreError::Unrecoverable { reason, .. }) => {
            assert!(reason.contains("no chain of GC segments"), "{reason}");
            assert!(reason.contains("no valid segment file"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    reset();

    // A segment's header damaged (its CRC no longer matches).
    for name in &segments {
        let mut bytes = pristine[name].clone();
        bytes[30] ^= 0x40;
        std::fs::write(dir.path().join(name), bytes).unwrap();
        match plan_recovery(dir.path()) {
            Err(StoreError::Unrecoverable { reason, .. }) => {
                assert!(reason.contains(name.as_str()), "{name}: {reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
        reset();
    }

    // A segment cut short (its footer gone).
    let name = segments.last().unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(dir.path().join(name)).unwrap();
    file.set_len(pristine[name].len() as u64 / 2).unwrap();
    drop(file);
    assert!(matches!(plan_recovery(dir.path()), Err(StoreError::Unrecoverable { .. })));
    reset();

    // A record inside the largest segment's runs damaged: the header and mapping check out, so
    // the layout is rebuilt, but no commit is complete (fsck finds the damaged record).
    let largest = segments.iter().max_by_key(|name| pristine[*name].len()).unwrap();
    let mut bytes = pristine[largest].clone();
    let at = 96 + (bytes.len() - 96 - 32) / 2;
    bytes[at] ^= 0xff;
    std::fs::write(dir.path().join(largest), bytes).unwrap();
    match plan_recovery(dir.path()) {
        Ok(plan) => {
            if let Some(chosen) = &plan.chosen {
                // The damaged byte lies in a record no kept commit reaches: the store is whole.
                assert_eq!(chosen.hash, commits.last().unwrap().0);
            } else {
                assert!(!plan.rejected.is_empty());
                assert!(plan.apply().is_err());
            }
        }
        Err(StoreError::Unrecoverable { .. }) => {}
        Err(other) => panic!("{other}"),
    }
    reset();

    // The commit index cut to its header: the collected commits' entries are missing.
    std::fs::write(dir.path().join("commits"), &pristine["commits"][..16]).unwrap();
    match plan_recovery(dir.path()) {
        Err(StoreError::Unrecoverable { reason, .. }) => assert!(reason.contains("commit index"), "{reason}"),
        other => panic!("{other:?}"),
    }
    reset();

    // The first live chunk deleted: the segments join no chunk present.
    let first = names(dir.path(), "chunk.").into_iter().next().unwrap();
    std::fs::remove_file(dir.path().join(&first)).unwrap();
    match plan_recovery(dir.path()) {
        Err(StoreError::Unrecoverable { reason, .. }) => assert!(reason.contains("chunk."), "{reason}"),
        Ok(plan) => panic!("recovered without {first}: {:?}", plan.rebuilt_layout),
        Err(other) => panic!("{other}"),
    }
    reset();
    assert_eq!(files_of(dir.path()), pristine, "recovery wrote nothing");
    // And the untouched files recover.
    let plan = plan_recovery(dir.path()).unwrap();
    assert_eq!(plan.chosen.map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
}

/// Seeded random damage to the chunk and segment files (a byte flipped in a header, the mapping,
/// the footer or the records; a file cut): recovery returns a plan or a typed error, never panics;
/// a plan it can publish gives a store that opens and passes fsck.
#[test]
fn random_damage_never_panics() {
    let (mut rng, seed) = seeded_rng("random_damage_never_panics", 0x7265_0005);
    eprintln!("random_damage_never_panics: seed {seed} (replay with LARCH_SEED={seed})");
    let dir = tempfile::tempdir().unwrap();
    let (commits, _) = collected_store(dir.path(), "random_damage_never_panics_store");
    destroy_control(dir.path(), Damage::Zeroed);
    let pristine = files_of(dir.path());
    let targets: Vec<&String> =
        pristine.keys().filter(|name| name.starts_with("chunk.") || name.starts_with("seg.")).collect();
    let (mut published, mut refused) = (0, 0);
    for round in 0..40 {
        for (name, bytes) in &pristine {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let name = targets[rng.random_range(0..targets.len())];
        let mut bytes = pristine[name].clone();
        let at = match rng.random_range(0..4) {
            0 => rng.random_range(0..bytes.len().min(96)),
            1 => bytes.len() - 1 - rng.random_range(0..bytes.len().min(48)),
            _ => rng.random_range(0..bytes.len()),
        };
        if rng.random_range(0..5) == 0 {
            bytes.truncate(at);
        } else {
            bytes[at] ^= 1 << rng.random_range(0..8);
        }
        std::fs::write(dir.path().join(name), bytes).unwrap();
        let what = format!("seed {seed} round {round}: {name} at {at}");
        match plan_recovery(dir.path()) {
            Ok(plan) => match &plan.chosen {
                Some(chosen) => {
                    assert!(commits.iter().any(|(hash, _)| *hash == chosen.hash), "{what}");
                    plan.apply().unwrap();
                    let repo = Repo::open_read_only(dir.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let report = repo.fsck();
                    assert!(report.is_clean(), "{what}: {report}");
                    let (hash, model) = commits.iter().find(|(hash, _)| *hash == chosen.hash).unwrap();
                    assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "{what}");
                    published += 1;
                }
                None => refused += 1,
            },
            Err(StoreError::Unrecoverable { .. } | StoreError::Corrupt { .. }) => refused += 1,
            Err(other) => panic!("{what}: {other}"),
        }
        std::fs::remove_file(dir.path().join("control")).ok();
    }
    eprintln!("random damage: {published} published, {refused} refused");
    assert!(published > 0, "seed {seed}: some damage (in dead bytes or above the newest commit) recovers");
}

/// An archived store (sealed chunks moved to the lower directory): without a valid slot it
/// recovers with its lower directory, and says `--lower` without it; with a valid slot, recovery
/// without the lower directory is `NeedsLower`.
#[test]
fn an_archived_store_recovers_with_its_lower_directory() {
    let dir = tempfile::tempdir().unwrap();
    let lower_dir = tempfile::tempdir().unwrap();
    let lower = lower_dir.path().join("lower");
    let archive_options = RepoOptions { lower: Some(lower.clone()), ..options() };
    let mut built =
        Built::new(dir.path(), archive_options.clone(), "an_archived_store_recovers", 0x7265_0004);
    built.grow(24);
    let report = built.repo.archive(&built.commits[18].0).unwrap();
    assert!(report.chunks_moved >= 2, "{report:?}");
    built.grow(3);
    let Built { repo, commits, .. } = built;
    repo.close().unwrap();
    assert!(!dir.path().join("chunk.000000").exists());

    assert!(matches!(plan_recovery(dir.path()), Err(StoreError::NeedsLower { .. })));
    let plan = plan_recovery_with(dir.path(), Some(&lower)).unwrap();
    assert!(plan.is_noop(), "the store opens with its lower directory");

    destroy_control(dir.path(), Damage::Truncated);
    match plan_recovery(dir.path()) {
        Err(err @ StoreError::Unrecoverable { .. }) => {
            assert!(err.to_string().contains("--lower"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    let plan = plan_recovery_with(dir.path(), Some(&lower)).unwrap();
    assert_eq!(plan.chosen.as_ref().map(|chosen| chosen.hash), Some(commits.last().unwrap().0));
    assert_eq!(plan.found.len(), commits.len());
    plan.apply().unwrap();
    // The recovered state keeps the archive flag: it opens only with the lower directory.
    assert!(matches!(Repo::open_read_only(dir.path()), Err(StoreError::NeedsLower { .. })));
    let repo = Repo::open_read_only_options(dir.path(), archive_options.clone()).unwrap();
    check(&repo, &commits, 0, None);
    drop(repo);
    let repo = Repo::open_with(dir.path(), archive_options).unwrap();
    check(&repo, &commits, 0, None);
}
