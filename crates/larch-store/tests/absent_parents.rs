//! Commits whose parents are absent from the store (imported without their history): commit,
//! checkout, commit details, history/log, fsck, reopen, and commits on top of them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash, Tree};
use larch_store::{AbsentParent, Repo, StoreError};

fn info(n: i64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n, format!("lvl {n}"))
}

fn fill(tree: &mut Tree, n: u32) {
    for i in 0..40u32 {
        let value = format!("value {i} at {n} {}", "x".repeat((i % 7) as usize * 10));
        tree.add(&["contracts", &format!("{:08x}", i * 7919), "balance"], value.into_bytes()).unwrap();
    }
    tree.add(&["data", "level"], n.to_le_bytes().to_vec()).unwrap();
}

/// Builds a history of three commits in `dir`; returns their hashes.
fn source_history(dir: &std::path::Path) -> Vec<Hash> {
    let mut repo = Repo::open(dir).unwrap();
    let mut hashes: Vec<Hash> = Vec::new();
    let mut tree = repo.empty_tree();
    for n in 0..3u32 {
        fill(&mut tree, n);
        let parents: Vec<Hash> = hashes.last().copied().into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(i64::from(n))).unwrap());
        tree = repo.checkout(hashes.last().unwrap()).unwrap();
    }
    repo.close().unwrap();
    hashes
}

#[test]
fn a_commit_with_an_absent_parent_has_the_hash_its_source_store_gave_it() {
    let source_dir = tempfile::tempdir().unwrap();
    let hashes = source_history(source_dir.path());
    let source = Repo::open_read_only(source_dir.path()).unwrap();
    let tree = source.checkout(&hashes[2]).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    // Without the explicit API, an unknown parent is refused.
    assert!(
        matches!(repo.commit(&tree, &[hashes[1]], info(2)), Err(StoreError::UnknownParent(p)) if p == hashes[1])
    );
    let imported = repo.commit_with_absent_parents(&tree, &[hashes[1]], info(2)).unwrap();
    assert_eq!(imported, hashes[2], "same hash as the commit made with its parent present");
    assert_eq!(repo.head(), Some(imported));
    repo.close().unwrap();

    let repo = Repo::open(dir.path()).unwrap();
    assert_eq!(repo.head(), Some(imported));
    let details = repo.commit_details(&imported).unwrap();
    assert_eq!(details.parents, vec![hashes[1]]);
    assert_eq!(details.absent_parents, vec![hashes[1]]);
    assert_eq!(details.info, info(2));
    // Checkout works and gives the source's tree.
    let checked_out = repo.checkout(&imported).unwrap();
    assert_eq!(checked_out.hash(), tree.hash());
    let balance = checked_out.find(&["contracts", &format!("{:08x}", 7919 * 3), "balance"]).unwrap();
    let expected = tree.find(&["contracts", &format!("{:08x}", 7919 * 3), "balance"]).unwrap();
    assert_eq!(balance.unwrap().as_bytes(), expected.unwrap().as_bytes());
    // The log stops at the absent parent, and the history says so.
    assert_eq!(repo.log(&imported).unwrap(), vec![imported]);
    let history = repo.history(&imported).unwrap();
    assert_eq!(history.commits, vec![imported]);
    assert_eq!(history.absent_parents, vec![(imported, hashes[1])]);
    // fsck: clean, the absent parent named as such.
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.absent_parents.len(), 1);
    let AbsentParent { commit, parent, .. } = &report.absent_parents[0];
    assert_eq!((*commit, *parent), (imported, hashes[1]));
    assert!(report.to_string().contains("absent parent"), "{report}");
}

#[test]
fn commits_on_top_of_an_imported_commit_link_to_it_and_history_stops_below() {
    let source_dir = tempfile::tempdir().unwrap();
    let hashes = source_history(source_dir.path());
    let source = Repo::open_read_only(source_dir.path()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let tree = source.checkout(&hashes[1]).unwrap();
    let imported = repo.commit_with_absent_parents(&tree, &[hashes[0]], info(1)).unwrap();
    assert_eq!(imported, hashes[1]);
    // The next block, committed normally on top of it (patches against the imported tree).
    let mut tree = repo.checkout(&imported).unwrap();
    fill(&mut tree, 2);
    let next = repo.commit(&tree, &[imported], info(2)).unwrap();
    assert_eq!(next, hashes[2], "the child has the source's hash");
    // A merge of the imported commit with another absent commit, present parent first.
    let other = Hash([9; 32]);
    let merge = repo.commit_with_absent_parents(&tree, &[next, other], info(3)).unwrap();
    assert_eq!(merge, larch_core::schema::commit_hash(&tree.hash(), &[next, other], &info(3)));
    repo.close().unwrap();

    let repo = Repo::open_read_only(dir.path()).unwrap();
    let details = repo.commit_details(&merge).unwrap();
    assert_eq!(details.parents, vec![next, other]);
    assert_eq!(details.absent_parents, vec![other]);
    assert_eq!(repo.commit_details(&next).unwrap().absent_parents, Vec::<Hash>::new());
    let history = repo.history(&merge).unwrap();
    assert_eq!(history.commits, vec![merge, next, imported]);
    assert_eq!(history.absent_parents, vec![(merge, other), (imported, hashes[0])]);
    assert_eq!(repo.log(&merge).unwrap(), vec![merge, next, imported]);
    let report = repo.fsck();
    assert!(report.is_clean(), "{report}");
    let absent: Vec<(Hash, Hash)> = report.absent_parents.iter().map(|a| (a.commit, a.parent)).collect();
    assert_eq!(absent, vec![(imported, hashes[0]), (merge, other)]);
    assert_eq!(repo.checkout(&merge).unwrap().hash(), tree.hash());
}

#[test]
fn the_branch_variant_moves_only_the_named_branch() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let mut tree = repo.empty_tree();
    fill(&mut tree, 0);
    let absent = Hash([7; 32]);
    let hash = repo.commit_on_with_absent_parents(Some("imported"), &tree, &[absent], info(0)).unwrap();
    assert_eq!(repo.branch("imported"), Some(hash));
    assert_eq!(repo.head(), None);
    assert!(repo.fsck().is_clean());
}
