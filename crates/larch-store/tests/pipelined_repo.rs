//! `PipelinedRepo`: commits encoded, written and published on a commit thread while the caller
//! goes on from the committed tree in memory. Against a plain `Repo` fed the same random script
//! (each block continuing from a checkout of the previous commit, as a node and the replay do):
//! the same commit hashes, the same contents, a clean store of about the same size; a tree kept
//! across many commits does not keep the nodes of old commits in memory; a failure on the commit
//! thread is returned by the next call; GC through the wrapper; a pipelined writer primes the
//! cache with less of each commit, and reports its reads as they happen.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{contents_of, info, random_op};
use larch_core::{ContextRepo, Entry, Hash, NodeBody, NodeRef, Tree};
use larch_store::{PipelinedRepo, Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::{Model, seeded_rng};
use std::path::Path;

fn options() -> RepoOptions {
    RepoOptions { sync: SyncPolicy::Commit, cache_bytes: 4 << 20, ..RepoOptions::default() }
}

/// Runs `blocks` blocks of the seeded script through `repo` (a checkout of each commit starts
/// the next block); returns the commit hashes and the model after each.
fn run_script<R: ContextRepo>(repo: &mut R, seed: u64, blocks: u64) -> Vec<(Hash, Model)> {
    let (mut rng, _) = seeded_rng("pipelined_repo", seed);
    let mut tree = repo.empty_tree();
    let mut model = Model::new();
    let mut out: Vec<(Hash, Model)> = Vec::new();
    for block in 0..blocks {
        for _ in 0..40 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let parents: Vec<Hash> = out.last().map(|(hash, _)| *hash).into_iter().collect();
        let hash = repo.commit(&tree, &parents, info(block)).unwrap();
        out.push((hash, model.clone()));
        tree = repo.checkout(&hash).unwrap();
    }
    out
}

fn store_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().metadata().unwrap().len()).sum()
}

#[test]
fn the_same_commits_and_contents_as_a_plain_writer() {
    for (seed, depth) in [(1, 1), (2, 1), (3, 1), (1, 3), (2, 16)] {
        let plain_dir = tempfile::tempdir().unwrap();
        let mut plain = Repo::open_with(plain_dir.path(), options()).unwrap();
        let expected = run_script(&mut plain, seed, 30);
        plain.close().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let mut pipelined =
            PipelinedRepo::with_depth(Repo::open_with(dir.path(), options()).unwrap(), depth).unwrap();
        let got = run_script(&mut pipelined, seed, 30);
        pipelined.wait_durable().unwrap();
        pipelined.into_inner().unwrap().close().unwrap();
        let hashes = |run: &[(Hash, Model)]| run.iter().map(|(hash, _)| *hash).collect::<Vec<_>>();
        assert_eq!(hashes(&got), hashes(&expected), "seed {seed} depth {depth}");

        let repo = Repo::open(dir.path()).unwrap();
        assert_eq!(repo.head(), got.last().map(|(hash, _)| *hash), "seed {seed} depth {depth}");
        assert_eq!(repo.commit_count(), got.len());
        for (hash, model) in &got {
            assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "seed {seed} depth {depth}");
        }
        assert!(repo.fsck().is_clean(), "seed {seed} depth {depth}");
        // Values moved under new names in memory may be written again: a little larger at most.
        let (size, plain_size) = (store_bytes(dir.path()), store_bytes(plain_dir.path()));
        assert!(
            size * 100 <= plain_size * 102,
            "seed {seed} depth {depth}: {size} bytes against {plain_size}"
        );
    }
}

/// The in-memory nodes reachable from `tree` (through in-memory links only).
fn nodes_in_memory(tree: &Tree) -> usize {
    in_memory(tree).0
}

/// The in-memory nodes reachable from `tree` (through in-memory links only), and how many of them
/// are inode trees.
fn in_memory(tree: &Tree) -> (usize, usize) {
    let mut stack: Vec<std::sync::Arc<larch_core::Node>> = match tree.root() {
        Entry::Node(NodeRef::Mem(node)) => vec![node.clone()],
        _ => vec![],
    };
    let (mut count, mut inode_trees) = (0, 0);
    while let Some(node) = stack.pop() {
        count += 1;
        let mut push = |child: &NodeRef| {
            if let NodeRef::Mem(child) = child {
                stack.push(child.clone());
            }
        };
        match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                for (_, entry) in entries {
                    if let Entry::Node(child) = entry {
                        push(child);
                    }
                }
            }
            NodeBody::Tree(inode) => {
                inode_trees += 1;
                inode.children.iter().for_each(|(_, child)| push(child));
            }
        }
    }
    (count, inode_trees)
}

/// Runs 40 small blocks after a large first commit (3,000 values under 60 directories) through a
/// pipelined writer keeping the nodes of its last `window` bytes in memory; returns the in-memory
/// nodes of the first commit's tree and the most reachable in memory from the trees of blocks 4
/// on.
fn nodes_in_memory_over_blocks(window: u64) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    let mut repo = PipelinedRepo::new(repo).unwrap().with_recent_in_memory(window);
    let mut tree = repo.empty_tree();
    for i in 0..3000 {
        tree.add(&["data", &format!("d{:02}", i % 60), &format!("k{i:05}")], vec![1; 40]).unwrap();
    }
    let mut parent = repo.commit(&tree, &[], info(0)).unwrap();
    let first_size = nodes_in_memory(&tree);
    assert!(first_size > 60, "{first_size} nodes");
    let mut most = 0;
    for block in 1..40u64 {
        tree = repo.checkout(&parent).unwrap();
        // A few changes per block, in a few directories.
        for j in 0..5 {
            let i = (block * 37 + j * 11) % 3000;
            tree.add(&["data", &format!("d{:02}", i % 60), &format!("k{i:05}")], vec![2; 40]).unwrap();
        }
        parent = repo.commit(&tree, &[parent], info(block)).unwrap();
        // The first blocks may still reach the first commit's nodes (copied while it was in
        // flight, before its nodes had keys): at most one level of the tree per block.
        if block >= 4 {
            most = most.max(nodes_in_memory(&tree));
        }
    }
    repo.wait_durable().unwrap();
    let repo = repo.into_inner().unwrap();
    assert_eq!(repo.checkout(&parent).unwrap().length(&["data"]).unwrap(), 60);
    assert!(repo.fsck().is_clean());
    (first_size, most)
}

#[test]
fn a_tree_carried_from_commit_to_commit_keeps_only_recent_nodes_in_memory() {
    // Each block rewrites at most ~7 nodes (~1 KB of records); without detaching, the first
    // commit's 60+ nodes would stay reachable in memory from every later tree. With a window of
    // 2 KiB, only the last few blocks' directories stay.
    for window in [0, 2 << 10] {
        let (first_size, most) = nodes_in_memory_over_blocks(window);
        assert!(
            most < first_size / 2,
            "window {window}: {most} nodes in memory (the first commit had {first_size})"
        );
    }
    // The default window (1 MiB) holds everything this store wrote: the first commit's
    // directories stay in memory, read by later blocks without a lookup.
    let (first_size, most) = nodes_in_memory_over_blocks(larch_store::testing::RECENT_IN_MEMORY);
    assert!(most >= 60, "{most} nodes in memory (the first commit had {first_size})");
}

/// Runs 30 blocks, each changing 3 values of a directory of 3,000 entries written by a first
/// commit (an inode trie: its root and 32 inner inode trees above its leaves), through a pipelined
/// writer keeping no recent node in memory but the inode trees of its last `inodes_window` bytes
/// (`None`: its default); returns the most inode trees reachable in memory from the trees of
/// blocks 4 on.
fn inode_trees_in_memory_over_blocks(inodes_window: Option<u64>) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    let mut repo = PipelinedRepo::new(repo).unwrap().with_recent_in_memory(0);
    if let Some(window) = inodes_window {
        repo = repo.with_recent_inodes_in_memory(window);
    }
    let mut tree = repo.empty_tree();
    for i in 0..3000 {
        tree.add(&["big", &format!("k{i:05}")], vec![1; 40]).unwrap();
    }
    let mut parent = repo.commit(&tree, &[], info(0)).unwrap();
    assert_eq!(in_memory(&tree).1, 33, "the first commit's inode trees");
    let mut most = 0;
    for block in 1..30u64 {
        tree = repo.checkout(&parent).unwrap();
        for j in 0..3 {
            let i = (block * 101 + j * 997) % 3000;
            tree.add(&["big", &format!("k{i:05}")], vec![2; 40]).unwrap();
        }
        parent = repo.commit(&tree, &[parent], info(block)).unwrap();
        if block >= 4 {
            most = most.max(in_memory(&tree).1);
        }
    }
    repo.wait_durable().unwrap();
    let repo = repo.into_inner().unwrap();
    assert_eq!(repo.checkout(&parent).unwrap().length(&["big"]).unwrap(), 3000);
    assert!(repo.fsck().is_clean());
    most
}

#[test]
fn inode_trees_stay_in_memory_within_their_own_window() {
    // The default window (16 MiB) holds everything this store wrote: every inode tree of the
    // directory stays reachable in memory, though no other stored node does.
    let kept = inode_trees_in_memory_over_blocks(None);
    assert_eq!(kept, 33, "inode trees in memory with the default window");
    // Without it, only the few copied by the blocks still in flight.
    let without = inode_trees_in_memory_over_blocks(Some(0));
    assert!(without <= 10, "{without} inode trees in memory without the window");
}

/// A pipelined writer with a first durable commit, whose control file is then replaced under it
/// (its next publish refuses), and a second commit handed to the commit thread, which fails.
/// Returns the writer, its tree and both commits.
fn writer_whose_second_commit_fails(dir: &Path) -> (PipelinedRepo, Tree, Hash, Hash) {
    let mut repo = PipelinedRepo::new(Repo::open_with(dir, options()).unwrap()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    repo.wait_durable().unwrap();
    let control = dir.join("control");
    std::fs::copy(&control, dir.join("control.copy")).unwrap();
    std::fs::rename(dir.join("control.copy"), &control).unwrap();
    tree.add(&["b"], b"2".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(1)).unwrap();
    (repo, tree, first, second)
}

#[test]
fn a_failure_on_the_commit_thread_is_returned_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut tree, first, second) = writer_whose_second_commit_fails(dir.path());
    tree.add(&["c"], b"3".to_vec()).unwrap();
    let error = repo.commit(&tree, &[second], info(2)).unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
    assert!(matches!(repo.commit(&tree, &[second], info(2)), Err(StoreError::Poisoned)));
    assert!(matches!(repo.wait_durable(), Err(StoreError::Poisoned)));
    // The failed commit is not served from memory.
    assert!(repo.checkout(&second).is_err());
    drop(repo);
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(first));
}

#[test]
fn a_failed_commit_is_not_checked_out_from_memory_once_the_thread_reported_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, _, _, second) = writer_whose_second_commit_fails(dir.path());
    // Checkouts alone (no commit, no wait): once the commit thread has failed, they say so.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let error = loop {
        match repo.checkout(&second) {
            Ok(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Ok(_) => panic!("the failed commit was still served from memory"),
            Err(e) => break e,
        }
    };
    assert!(error.to_string().contains("replaced"), "{error}");
    assert!(matches!(repo.checkout(&second), Err(StoreError::Poisoned)));
    // The repository is handed back after a failure already reported.
    let repo = repo.into_inner().unwrap();
    assert_eq!(repo.commit_count(), 1);
}

#[test]
fn an_unknown_parent_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = PipelinedRepo::new(Repo::open_with(dir.path(), options()).unwrap()).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let bogus = Hash([7; 32]);
    assert!(matches!(repo.commit(&tree, &[bogus], info(0)), Err(StoreError::UnknownParent(h)) if h == bogus));
    // The wrapper is still usable.
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    assert_eq!(repo.checkout(&first).unwrap().find(&["a"]).unwrap().unwrap().as_bytes(), b"1");
    assert!(matches!(repo.checkout(&bogus), Err(StoreError::UnknownCommit(_))));
}

#[test]
fn garbage_collection_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = PipelinedRepo::new(Repo::open_with(dir.path(), options()).unwrap()).unwrap();
    let run = run_script(&mut repo, 9, 12);
    assert!(ContextRepo::gc_start(&mut repo, &run[8].0).unwrap());
    let summary = ContextRepo::gc_finish(&mut repo, true).unwrap().expect("a finished GC");
    assert!(!summary.abandoned);
    assert!(!ContextRepo::gc_running(&repo));
    let repo = repo.into_inner().unwrap();
    assert!(repo.checkout(&run[2].0).is_err(), "collected");
    for (hash, model) in &run[8..] {
        assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values);
    }
    assert!(repo.fsck().is_clean());
}

#[test]
fn commits_with_expected_hashes_are_those_of_a_plain_writer() {
    for (seed, depth) in [(4, 1), (5, 3)] {
        let plain_dir = tempfile::tempdir().unwrap();
        let mut plain = Repo::open_with(plain_dir.path(), options()).unwrap();
        let expected = run_script(&mut plain, seed, 20);
        plain.close().unwrap();

        // The same script, each commit made with the plain writer's hash as the expected one (the
        // tree is hashed on the commit thread), each block starting from a checkout of it.
        let dir = tempfile::tempdir().unwrap();
        let mut repo =
            PipelinedRepo::with_depth(Repo::open_with(dir.path(), options()).unwrap(), depth).unwrap();
        let (mut rng, _) = seeded_rng("pipelined_repo", seed);
        let mut tree = repo.empty_tree();
        let mut model = Model::new();
        let mut parents = Vec::new();
        for (block, (hash, _)) in expected.iter().enumerate() {
            for _ in 0..40 {
                random_op(&mut rng, &mut tree, &mut model);
            }
            let returned = repo.commit_expected(&tree, &parents, info(block as u64), hash).unwrap();
            assert_eq!(returned, *hash);
            parents = vec![*hash];
            tree = repo.checkout(hash).unwrap();
        }
        repo.wait_durable().unwrap();
        repo.into_inner().unwrap().close().unwrap();

        let repo = Repo::open(dir.path()).unwrap();
        assert_eq!(repo.head(), expected.last().map(|(hash, _)| *hash), "seed {seed} depth {depth}");
        assert_eq!(repo.commit_count(), expected.len());
        for (hash, model) in &expected {
            assert_eq!(contents_of(&repo.checkout(hash).unwrap()), model.values, "seed {seed} depth {depth}");
        }
        assert!(repo.fsck().is_clean(), "seed {seed} depth {depth}");
    }
}

/// A pipelined writer of `depth` over `dir` with a first commit, and a second one handed over with
/// a wrong expected hash (returned at once: the hash is checked beside the caller). Returns the
/// writer, its tree, the second commit's actual hash and the wrong one.
fn second_commit_with_a_wrong_hash(dir: &Path, depth: usize) -> (PipelinedRepo, Tree, Hash, Hash) {
    let mut repo = PipelinedRepo::with_depth(Repo::open_with(dir, options()).unwrap(), depth).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a"], b"1".to_vec()).unwrap();
    let first = repo.commit(&tree, &[], info(0)).unwrap();
    tree.add(&["b"], b"2".to_vec()).unwrap();
    let actual = larch_core::schema::commit_hash(&tree.hash(), &[first], &info(1));
    let wrong = Hash([9; 32]);
    assert_eq!(repo.commit_expected(&tree, &[first], info(1), &wrong).unwrap(), wrong);
    (repo, tree, actual, wrong)
}

#[test]
fn a_commit_with_another_hash_than_expected_fails_the_next_call_and_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut tree, actual, wrong) = second_commit_with_a_wrong_hash(dir.path(), 1);
    tree.add(&["c"], b"3".to_vec()).unwrap();
    let error = repo.commit(&tree, &[wrong], info(2)).unwrap_err();
    assert!(
        matches!(error, StoreError::UnexpectedCommit { expected, actual: made } if expected == wrong && made == actual),
        "{error}"
    );
    assert!(matches!(repo.wait_durable(), Err(StoreError::Poisoned)));
    assert!(repo.checkout(&wrong).is_err());
    drop(repo);
    // The commit made is in the store (under its own hash); nothing after it.
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(actual));
    assert_eq!(repo.commit_count(), 2);
}

#[test]
fn with_depth_n_every_commit_but_the_last_n_is_published_when_commit_returns() {
    for depth in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let mut repo =
            PipelinedRepo::with_depth(Repo::open_with(dir.path(), options()).unwrap(), depth).unwrap();
        let mut tree = repo.empty_tree();
        let mut parents = Vec::new();
        for block in 0..12u64 {
            for i in 0..50 {
                tree.add(&["d", &format!("{}", (block * 50 + i) % 300)], vec![block as u8; 40]).unwrap();
            }
            let hash = repo.commit(&tree, &parents, info(block)).unwrap();
            // Commits 0..=block were handed over; at most `depth` of them are still in flight,
            // so a reader opened now sees at least the others.
            let reader = Repo::open_read_only(dir.path()).unwrap();
            let published = reader.commit_count() as u64;
            assert!(
                published + depth as u64 > block,
                "depth {depth}: {published} commits published after commit {block}"
            );
            parents = vec![hash];
            tree = repo.checkout(&hash).unwrap();
        }
        repo.wait_durable().unwrap();
        assert_eq!(Repo::open_read_only(dir.path()).unwrap().commit_count(), 12, "depth {depth}");
    }
}

#[test]
fn with_several_commits_in_flight_a_failure_stops_the_ones_queued_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, mut tree, actual, wrong) = second_commit_with_a_wrong_hash(dir.path(), 4);
    // Commits on top of the wrong hash, handed over while it is in flight, until the failure is
    // reported: once, as the unexpected commit, then the writer is poisoned.
    let mut parent = wrong;
    let mut errors = Vec::new();
    for block in 2..12u64 {
        tree.add(&["c", &block.to_string()], b"3".to_vec()).unwrap();
        match repo.commit(&tree, &[parent], info(block)) {
            Ok(hash) => {
                assert!(errors.is_empty(), "a commit accepted after a reported failure");
                parent = hash;
            }
            Err(error) => errors.push(error),
        }
    }
    assert!(
        matches!(errors.first(), Some(StoreError::UnexpectedCommit { expected, actual: made }) if *expected == wrong && *made == actual),
        "{errors:?}"
    );
    assert!(errors.iter().skip(1).all(|error| matches!(error, StoreError::Poisoned)), "{errors:?}");
    assert!(matches!(repo.wait_durable(), Err(StoreError::Poisoned)));
    drop(repo);
    // The commit made is in the store (under its own hash); none of those queued behind it.
    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(actual));
    assert_eq!(repo.commit_count(), 2);
    assert!(repo.fsck().is_clean());
}

#[test]
fn a_pipelined_writer_primes_the_cache_with_less_of_its_commits() {
    // A commit keeps at most 1/128 of the cache budget of the records it wrote to prime the cache
    // with; a pipelined writer 1/1024 (its commit thread is the busier one), and the plain writer
    // it gives back 1/128 again. A fresh store loads nothing: the cache holds what was primed.
    let cache = 16u64 << 20;
    let options = RepoOptions { cache_bytes: cache, ..options() };
    let big_tree = |repo: &dyn Fn() -> Tree, prefix: &str| {
        let mut tree = repo();
        for dir in 0..60 {
            for key in 0..40 {
                let path = [format!("{prefix}{dir}"), format!("key{key}")];
                tree.add(&path, vec![dir as u8; 8]).unwrap();
            }
        }
        tree
    };
    let dir = tempfile::tempdir().unwrap();
    let mut plain = Repo::open_with(dir.path().join("plain"), options.clone()).unwrap();
    let tree = big_tree(&|| plain.empty_tree(), "d");
    plain.commit(&tree, &[], info(0)).unwrap();
    let primed = plain.stats().cache_bytes;
    assert!(primed > cache / 1024 && primed <= cache / 128, "plain writer primed {primed} bytes");

    let repo = Repo::open_with(dir.path().join("pipelined"), options).unwrap();
    let mut pipelined = PipelinedRepo::with_depth(repo, 2).unwrap();
    let tree = big_tree(&|| pipelined.empty_tree(), "d");
    let first = pipelined.commit(&tree, &[], info(0)).unwrap();
    pipelined.wait_durable().unwrap();
    let mut repo = pipelined.into_inner().unwrap();
    let primed = repo.stats().cache_bytes;
    assert!(primed > 0 && primed <= cache / 1024, "pipelined writer primed {primed} bytes");

    let tree = big_tree(&|| repo.empty_tree(), "e");
    repo.commit(&tree, &[first], info(1)).unwrap();
    // (The commit may load a node of its parent: a few KiB.)
    let more = repo.stats().cache_bytes.saturating_sub(primed);
    assert!(more > 2 * cache / 1024, "the plain writer given back primed {more} bytes");
}

#[test]
fn a_pipelined_writer_reports_its_reads_as_they_happen() {
    // The read counters are the store's own, live: reads of a checkout show at once, while a
    // commit is in flight, not after the next commit the commit thread finishes; the write
    // counters arrive once the commit is reported.
    let dir = tempfile::tempdir().unwrap();
    let mut plain = Repo::open_with(dir.path(), options()).unwrap();
    let mut tree = plain.empty_tree();
    for dir in 0..50 {
        tree.add(&[format!("d{dir}"), "key".to_string()], vec![dir as u8; 8]).unwrap();
    }
    let first = plain.commit(&tree, &[], info(0)).unwrap();
    drop(plain);

    let repo = Repo::open_with(dir.path(), options()).unwrap();
    let mut pipelined = PipelinedRepo::with_depth(repo, 4).unwrap();
    let before = ContextRepo::stats(&pipelined);
    let mut tree = pipelined.checkout(&first).unwrap();
    tree.add(&["new".to_string()], b"value".to_vec()).unwrap();
    let second = pipelined.commit(&tree, &[first], info(1)).unwrap();
    let tree = pipelined.checkout(&second).unwrap();
    for dir in 0..50 {
        let found = tree.find(&[format!("d{dir}"), "key".to_string()]).unwrap().unwrap();
        assert_eq!(found.as_bytes(), vec![dir as u8; 8].as_slice());
    }
    let after = ContextRepo::stats(&pipelined);
    let missed = after.cache_misses.unwrap() - before.cache_misses.unwrap();
    assert!(missed >= 50, "{missed} misses counted for 50 cold directories");
    assert!(after.cache_bytes.unwrap() > before.cache_bytes.unwrap(), "{before:?} {after:?}");
    pipelined.wait_durable().unwrap();
    let written = ContextRepo::stats(&pipelined);
    assert!(written.objects_written.unwrap() > before.objects_written.unwrap(), "{before:?} {written:?}");
}

/// In-memory nodes of the tree a pipelined writer checks out after committing a tree of
/// `dirs` one-value directories, hashed by the caller first when `hashed`.
fn nodes_checked_out_after(dirs: usize, hashed: bool) -> usize {
    nodes_checked_out_after_edits(dirs, hashed, false)
}

/// [`nodes_checked_out_after`], with one more directory added after the caller's hash when
/// `edited_after_hash` (the root unhashed again, its rewritten nodes below hashed).
fn nodes_checked_out_after_edits(dirs: usize, hashed: bool, edited_after_hash: bool) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = PipelinedRepo::new(Repo::open_with(dir.path(), options()).unwrap()).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..dirs {
        tree.add(&[format!("d{i:06}"), "v".to_string()], vec![1u8, 2]).unwrap();
    }
    let mut expected = tree.hash();
    if edited_after_hash {
        let mut whole = repo.empty_tree();
        for i in 0..dirs {
            whole.add(&[format!("d{i:06}"), "v".to_string()], vec![1u8, 2]).unwrap();
        }
        whole.add(&["extra".to_string(), "v".to_string()], vec![3u8]).unwrap();
        expected = whole.hash();
        tree.add(&["extra".to_string(), "v".to_string()], vec![3u8]).unwrap();
    }
    let mut tree = if hashed {
        tree
    } else {
        // The same tree, rebuilt without its hashes.
        let mut fresh = repo.empty_tree();
        for i in 0..dirs {
            fresh.add(&[format!("d{i:06}"), "v".to_string()], vec![1u8, 2]).unwrap();
        }
        fresh
    };
    let hash = repo.commit(&tree, &[], info(0)).unwrap();
    tree = repo.checkout(&hash).unwrap();
    let nodes = nodes_in_memory(&tree);
    assert_eq!(tree.hash(), expected);
    drop(tree);
    repo.into_inner().unwrap().close().unwrap();
    nodes
}

#[test]
fn a_huge_commit_hashed_by_its_caller_is_checked_out_from_the_store() {
    // 70,000 directories rewrite more than the 65,536 nodes past which a commit is not served
    // from memory: its checkout reads the store (no node in memory), whether the caller hashed
    // the tree before the commit (a streamed generator does) or not.
    assert_eq!(nodes_checked_out_after(70_000, false), 0);
    assert_eq!(nodes_checked_out_after(70_000, true), 0);
    // A small commit is served from memory, hashed or not.
    assert!(nodes_checked_out_after(2_000, true) > 2_000);
    assert!(nodes_checked_out_after(2_000, false) > 2_000);
    // Hashed, then edited once more: the root is unhashed again, but the rewritten nodes below
    // it, hashed, not written yet, still make the commit huge.
    assert_eq!(nodes_checked_out_after_edits(70_000, true, true), 0);
}

/// Commits a first tree of `dirs` one-value directories (a large burst's worth of rewritten
/// nodes, carried in memory), then `blocks` blocks changing two of them each, through `repo`;
/// returns the commit hashes and the in-memory nodes of
/// the last block's checked-out tree.
fn carried_after_a_large_commit<R: ContextRepo>(
    repo: &mut R,
    dirs: usize,
    blocks: usize,
) -> (Vec<Hash>, usize) {
    let mut tree = repo.empty_tree();
    for i in 0..dirs {
        tree.add(&[format!("d{i:06}"), "v".to_string()], vec![1u8, 2]).unwrap();
    }
    let mut hashes = vec![repo.commit(&tree, &[], info(0)).unwrap()];
    for block in 1..=blocks {
        tree = repo.checkout(&hashes[block - 1]).unwrap();
        for j in 0..2 {
            let i = (block * 7919 + j * 104_729) % dirs;
            tree.add(&[format!("d{i:06}"), "v".to_string()], vec![block as u8, 3]).unwrap();
        }
        let parent = hashes[block - 1];
        hashes.push(repo.commit(&tree, &[parent], info(block as u64)).unwrap());
    }
    let tree = repo.checkout(hashes.last().unwrap()).unwrap();
    (hashes, tree.in_memory_nodes())
}

#[test]
fn a_large_commit_carried_in_memory_is_given_back_once_written() {
    // 20,000 directories rewrite more nodes than the 16,384 past which the carried tree gives back
    // its stored nodes, fewer than the 65,536 past which a commit is not carried at all.
    let (dirs, blocks) = (20_000, 12);
    let plain_dir = tempfile::tempdir().unwrap();
    let mut plain = Repo::open_with(plain_dir.path(), options()).unwrap();
    let (expected, _) = carried_after_a_large_commit(&mut plain, dirs, blocks);
    plain.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::open_with(dir.path(), options()).unwrap();
    let mut repo = PipelinedRepo::with_depth(repo, 4).unwrap().with_recent_in_memory(0);
    let (hashes, nodes) = carried_after_a_large_commit(&mut repo, dirs, blocks);
    assert_eq!(hashes, expected);
    // Without giving them back, the first commit's directories stay reachable in memory from
    // every later tree, below the inode trees that the default window keeps in memory (copied
    // again only when one of their 600-odd directories changes): over 12,000 nodes after 12
    // blocks. Given back, only those 33 inode trees and the last blocks' changes are left.
    assert!(nodes < 1_000, "{nodes} nodes in memory after {blocks} blocks");
    repo.wait_durable().unwrap();
    let repo = repo.into_inner().unwrap();
    let head = repo.checkout(hashes.last().unwrap()).unwrap();
    assert_eq!(head.length::<&str>(&[]).unwrap(), dirs as u64);
    assert!(repo.fsck().is_clean());
    // Nothing written twice: the same records as the plain writer's (to within the patches a
    // pipelined writer makes differently).
    let (pipelined_bytes, plain_bytes) = (store_bytes(dir.path()), store_bytes(plain_dir.path()));
    assert!(pipelined_bytes * 10 < plain_bytes * 11, "{pipelined_bytes} bytes against {plain_bytes}");
    repo.close().unwrap();
}
