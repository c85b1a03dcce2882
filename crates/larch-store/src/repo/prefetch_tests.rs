//! A storm of cold reads of a large directory's sub-directories is read ahead, a leaf at its
//! second miss; fewer misses are not; a new tree counts from zero, and the leaves still waiting
//! then are dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use crate::Repo;
use crate::pack::reader::prefetch::{Batch, Prefetcher, STORM_MISSES};
use larch_core::{CommitInfo, Entry, Hash, Name, NodeRef, Tree};
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

/// The hash of account `i`'s directory.
fn hash(tree: &Tree, i: usize) -> Hash {
    match tree.find_tree(&["index", name(i).as_str()]).unwrap().unwrap().root() {
        Entry::Node(NodeRef::Stored { hash, .. }) => *hash,
        _ => panic!("account {i} is not a stored directory"),
    }
}

/// A store whose one commit holds [`ACCOUNTS`] accounts under `index`, and that commit.
fn store_of_accounts() -> (tempfile::TempDir, Hash) {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..ACCOUNTS {
        let account = name(i);
        tree.add(&["index", account.as_str(), "balance"], i.to_le_bytes().to_vec()).unwrap();
        tree.add(&["index", account.as_str(), "counter"], vec![1, 2]).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(1, "accounts")).unwrap();
    (dir, commit)
}

/// A reader of the store at `dir`, whose misses count as one storm however long they take (the
/// one-second window of counting is not what these tests test).
fn reader_of(dir: &tempfile::TempDir) -> Repo {
    let reader = Repo::open_read_only(dir.path()).unwrap();
    reader.source.prefetch().set_storm_window(Duration::from_secs(3600));
    reader
}

/// Waits until the prefetching thread is done with `leaves` leaves.
fn wait_for_leaves(prefetch: &Prefetcher, leaves: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while prefetch.leaves_done.load(Ordering::Acquire) < leaves {
        assert!(Instant::now() < deadline, "the prefetching thread did not finish its leaves");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads the balances of `accounts` in order until the prefetching thread has been handed a leaf:
/// how many were read (all of them if none was handed over).
fn read_until_handed_over(tree: &Tree, prefetch: &Prefetcher, accounts: &[usize]) -> usize {
    let sent = prefetch.leaves_sent.load(Ordering::Relaxed);
    for (k, &i) in accounts.iter().enumerate() {
        assert_eq!(balance(tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
        if prefetch.leaves_sent.load(Ordering::Relaxed) > sent {
            return k + 1;
        }
    }
    accounts.len()
}

#[test]
fn a_storm_of_cold_sub_directories_is_read_ahead() {
    let (dir, commit) = store_of_accounts();

    // A reader with a cold cache: each account's directory read is a miss.
    let reader = reader_of(&dir);
    let prefetch = reader.source.prefetch();
    let tree = reader.checkout(&commit).unwrap();
    let order = order();
    let (before, after) = order.split_at(STORM_MISSES as usize);
    for &i in before {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
    }
    // ~6 accounts a leaf: most leaves missed more than once already, and none was handed over.
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 0, "read ahead below the storm's threshold");

    // A storm's miss in a leaf that missed before hands it over, and its other accounts are read
    // ahead: most leaves did, so one of the first misses does.
    let read = read_until_handed_over(&tree, prefetch, after);
    println!("the storm's first leaf handed over after {read} of its misses");
    assert!(read <= 20, "{read} misses of the storm before a leaf was handed over");
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 1, "the storm's first leaf");
    wait_for_leaves(prefetch, 1);
    let read_ahead = prefetch.nodes_read.load(Ordering::Relaxed);
    assert!(read_ahead > 0, "nothing was read ahead");
    let rest = &after[read..];
    let cached = rest.iter().filter(|&&i| reader.source.reader.is_cached(offset(&reader, &tree, i))).count();
    assert_eq!(cached as u64, read_ahead, "the accounts read ahead are in the cache");
    assert_eq!(reader.stats().nodes_read_ahead, read_ahead, "the store's statistics count them");

    // Everything still reads right, storm and all.
    for &i in rest {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
    }
    assert!(prefetch.leaves_sent.load(Ordering::Relaxed) > 1);

    // A checkout counts from zero: the same misses after it hand nothing over until they are a
    // storm again (the leaves' misses before it forgotten with it).
    let cold = reader_of(&dir);
    let prefetch = cold.source.prefetch();
    let tree = cold.checkout(&commit).unwrap();
    for &i in before {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    let tree = cold.checkout(&commit).unwrap();
    for &i in &after[..200] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 0, "a new tree's misses handed leaves over");
}

#[test]
fn a_leaf_is_read_ahead_at_its_second_miss_only() {
    let (dir, commit) = store_of_accounts();
    let reader = reader_of(&dir);
    let prefetch = reader.source.prefetch();
    let store = reader.source.reader.store();
    let tree = reader.checkout(&commit).unwrap();
    let order = order();
    // A leaf of five accounts not read (given to the prefetcher as a tree would give it), named
    // apart from the store's leaves, the first to miss stored first; the first miss of another
    // leaf's account comes before the storm.
    let mut leaf_accounts = order[order.len() - 5..].to_vec();
    leaf_accounts.sort_unstable_by_key(|&i| offset(&reader, &tree, i));
    let early = &order[order.len() - 8..order.len() - 5];
    let leaf_of = |accounts: &[usize], prefix: &str| -> Vec<(Name, Entry)> {
        let entry = |i: usize| tree.find_tree(&["index", name(i).as_str()]).unwrap().unwrap().root().clone();
        accounts
            .iter()
            .enumerate()
            .map(|(k, &i)| (Name::from(format!("{prefix}{k}").as_str()), entry(i)))
            .collect()
    };
    let leaf = leaf_of(&leaf_accounts, "leaf-");
    let early_leaf = leaf_of(early, "early-");
    let at = |i: usize| offset(&reader, &tree, i);
    let uncached = |i: usize| !reader.source.reader.is_cached(at(i));
    prefetch.missed(at(early[0]), &early_leaf, store);

    // Real misses up to the storm's threshold (this early one included): nothing handed over.
    for &i in &order[..STORM_MISSES as usize - 1] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), 0, "read ahead below the storm's threshold");
    let sent = 0;
    let read = prefetch.nodes_read.load(Ordering::Relaxed);

    // The leaf's first miss during the storm hands nothing over, nor the same account again...
    let [a, b, rest @ ..] = leaf_accounts.as_slice() else { unreachable!() };
    prefetch.missed(at(*a), &leaf, store);
    prefetch.missed(at(*a), &leaf, store);
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), sent, "a leaf handed over at its first miss");
    // ... its second account's miss hands over the others, which are read ahead; the two that
    // missed are not (the reading thread reads them). Meanwhile the block rewrote the first
    // account (now in memory, loaded by another reader to keep this one's cache as it was): the
    // leaf's stored sub-directories changed, it is the same leaf...
    let rewritten_node = reader_of(&dir).source.reader.node(at(*a), &hash(&tree, *a)).unwrap();
    let mut rewritten = leaf.clone();
    rewritten.first_mut().unwrap().1 = Entry::Node(NodeRef::Mem(rewritten_node));
    prefetch.missed(at(*b), &rewritten, store);
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), sent + 1, "the leaf's second miss");
    wait_for_leaves(prefetch, sent + 1);
    assert_eq!(prefetch.nodes_read.load(Ordering::Relaxed), read + rest.len() as u64);
    assert!(rest.iter().all(|&i| !uncached(i)), "the leaf's other accounts were not read ahead");
    assert!(uncached(*a) && uncached(*b), "the accounts that missed were read ahead");
    // ... and only once.
    prefetch.missed(at(rest[0]), &leaf, store);
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), sent + 1, "a leaf handed over twice");

    // A first miss before the storm counts: the leaf is handed over at its next miss.
    prefetch.missed(at(early[1]), &early_leaf, store);
    assert_eq!(prefetch.leaves_sent.load(Ordering::Relaxed), sent + 2, "a leaf that missed before the storm");
    wait_for_leaves(prefetch, sent + 2);
    assert!(uncached(early[0]) && uncached(early[1]), "the accounts that missed were read ahead");
    assert!(!uncached(early[2]), "the leaf's third account was not read ahead");
}

#[test]
fn leaves_left_when_their_tree_is_done_are_dropped_unread() {
    let (dir, commit) = store_of_accounts();
    let reader = reader_of(&dir);
    let prefetch = reader.source.prefetch();
    let tree = reader.checkout(&commit).unwrap();
    let order = order();
    // A storm starts the prefetching thread.
    for &i in &order[..STORM_MISSES as usize] {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()));
    }
    let read =
        STORM_MISSES as usize + read_until_handed_over(&tree, prefetch, &order[STORM_MISSES as usize..]);
    wait_for_leaves(prefetch, 1);
    let sender = prefetch.sender.get().cloned().flatten().expect("the prefetching thread runs");
    let (stale, current) = (order[read], order[read + 1]);
    let uncached = |i: usize| !reader.source.reader.is_cached(offset(&reader, &tree, i));
    assert!(uncached(stale) && uncached(current), "accounts {stale} and {current} already read");

    // A leaf handed over in a count that has ended (a new tree started) is dropped unread...
    let ended = prefetch.count.load(Ordering::Relaxed);
    prefetch.new_tree();
    let done = prefetch.leaves_done.load(Ordering::Acquire);
    sender
        .send(Batch { count: ended, nodes: vec![(offset(&reader, &tree, stale), hash(&tree, stale))] })
        .unwrap();
    wait_for_leaves(prefetch, done + 1);
    assert_eq!(prefetch.leaves_dropped.load(Ordering::Relaxed), 1);
    assert!(uncached(stale), "a leaf of an ended count was read");

    // ... and one of the current count is read.
    let count = prefetch.count.load(Ordering::Relaxed);
    sender
        .send(Batch { count, nodes: vec![(offset(&reader, &tree, current), hash(&tree, current))] })
        .unwrap();
    wait_for_leaves(prefetch, done + 2);
    assert_eq!(prefetch.leaves_dropped.load(Ordering::Relaxed), 1);
    assert!(!uncached(current), "a leaf of the current count was not read");
}

#[test]
fn read_ahead_reads_nearby_records_with_few_calls() {
    let (dir, commit) = store_of_accounts();
    let reader = reader_of(&dir);
    let tree = reader.checkout(&commit).unwrap();
    let counters = &reader.source.reader.counters;
    // Every account's directory, in the pack's order (finding them reads the inode nodes only).
    let mut nodes: Vec<(u64, Hash)> =
        (0..ACCOUNTS).map(|i| (offset(&reader, &tree, i), hash(&tree, i))).collect();
    nodes.sort_unstable_by_key(|(offset, _)| *offset);
    assert!(nodes.iter().all(|(offset, _)| !reader.source.reader.is_cached(*offset)));
    let calls = counters.read_calls.load(Ordering::Relaxed);
    let read = reader.source.reader.read_ahead(&nodes);
    let calls = counters.read_calls.load(Ordering::Relaxed) - calls;
    assert_eq!(read, ACCOUNTS as u64);
    // One call per run of 64 KiB of records (a few dozen bytes each), not one per record.
    assert!(calls <= ACCOUNTS as u64 / 50, "{calls} read calls for {ACCOUNTS} records");
    // Each is cached as a record read on its own decodes it: the balances come from the cache.
    let misses = counters.misses.load(Ordering::Relaxed);
    for i in order() {
        assert_eq!(balance(&tree, i), Some(i.to_le_bytes().to_vec()), "account {i}");
    }
    assert_eq!(counters.misses.load(Ordering::Relaxed), misses);
    // A run that ends inside a record, and offsets that are no record: each is read on its own
    // (or fails), nothing wrong enters the cache.
    let fresh = reader_of(&dir);
    let last = *nodes.last().unwrap();
    let bogus = (last.0 + 1, last.1);
    assert_eq!(fresh.source.reader.read_ahead(&[last, bogus]), 1);
    assert!(fresh.source.reader.is_cached(last.0));
    assert!(!fresh.source.reader.is_cached(bogus.0));
}
