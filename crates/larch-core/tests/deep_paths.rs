//! Paths of any depth (issue 9, point 5): a 10,000- and a 100,000-step path through every tree
//! operation and through a `MemoryRepo` commit and checkout, on the test harness's threads (2 MiB
//! stacks). Before the recursion was guarded, `Tree::add` overflowed between 4,000 and 6,000 steps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::schema::{contents_hash, flat_node_hash};
use larch_core::{CommitInfo, Hash, Kind, MemoryRepo, Tree};

fn deep_path(depth: usize) -> Vec<Vec<u8>> {
    (0..depth).map(|i| format!("s{}", i % 7).into_bytes()).collect()
}

/// The hash of a chain of one-entry directories ending in `value`, computed from the schema alone.
fn chain_hash(path: &[Vec<u8>], value: &[u8]) -> Hash {
    let mut hash = contents_hash(value);
    let mut kind = Kind::Contents;
    for name in path.iter().rev() {
        hash = flat_node_hash(1, std::iter::once((name.as_slice(), kind, hash)));
        kind = Kind::Node;
    }
    hash
}

fn check_depth(depth: usize) {
    let path = deep_path(depth);
    let mut tree = Tree::empty();
    tree.add(&path, b"bottom".to_vec()).unwrap();
    assert_eq!(tree.find(&path).unwrap().unwrap().as_bytes(), b"bottom");
    assert!(tree.mem(&path).unwrap());
    assert_eq!(tree.hash(), chain_hash(&path, b"bottom"));
    // A copy grafts the whole chain one level deeper: twice the depth, hashed and read back.
    assert!(tree.copy(&path[..1], &path[..depth / 2]).unwrap());
    let mut doubled: Vec<Vec<u8>> = path[..depth / 2].to_vec();
    doubled.extend_from_slice(&path[1..]);
    assert_eq!(tree.find(&doubled).unwrap().unwrap().as_bytes(), b"bottom");
    let _ = tree.hash();
    assert!(format!("{tree:?}").len() > depth);
    // The repository persists and reloads it.
    let mut repo = MemoryRepo::new();
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "deep")).unwrap();
    let checkout = repo.checkout(&commit).unwrap();
    assert_eq!(checkout.hash(), tree.hash());
    assert_eq!(checkout.find(&doubled).unwrap().unwrap().as_bytes(), b"bottom");
    // Removing the bottom value empties every directory above it, up to the copy's root.
    let mut pruned = Tree::empty();
    pruned.add(&path, b"bottom".to_vec()).unwrap();
    pruned.remove(&path).unwrap();
    assert!(pruned.is_empty().unwrap());
    drop(tree);
    drop(checkout);
}

#[test]
fn a_path_of_10_000_steps() {
    check_depth(10_000);
}

#[test]
fn a_path_of_100_000_steps() {
    check_depth(100_000);
}

#[test]
fn repeated_copies_nest_a_tree_deeply() {
    // Copying the root under itself 20,000 times: each copy is O(1), the result 20,000 levels deep.
    let mut tree = Tree::empty();
    tree.add(&["leaf"], b"x".to_vec()).unwrap();
    for _ in 0..20_000 {
        let whole = tree.clone();
        tree.add_tree(&["n"], &whole).unwrap();
    }
    let mut path: Vec<&str> = vec!["n"; 20_000];
    path.push("leaf");
    assert_eq!(tree.find(&path).unwrap().unwrap().as_bytes(), b"x");
    let _ = tree.hash();
}

/// A source that keeps origins (as the pack store's does) and holds nothing.
#[derive(Debug)]
struct OriginSource;

impl larch_core::ObjectSource for OriginSource {
    fn load_node(
        &self,
        key: larch_core::ObjectKey,
        hash: &larch_core::Hash,
    ) -> Result<std::sync::Arc<larch_core::Node>, larch_core::LoadError> {
        larch_core::NoSource.load_node(key, hash)
    }
    fn load_contents(
        &self,
        key: larch_core::ObjectKey,
        hash: &larch_core::Hash,
    ) -> Result<std::sync::Arc<larch_core::Contents>, larch_core::LoadError> {
        larch_core::NoSource.load_contents(key, hash)
    }
    fn keeps_origins(&self) -> bool {
        true
    }
}

/// A persistent tree changed 300,000 times, each version copied from the previous one and
/// only the newest kept: over a source that keeps origins, the copies remember them (until
/// stored), a chain as long as the history, which dropping the tree must not follow
/// recursively (it overflowed the stack of the OCaml bindings' replay, where every context
/// keeps its version).
#[test]
fn dropping_a_long_chain_of_versions() {
    let mut tree = larch_core::Tree::empty_with_source(std::sync::Arc::new(OriginSource));
    tree.add(&["a", "b"], b"0".to_vec()).unwrap();
    for i in 0..300_000u32 {
        let mut next = tree.clone();
        next.add(&["a", "b"], i.to_le_bytes().to_vec()).unwrap();
        tree = next;
    }
    assert_eq!(tree.find(&["a", "b"]).unwrap().unwrap().as_bytes(), 299_999u32.to_le_bytes());
    drop(tree);
}
