//! `Tree::undo_point` / `Tree::undo`: a change made in place and undone gives back the tree before
//! it (same hash, same reads, same listing order: stored directories get their keys back), for
//! random changes on a committed tree, including the awkward ones (contents in the way, a new
//! directory chain, a large directory crossing its inode thresholds, the root).
//! Replay a failure with `LARCH_SEED=<seed> cargo test -p larch-core --test undo`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, MemoryRepo, Tree};
use larch_testkit::rand::Rng;
use larch_testkit::{TestRng, seeded_rng};

fn listing(tree: &Tree, path: &[Vec<u8>]) -> Vec<Vec<u8>> {
    tree.list(path, 0, None).unwrap().into_iter().map(|(name, _)| name.to_vec()).collect()
}

fn random_path(rng: &mut TestRng) -> Vec<Vec<u8>> {
    let len = rng.random_range(0..4usize);
    let mut path: Vec<Vec<u8>> = (0..len).map(|_| vec![b'a' + rng.random_range(0..3u8)]).collect();
    // Often into the large directory `big` (300 names: an inode trie that a change may collapse).
    if rng.random_range(0..2) == 0 {
        path = vec![b"big".to_vec(), format!("n{}", rng.random_range(0..320)).into_bytes()];
    }
    path
}

/// A committed tree with small directories `a`, `b`, `c` nested, contents in the way, and a
/// directory of 300 entries.
fn committed_tree(repo: &mut MemoryRepo, rng: &mut TestRng) -> Tree {
    let mut tree = repo.empty_tree();
    for i in 0..300 {
        tree.add(&[b"big".to_vec(), format!("n{i}").into_bytes()], vec![1]).unwrap();
    }
    for _ in 0..40 {
        let mut path = random_path(rng);
        if path.is_empty() {
            path.push(b"x".to_vec());
        }
        tree.add(&path, vec![rng.random_range(0..4u8)]).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "undo")).unwrap();
    repo.checkout(&commit).unwrap()
}

#[test]
fn a_change_undone_gives_back_the_tree_before_it() {
    let (mut rng, seed) = seeded_rng("undo", 42);
    let mut repo = MemoryRepo::new();
    let base = committed_tree(&mut repo, &mut rng);
    let before_hash = base.hash();
    let dirs: Vec<Vec<Vec<u8>>> =
        vec![vec![], vec![b"a".to_vec()], vec![b"b".to_vec()], vec![b"big".to_vec()]];
    let before_lists: Vec<_> = dirs.iter().map(|dir| listing(&base, dir)).collect();
    for round in 0..300 {
        // A fresh copy of the committed tree each time (the change below copies its path).
        let mut tree = base.clone();
        let mut changes = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let path = random_path(&mut rng);
            let point = tree.undo_point(&path).unwrap();
            match rng.random_range(0..3) {
                0 => tree.remove(&path).unwrap(),
                1 => tree.add_tree(&path, &Tree::empty()).unwrap(),
                _ => tree.add(&path, vec![9, rng.random_range(0..4u8)]).unwrap(),
            }
            changes.push((path, point));
        }
        // Undone newest first, on the changed tree itself.
        for (path, point) in changes.iter().rev() {
            tree.undo(path, point).unwrap();
        }
        assert_eq!(tree.hash(), before_hash, "seed {seed}, round {round}: {changes:?}");
        for (dir, want) in dirs.iter().zip(&before_lists) {
            assert_eq!(&listing(&tree, dir), want, "seed {seed}, round {round}: listing {dir:?}");
        }
    }
}

#[test]
fn an_undone_large_directory_lists_in_its_stored_order_again() {
    let mut repo = MemoryRepo::new();
    let (mut rng, _) = seeded_rng("undo-order", 7);
    let base = committed_tree(&mut repo, &mut rng);
    let big = [b"big".to_vec()];
    let stored_order = listing(&base, &big);
    let mut sorted = stored_order.clone();
    sorted.sort();
    assert_ne!(stored_order, sorted, "a stored large directory lists by its inode layout");
    let path = [b"big".to_vec(), b"n5".to_vec()];
    let mut tree = base.clone();
    let point = tree.undo_point(&path).unwrap();
    tree.add(&path, vec![7]).unwrap();
    // Modified: by name.
    let mut modified = stored_order.clone();
    modified.sort();
    assert_eq!(listing(&tree, &big), modified);
    tree.undo(&path, &point).unwrap();
    assert_eq!(listing(&tree, &big), stored_order);
    assert_eq!(tree.find(&path).unwrap().map(|c| c.as_bytes().to_vec()), Some(vec![1]));
}
