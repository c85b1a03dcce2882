//! Shared parts of the GC crash simulations (`gc_crash_sim`, `gc_compact_crash_sim`,
//! `gc_slices_crash_sim`): the store options, the survival modes every cut is rebooted in, where
//! the reopened head stands among the script's commits, the check that no file outside the state
//! is left, and the new commits and GC a recovered store must take.

use super::info;
use larch_core::{Hash, Tree};
use larch_store::testing::fault::Survival;
use larch_store::{Repo, RepoOptions, StoreError, SyncPolicy};
use larch_testkit::Model;

/// 1 KiB chunks (every commit rolls), durable commits, a small cache.
pub fn crash_options() -> RepoOptions {
    RepoOptions {
        sync: SyncPolicy::Commit,
        chunk_bytes: 1024,
        cache_bytes: 1 << 20,
        ..RepoOptions::default()
    }
}

/// What survives a reboot: the written bytes, the durable ones, partial page losses.
pub const SURVIVALS: [Survival; 5] = [
    Survival::Written,
    Survival::Durable,
    Survival::Pages(1),
    Survival::Pages(7920),
    Survival::PagesZeroed(3),
];

/// How many of the script's commits `all` the reopened store holds (its head's position + 1),
/// checked against the `acked` commits of the cut run: at most the last one lost, at most one
/// more (written, not acknowledged).
pub fn head_count(repo: &Repo, all: &[(Hash, Model)], acked: usize, what: &str) -> usize {
    let count = match repo.head() {
        None => 0,
        Some(head) => all.iter().position(|(hash, _)| *hash == head).expect("a script commit") + 1,
    };
    assert!(
        count + 1 >= acked && count <= (acked + 1).min(all.len()),
        "{what}: head is commit {count}, {acked} acknowledged"
    );
    count
}

/// No chunk file below the state's first live chunk (`names`: the directory's files) but a
/// chunk the state keeps in place (named in its segment list).
pub fn assert_no_chunk_below_first(repo: &Repo, names: &[String], what: &str) {
    let first = repo.chunk_files().first().map(|(name, _, _)| name.clone()).unwrap();
    let kept: Vec<String> = repo.segment_files().into_iter().map(|(name, ..)| name).collect();
    assert!(
        names
            .iter()
            .filter(|name| name.starts_with("chunk."))
            .all(|name| *name >= first || kept.contains(name)),
        "{what}: {names:?}, first live {first}, kept in place {kept:?}"
    );
}

/// Three new commits on `tree` after `parent`, then `gc` keeping the second: the first is
/// `Collected`, the third reads back, fsck is clean; closes the store.
pub fn commits_and_gc_after_crash(
    mut repo: Repo,
    mut tree: Tree,
    parent: Option<Hash>,
    what: &str,
    gc: impl FnOnce(&mut Repo, &Hash),
) {
    let mut hashes: Vec<Hash> = Vec::new();
    for i in 0..3u8 {
        tree.add(&["after", "crash"], vec![i; 50]).unwrap();
        let parents: Vec<Hash> = hashes.last().copied().or(parent).into_iter().collect();
        hashes.push(repo.commit(&tree, &parents, info(1000 + u64::from(i))).unwrap());
    }
    gc(&mut repo, &hashes[1]);
    assert!(matches!(repo.checkout(&hashes[0]), Err(StoreError::Collected { .. })), "{what}");
    assert_eq!(
        repo.checkout(&hashes[2]).unwrap().find(&["after", "crash"]).unwrap().unwrap().as_bytes(),
        &[2; 50][..]
    );
    assert!(repo.fsck().is_clean(), "{what}: after a new GC");
    repo.close().unwrap();
}
