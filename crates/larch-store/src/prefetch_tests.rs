//! A storm of cold reads of a large directory's sub-directories is read ahead; fewer misses are
//! not; a new tree counts from zero.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use super::STORM_MISSES;
use crate::Repo;
use larch_core::{CommitInfo, Entry, NodeRef, Tree};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sub-directories of the large directory `index`: enough for a storm and as many again.
const ACCOUNTS: usize = 2 * STORM_MISSES as usize + 2_000;

fn name(i: usize) -> String {
    format!("account{i:06}")
}

/// The order the accounts are read in: a fixed permutation scattering them over the leaves.
fn order() -> Vec<usize> {
    (0..ACCOUNTS).map(|i| i * 7_919 % ACCOUNTS).collect()
}

fn balance(tree: &Tree, i: usize) -> Option<Vec<u8>> {
    tree.find(&["index", name(i).as_str(), "balance"]).unwrap().map(|value| value.as_bytes().to_vec())
}

/// The pack offset of account `i`'s directory (not loaded).
fn offset(reader: &Repo, tree: &Tree, i: usize) -> u64 {
    let sub = tree.find_tree(&["index", name(i).as_str()]).unwrap().unwrap();
    match sub.root() {
        Entry::Node(NodeRef::Stored { key, .. }) => key.offset_in(reader.source.reader.store()).unwrap(),
        _ => panic!("account {i} is not a stored directory"),
    }
}

#[test]
fn a_storm_of_cold_sub_directories_is_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..ACCOUNTS {
        let account = name(i);
        tree.add(&["index", account.as_str(), "balance"], i.to_le_bytes().to_vec()).unwrap();
        tree.add(&["index", account.as_str(), "counter"], vec![1, 2]).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(1, "accounts")).unwrap();
    drop(repo);

    // A reader with a cold cache: each account's directory read is a miss.
    let reader = Repo::open_read_only(dir.path()).unwrap();
    let prefetch = reader.source.prefetch();
    let tree = reader.checkout(&commit).unwrap();
    let order = order();
    let (before, after) = order.split_at(STORM_MISSES as usize);
    for &i in before {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
    }
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 0, "read ahead below the storm's threshold");

    // The next miss is a storm's: its leaf is handed over, and its other accounts read ahead.
    let next = after[0];
    assert_eq!(balance(&tree, next), Some(next.to_le_bytes().to_vec()));
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 1, "the storm's first leaf");
    let deadline = Instant::now() + Duration::from_secs(30);
    while prefetch.leaves_done.load(Ordering::Acquire) < 1 {
        assert!(Instant::now() < deadline, "the prefetching thread did not finish its leaf");
        std::thread::sleep(Duration::from_millis(5));
    }
    let read_ahead = prefetch.nodes_read.load(Ordering::Relaxed);
    assert!(read_ahead > 0, "nothing was read ahead");
    let cached =
        after[1..].iter().filter(|&&i| reader.source.reader.is_cached(offset(&reader, &tree, i))).count();
    assert_eq!(cached as u64, read_ahead, "the accounts read ahead are in the cache");
    assert_eq!(reader.stats().nodes_read_ahead, read_ahead, "the store's statistics count them");

    // Everything still reads right, storm and all.
    for &i in &after[1..] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
    }
    assert!(prefetch.leaves_sent.load(Ordering::Relaxed) > 1);

    // A checkout counts from zero: misses after it hand nothing over until they are a storm.
    let cold = Repo::open_read_only(dir.path()).unwrap();
    let prefetch = cold.source.prefetch();
    let tree = cold.checkout(&commit).unwrap();
    for &i in &order[..=STORM_MISSES as usize] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 1, "the storm's first leaf");
    let tree = cold.checkout(&commit).unwrap();
    for &i in &after[1..200] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 1, "a new tree's misses handed leaves over");
}
