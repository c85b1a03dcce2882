//! fsck reads the whole commit index (issue 44): in a collected store, the entries kept only to
//! answer "collected" for old hashes are checked too, so a flipped bit anywhere in `commits` is
//! reported, by the open (the header, the kept entries) or by fsck (the collected entries).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::CommitInfo;
use larch_store::{Repo, RepoOptions, StoreError};
use std::path::Path;

/// A store of 24 commits collected down to its last 6 (small chunks: the GC has chunks to drop).
fn collected_store(dir: &Path) {
    let options = RepoOptions { chunk_bytes: 4 << 10, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir, options).unwrap();
    let mut tree = repo.empty_tree();
    let mut commits = Vec::new();
    for block in 0..24u32 {
        for key in 0..20u32 {
            let value = format!("block {block} key {key} {}", "v".repeat(40)).into_bytes();
            tree.add(&["data", &format!("k{key}")], value).unwrap();
        }
        let parents: Vec<_> = commits.last().copied().into_iter().collect();
        let info = CommitInfo::tezos(1_600_000_000 + i64::from(block), format!("block {block}"));
        commits.push(repo.commit(&tree, &parents, info).unwrap());
        tree = repo.checkout(commits.last().unwrap()).unwrap();
    }
    repo.gc(&commits[18]).unwrap();
    repo.close().unwrap();
    let reader = Repo::open_read_only(dir).unwrap();
    assert_eq!(reader.commit_count(), 6, "the GC kept the last six commits");
    assert!(matches!(reader.checkout(&commits[3]), Err(StoreError::Collected { .. })));
    assert!(larch_store::fsck(dir).unwrap().is_clean());
}

/// Whether opening and checking the store reports a problem.
fn reported(dir: &Path) -> bool {
    match larch_store::fsck(dir) {
        Err(_) => true,
        Ok(report) => !report.is_clean(),
    }
}

#[test]
fn a_flipped_bit_anywhere_in_a_collected_stores_commit_index_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    collected_store(dir.path());
    let path = dir.path().join("commits");
    let original = std::fs::read(&path).unwrap();
    // 16-byte header, then 44-byte entries: 18 collected, 6 kept.
    assert_eq!(original.len(), 16 + 24 * 44);
    let mut missed = Vec::new();
    for at in 0..original.len() {
        let mut flipped = original.clone();
        flipped[at] ^= 1 << (at % 8);
        std::fs::write(&path, &flipped).unwrap();
        if !reported(dir.path()) {
            missed.push(at);
        }
    }
    std::fs::write(&path, &original).unwrap();
    assert!(missed.is_empty(), "flips at these byte offsets of `commits` passed fsck: {missed:?}");
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean(), "the restored index is clean again");
}

#[test]
fn a_collected_entry_naming_a_kept_commit_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    collected_store(dir.path());
    let path = dir.path().join("commits");
    let mut bytes = std::fs::read(&path).unwrap();
    // The first collected entry gets the hash of the first kept one (with a valid checksum).
    let kept = 16 + 18 * 44;
    let hash: [u8; 32] = bytes[kept..kept + 32].try_into().unwrap();
    bytes[16..48].copy_from_slice(&hash);
    let crc = crc32fast::hash(&bytes[16..56]);
    bytes[56..60].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let report = larch_store::fsck(dir.path()).unwrap();
    assert!(report.problems.iter().any(|problem| problem.what.contains("names a kept commit")), "{report}");
}
