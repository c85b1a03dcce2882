//! Shared helpers of the store tests: random operations mirrored into the reference model, and the
//! full contents of a tree for comparison.
#![allow(dead_code, clippy::unwrap_used)]

pub mod crash;

use larch_core::{CommitInfo, ContentsRef, Entry, NodeBody, NodeRef, Tree, TreeError};
use larch_testkit::{Model, TestRng};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Every (path, value) of a tree, by walking it.
pub fn contents_of(tree: &Tree) -> BTreeMap<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

fn walk(tree: &Tree, path: &mut Vec<Vec<u8>>, out: &mut BTreeMap<Vec<Vec<u8>>, Vec<u8>>) {
    let empty: [&[u8]; 0] = [];
    for (name, child) in tree.list(&empty, 0, None).unwrap() {
        path.push(name.as_bytes().to_vec());
        match child.find(&empty).unwrap() {
            Some(value) => {
                out.insert(path.clone(), value.as_bytes().to_vec());
            }
            None => walk(&child, path, out),
        }
        path.pop();
    }
}

const STEPS: &[&str] = &[
    "a",
    "b",
    "contracts",
    "index",
    "00ff",
    "deadbeef",
    "0123456789abcdef0123456789abcdef01234567",
    "x y",
    "Z",
];

fn random_path(rng: &mut TestRng) -> Vec<Vec<u8>> {
    let depth = rng.random_range(1..=4);
    (0..depth).map(|_| STEPS[rng.random_range(0..STEPS.len())].as_bytes().to_vec()).collect()
}

/// Mostly short values; one in ten of 33–299 bytes, those above the writer's inline threshold
/// (`larch_store::INLINE_MAX`, 256) written as contents records of their own.
fn random_value(rng: &mut TestRng) -> Vec<u8> {
    let len = match rng.random_range(0..10) {
        0 => rng.random_range(33..300),
        _ => rng.random_range(0..=33),
    };
    (0..len).map(|_| rng.random()).collect()
}

/// Applies one random operation to both the tree and the model.
pub fn random_op(rng: &mut TestRng, tree: &mut Tree, model: &mut Model) {
    try_random_op(rng, tree, model).unwrap();
}

/// [`random_op`], returning the tree's error (a store that failed under it) instead of panicking.
pub fn try_random_op(rng: &mut TestRng, tree: &mut Tree, model: &mut Model) -> Result<(), TreeError> {
    match rng.random_range(0..100) {
        0..=59 => {
            let (path, value) = (random_path(rng), random_value(rng));
            tree.add(&path, value.clone())?;
            model.add(&path, value);
        }
        60..=79 => {
            let path = random_path(rng);
            tree.remove(&path)?;
            model.remove(&path);
        }
        80..=84 => {
            let (from, to) = (random_path(rng), random_path(rng));
            if !to.starts_with(&from) && !from.starts_with(&to) {
                tree.copy(&from, &to)?;
                model.copy(&from, &to);
            }
        }
        _ => {
            // A burst into one large directory (inode tries above 256 entries).
            let dir = STEPS[rng.random_range(0..3)].as_bytes().to_vec();
            for _ in 0..rng.random_range(20..120) {
                let name = format!("{:016x}", rng.random_range(0..600u64)).into_bytes();
                let path = vec![b"big".to_vec(), dir.clone(), name];
                let value = random_value(rng);
                tree.add(&path, value.clone())?;
                model.add(&path, value);
            }
        }
    }
    Ok(())
}

/// Commit info of block `n`.
pub fn info(n: u64) -> CommitInfo {
    CommitInfo::tezos(1530374852 + 30 * n as i64, format!("lvl {n}"))
}

/// Every stored object (node or contents record) reached from `tree`, by offset.
pub fn reached_offsets(tree: &Tree, out: &mut BTreeSet<u64>) {
    let source = tree.source().clone();
    let mut stack = vec![tree.root().clone()];
    while let Some(entry) = stack.pop() {
        match entry {
            Entry::Contents(ContentsRef::Stored { key, .. }) => {
                out.insert(key.offset());
            }
            Entry::Contents(ContentsRef::Mem(_) | ContentsRef::Inline(_)) => {}
            Entry::Node(NodeRef::Stored { key, hash }) => {
                if !out.insert(key.offset()) {
                    continue;
                }
                let node = source.load_node(key, &hash).unwrap();
                match node.body() {
                    NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                        stack.extend(entries.iter().map(|(_, entry)| entry.clone()));
                    }
                    NodeBody::Tree(inode) => {
                        stack.extend(inode.children.iter().map(|(_, child)| Entry::Node(child.clone())));
                    }
                }
            }
            Entry::Node(NodeRef::Mem(_)) => panic!("a checked-out tree holds an unsaved node"),
        }
    }
}

/// A LEB128 integer of `bytes` at `at`: value and length.
pub fn leb(bytes: &[u8], at: usize) -> (u64, usize) {
    larch_varint::decode(&bytes[at..]).expect("a LEB128 integer")
}

/// Commits `blocks` random blocks on top of `from` (with its model); returns every commit with
/// its model.
pub fn commit_blocks(
    repo: &mut larch_store::Repo,
    blocks: u64,
    name: &str,
    from: Option<(larch_core::Hash, Model)>,
) -> Vec<(larch_core::Hash, Model)> {
    let (mut rng, seed) = larch_testkit::seeded_rng(name, 17);
    eprintln!("{name}: seed {seed} (replay with LARCH_SEED={seed})");
    let (mut tree, mut model, mut parent) = match from {
        Some((hash, model)) => (repo.checkout(&hash).unwrap(), model, Some(hash)),
        None => (repo.empty_tree(), Model::new(), None),
    };
    let mut out = Vec::new();
    for block in 0..blocks {
        for _ in 0..40 {
            random_op(&mut rng, &mut tree, &mut model);
        }
        let hash = repo.commit(&tree, &parent.into_iter().collect::<Vec<_>>(), info(block)).unwrap();
        parent = Some(hash);
        out.push((hash, model.clone()));
    }
    out
}
