//! A read-only handle beside a writer that collects garbage (issue 39: `larch export`, `snapshot
//! export`, `fsck` and any reader opened before a GC). The reader keeps at most one chunk file
//! open, so once the writer's GC has retired (unlinked) the old chunks, reading the head's values
//! there finds the files gone. The store answers by itself: the read-only layout reads the control
//! file again, swaps in the layout of the new published state (the same global offsets, the kept
//! records now in a segment) and reads again; a commit the GC collected is
//! [`StoreError::Collected`], never `MissingFile`. Deterministic: one chunk per commit, a pool of
//! one descriptor, a cache of one byte, no reload.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash, TreeError};
use larch_store::{GcOptions, GcPolicy, Repo, RepoOptions, StoreError};
use std::path::Path;

const COMMITS: u64 = 24;

/// Longer than an inline value: each value is a record of its own, in its commit's chunk.
fn value(i: u64) -> Vec<u8> {
    format!("value {i:05} in the chunk of its commit; ").repeat(12).into_bytes()
}

fn key(i: u64) -> String {
    format!("{i:05}")
}

fn chunk_files(path: &Path) -> usize {
    std::fs::read_dir(path)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk."))
        .count()
}

/// A writer with one chunk per commit, holding `COMMITS` commits that each add one value. Its GCs
/// copy what they keep (`keep_in_place_percent` 0) unless `keep_in_place`: every chunk is mostly
/// live, and would otherwise stay in place.
fn writer(path: &Path, keep_in_place: bool) -> (Repo, Vec<Hash>) {
    let options = RepoOptions { chunk_bytes: 1, ..RepoOptions::default() };
    let mut repo = Repo::open_with(path, options).unwrap();
    if !keep_in_place {
        repo.set_gc_policy(GcPolicy { keep_in_place_percent: 0, ..GcPolicy::default() });
    }
    let mut tree = repo.empty_tree();
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..COMMITS {
        tree.add(&["k", &key(i)], value(i)).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, CommitInfo::tezos(i as i64, "c")).unwrap());
    }
    (repo, hashes)
}

fn reader(path: &Path) -> Repo {
    let options = RepoOptions { open_files: 1, cache_bytes: 1, ..RepoOptions::default() };
    Repo::open_read_only_options(path, options).unwrap()
}

#[test]
fn a_reader_reads_a_live_commit_after_a_gc_retired_its_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (mut repo, hashes) = writer(&path, false);
    let head = *hashes.last().unwrap();
    let reader = reader(&path);
    // A tree checked out before the GC, and an older commit's tree, both read lazily later.
    let head_tree = reader.checkout(&head).unwrap();
    let old_tree = reader.checkout(&hashes[1]).unwrap();
    // Reads across the chunks: the pool of one opens and closes them one after the other.
    for i in (1..COMMITS).step_by(2) {
        assert_eq!(head_tree.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    assert!(reader.stats().chunk_file_opens > reader.stats().chunk_files, "nothing was reopened");

    let before = chunk_files(&path);
    repo.gc(&head).unwrap();
    let after = chunk_files(&path);
    assert!(after + (COMMITS as usize) / 2 < before, "the GC retired too few chunks: {before} -> {after}");
    assert_eq!(reader.stats().layout_refreshes, 0);

    // The head's values in retired chunks, through the tree checked out before the GC and through
    // a new checkout: the first read finds its chunk gone, the layout follows the GC, every read
    // is answered.
    for i in (0..COMMITS).step_by(2) {
        assert_eq!(head_tree.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    let again = reader.checkout(&head).unwrap();
    for i in 0..COMMITS {
        assert_eq!(again.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    let refreshes = reader.stats().layout_refreshes;
    assert!(refreshes >= 1, "no read found a retired chunk: the race was not reproduced");
    assert_eq!(reader.commit_details(&head).unwrap().hash, head);

    // A commit the GC collected: a typed error saying so, naming the oldest kept commit.
    match reader.checkout(&hashes[0]) {
        Err(StoreError::Collected { commit, oldest_kept, .. }) => {
            assert_eq!(commit, hashes[0]);
            assert_eq!(oldest_kept, head);
        }
        other => panic!("expected Collected, got {other:?}"),
    }
    // The older tree's directories were collected with its commit: a collected object, not a
    // missing file.
    match old_tree.find(&["k", &key(0)]) {
        Err(TreeError::Load(load)) => match load.reason.downcast_ref::<StoreError>() {
            Some(StoreError::CollectedObject { .. }) => {}
            other => panic!("expected CollectedObject, got {other:?}"),
        },
        other => panic!("expected a load error, got {other:?}"),
    }
    // The writer goes on; the reader's reload, from a layout newer than its state, sees it.
    let mut tree = repo.checkout(&head).unwrap();
    tree.add(&["k", "after"], value(99)).unwrap();
    let next = repo.commit(&tree, &[head], CommitInfo::tezos(99, "after")).unwrap();
    let mut reader = reader;
    assert!(reader.reload().unwrap());
    assert_eq!(reader.head(), Some(next));
    let tree = reader.checkout(&next).unwrap();
    assert_eq!(tree.find(&["k", "after"]).unwrap().unwrap().as_bytes(), value(99));
    assert!(matches!(reader.checkout(&hashes[0]), Err(StoreError::Collected { .. })));
    assert!(reader.fsck().is_clean());
    repo.close().unwrap();
    eprintln!("{before} chunk files before the GC, {after} after; {refreshes} layout refresh(es)");
}

/// fsck through a handle opened before the GC: the check covers the store's new state, with no
/// problem reported for the files or commits the GC retired meanwhile.
#[test]
fn fsck_of_a_handle_opened_before_a_gc_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (mut repo, hashes) = writer(&path, false);
    let head = *hashes.last().unwrap();
    let reader = reader(&path);
    // Every chunk is read once, so that the pool closes all but one of them.
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
    repo.gc(&head).unwrap();
    let report = reader.fsck();
    assert!(report.is_clean(), "{report}");
    assert!(reader.stats().layout_refreshes >= 1, "the check never found a retired chunk");
    repo.close().unwrap();
}

/// The same reader beside a GC that keeps the first chunks in place (each mostly live): their files
/// stay, the reader's chunks become segments of its layout at its next reload, and every read is
/// answered through a pool of one open file.
#[test]
fn a_reader_reads_on_after_a_gc_kept_its_chunks_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (mut repo, hashes) = writer(&path, true);
    let head = *hashes.last().unwrap();
    let mut reader = reader(&path);
    let head_tree = reader.checkout(&head).unwrap();
    let report = repo.gc(&head).unwrap();
    // The first chunks stay (those after them, mostly the directory rewritten at every commit,
    // are copied).
    let kept = report.kept_in_place.clone().unwrap_or_default().0;
    assert!(kept.starts_with("chunk.000000 to "), "{report:?}");
    assert!(path.join("chunk.000000").exists() && path.join("chunk.000001").exists());
    for i in 0..COMMITS {
        assert_eq!(head_tree.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    assert!(reader.reload().unwrap());
    let again = reader.checkout(&head).unwrap();
    for i in 0..COMMITS {
        assert_eq!(again.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    assert!(matches!(reader.checkout(&hashes[0]), Err(StoreError::Collected { .. })));
    assert!(reader.stats().chunk_files_open <= 1, "{:?}", reader.stats());
    assert!(reader.fsck().is_clean());

    // A compaction at the same commit merges the kept chunks into a segment and deletes them. A
    // tree the reader checked out before it, read only now, finds them gone (its pool of one
    // had closed them) and follows the GC: every value is answered.
    let untouched = reader.checkout(&head).unwrap();
    repo.set_gc_policy(GcPolicy { compact_budget_percent: 10_000, ..GcPolicy::default() });
    let report = repo.gc_with(&head, GcOptions { compact: true }).unwrap();
    assert!(report.merged_segments.iter().any(|name| name.starts_with("chunk.000000 to ")), "{report:?}");
    repo.close().unwrap();
    assert!(!path.join("chunk.000000").exists() && !path.join("chunk.000001").exists());
    let refreshes = reader.stats().layout_refreshes;
    for i in 0..COMMITS {
        assert_eq!(untouched.find(&["k", &key(i)]).unwrap().unwrap().as_bytes(), value(i), "key {i}");
    }
    assert!(reader.stats().layout_refreshes > refreshes, "no read found a merged chunk gone");
    assert!(reader.fsck().is_clean());
}
