//! The first read of an inode record (a large directory's inner inode or leaf) is sized apart
//! from the other records': once most inodes read are larger than a narrow first read, they are
//! read to the end of their page (one call for most, not two), while the small directories read
//! beside them keep their narrow reads; and every value read that way is the one written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use crate::Repo;
use crate::pack::reader::ReadKind;
use crate::pack::reader::prefetch::STORM_MISSES;
use larch_core::{CommitInfo, Hash};
use std::sync::atomic::Ordering;

/// Accounts under `index`: a directory of three inode levels whose leaves hold ~20 accounts,
/// about 1 KB each (a name, a hash and an offset an entry), where an account is ~60 bytes.
const ACCOUNTS: usize = 20_000;

fn name(i: usize) -> String {
    format!("account{i:06}")
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

/// `(read calls, records read)` of `repo`'s reader so far.
fn reads(repo: &Repo) -> (u64, u64) {
    let counters = &repo.source.reader.counters;
    (counters.read_calls.load(Ordering::Relaxed), counters.records_read.load(Ordering::Relaxed))
}

#[test]
fn inodes_are_read_in_one_call_once_most_are_large_and_directories_stay_narrow() {
    let (dir, commit) = store_of_accounts();
    let repo = Repo::open_read_only(dir.path()).unwrap();
    let tree = repo.checkout(&commit).unwrap();
    // Accounts scattered over the leaves, fewer than a storm of cold reads (no reading ahead).
    let count = (STORM_MISSES as usize) * 3 / 4;
    let order: Vec<usize> = (0..count).map(|i| i * 7_919 % ACCOUNTS).collect();
    let (first, second) = order.split_at(count / 2);
    let find = |i: usize| {
        let value = tree.find(&["index", name(i).as_str(), "balance"]).unwrap();
        assert_eq!(value.map(|v| v.as_bytes().to_vec()), Some(i.to_le_bytes().to_vec()), "account {i}");
    };
    first.iter().for_each(|&i| find(i));
    let reader = &repo.source.reader;
    assert!(reader.reads_wide(ReadKind::Inode), "most inodes read are large: their first reads widen");
    assert!(!reader.reads_wide(ReadKind::Other), "the accounts read are small: their reads stay narrow");
    let (calls_before, records_before) = reads(&repo);
    second.iter().for_each(|&i| find(i));
    let (calls, records) = reads(&repo);
    let (calls, records) = (calls - calls_before, records - records_before);
    // Each find reads its account (one call, a small record) and mostly a leaf not read yet
    // (about 1 KB): with narrow first reads every leaf takes two calls (calls ≈ 1.4 × records);
    // read to the end of its page, only a leaf that crosses into the next page takes a second.
    let second_calls = calls - records;
    println!("second half: {records} records read with {calls} calls ({second_calls} second calls)");
    assert!(records > second.len() as u64, "the second half read its accounts and leaves cold");
    assert!(second_calls * 10 < records, "{second_calls} second calls for {records} records");
    assert!(!reader.reads_wide(ReadKind::Other));
}
