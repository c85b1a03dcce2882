//! The writer's cache gives the GC worker its reserve while the GC runs
//! ([`crate::GcPolicy::cache_reserve_bytes`]) and gets it back at the switch; a GC reported
//! waiting for its switch switches at the next commit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use crate::{GcPolicy, Repo, RepoOptions};
use larch_core::{CommitInfo, Hash};

#[test]
fn a_running_gc_takes_its_reserve_from_the_cache_and_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let cache = 8 << 20;
    let mut repo =
        Repo::open_with(dir.path(), RepoOptions { cache_bytes: cache, ..RepoOptions::default() }).unwrap();
    repo.set_gc_policy(GcPolicy { cache_reserve_bytes: 3 << 20, ..GcPolicy::default() });
    let mut tree = repo.empty_tree();
    let mut commits: Vec<Hash> = Vec::new();
    for block in 0..6u64 {
        tree.add(&[format!("b{block}").as_str(), "v"], vec![block as u8; 100]).unwrap();
        let info = CommitInfo { date: block as i64, author: "test".into(), message: String::new() };
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(repo.commit(&tree, &parents, info).unwrap());
    }
    assert_eq!(repo.source.reader.cache_weight(), cache);
    repo.gc_start(&commits[3]).unwrap();
    assert_eq!(repo.source.reader.cache_weight(), cache - (3 << 20), "lowered while the GC runs");
    repo.gc_wait().unwrap();
    assert_eq!(repo.source.reader.cache_weight(), cache, "restored once it switched");
    // The reserve is at most half the cache.
    repo.set_gc_policy(GcPolicy { cache_reserve_bytes: u64::MAX, ..GcPolicy::default() });
    repo.gc_start(&commits[4]).unwrap();
    assert_eq!(repo.source.reader.cache_weight(), cache / 2);
    repo.gc_wait().unwrap();
    assert_eq!(repo.source.reader.cache_weight(), cache);
}

#[test]
fn a_gc_reported_waiting_for_its_switch_switches_at_the_next_commit() {
    // The switch happens at the first commit after the progress says so, every time (a commit
    // finding the worker still ending used to skip the switch, so that what a script wrote
    // depended on timing).
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open_with(dir.path(), RepoOptions::default()).unwrap();
    let mut tree = repo.empty_tree();
    let mut commits: Vec<Hash> = Vec::new();
    let mut commit = |repo: &mut Repo, tree: &mut larch_core::Tree, block: u64| {
        tree.add(&[format!("b{block}").as_str(), "v"], vec![block as u8; 100]).unwrap();
        let info = CommitInfo { date: block as i64, author: "test".into(), message: String::new() };
        let parents: Vec<Hash> = commits.last().copied().into_iter().collect();
        commits.push(repo.commit(tree, &parents, info).unwrap());
        *commits.last().unwrap()
    };
    for block in 0..4 {
        commit(&mut repo, &mut tree, block);
    }
    for round in 0..20u64 {
        let generation = repo.gc_generation();
        let keep = commit(&mut repo, &mut tree, 100 + round);
        repo.gc_start(&keep).unwrap();
        while repo.gc_progress().is_some_and(|p| p.phase != crate::GcPhase::WaitingForSwitch) {
            std::thread::yield_now();
        }
        commit(&mut repo, &mut tree, 200 + round);
        assert!(!repo.gc_running(), "round {round}: the commit did not switch");
        assert_eq!(repo.gc_generation(), generation + 1, "round {round}");
        repo.gc_finish().unwrap();
    }
}
