//! Random trees and operation sequences shared by the seeded proof tests (tree and stream proofs).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Kind, MemoryRepo, Tree};
use larch_proof::{Op, OpResult};
use larch_testkit::TestRng;
use larch_testkit::rand::Rng;

/// Random bytes, at most `max` of them.
pub fn random_bytes(rng: &mut TestRng, max: usize) -> Vec<u8> {
    let len = rng.random_range(0..=max);
    (0..len).map(|_| rng.random()).collect()
}

/// A random committed tree (flat, inode tries, directories around 256 entries) and its paths.
pub fn random_tree(rng: &mut TestRng, repo: &mut MemoryRepo) -> (Tree, Vec<Vec<Vec<u8>>>) {
    let mut tree = repo.empty_tree();
    let mut paths = Vec::new();
    let dirs = rng.random_range(1..5);
    for d in 0..dirs {
        let size = match rng.random_range(0..7) {
            0 => rng.random_range(1..10),
            5 => rng.random_range(1000..1300),
            1 => rng.random_range(30..40),
            2 => rng.random_range(255..259),
            3 => rng.random_range(290..700),
            _ => rng.random_range(1..120),
        };
        let dir = format!("d{d}").into_bytes();
        for i in 0..size {
            let mut path = vec![dir.clone(), format!("k{i}").into_bytes()];
            if rng.random_bool(0.1) {
                path.push(b"sub".to_vec());
            }
            let value = random_bytes(rng, 40);
            tree.add(&path, value).unwrap();
            paths.push(path);
        }
    }
    tree.add(&[b"top".to_vec()], b"top value".to_vec()).unwrap();
    paths.push(vec![b"top".to_vec()]);
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    (repo.checkout(&commit).unwrap(), paths)
}

/// A path of the tree, or one near it (absent, through a value, a directory).
pub fn random_path(rng: &mut TestRng, paths: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    // Half the time, a path of the same directory as the previous pick would be: the first one.
    let pick = if rng.random_bool(0.3) {
        rng.random_range(0..paths.len().min(1300))
    } else {
        rng.random_range(0..paths.len())
    };
    let mut path = paths[pick].clone();
    match rng.random_range(0..8) {
        0 => path.truncate(1),
        1 => {
            let last = path.len() - 1;
            path[last].push(b'~'); // absent
        }
        2 => path.push(b"deeper".to_vec()), // through a value (or absent)
        _ => {}
    }
    path
}

/// A random operation on the tree's paths.
pub fn random_op(rng: &mut TestRng, paths: &[Vec<Vec<u8>>]) -> Op {
    let path = random_path(rng, paths);
    match rng.random_range(0..10) {
        0 | 1 => Op::Find(path),
        2 => Op::Mem(path),
        3 => Op::MemTree(path),
        4 => Op::List(path[..1].to_vec()),
        5 | 6 => Op::Add(path, random_bytes(rng, 20)),
        7 | 8 => Op::Remove(path),
        _ => Op::Copy { from: path, to: random_path(rng, paths) },
    }
}

/// Runs `op` on larch-core's own tree: the expected result.
pub fn apply_to_larch(tree: &mut Tree, op: &Op) -> OpResult {
    match op {
        Op::Find(path) => OpResult::Value(tree.find(path).unwrap().map(|c| c.as_bytes().to_vec())),
        Op::Mem(path) => OpResult::Bool(tree.mem(path).unwrap()),
        Op::MemTree(path) => OpResult::Bool(tree.mem_tree(path).unwrap()),
        Op::List(path) => {
            // The proof operation lists by name (`larch_proof::Op::List`), not in Irmin's
            // order of a stored directory (`Tree::list`).
            let entries = tree.list_sorted(path, 0, None).unwrap();
            let kind = |t: &Tree| match t.kind() {
                Kind::Node => larch_proof::Kind::Node,
                Kind::Contents => larch_proof::Kind::Contents,
            };
            OpResult::List(entries.iter().map(|(name, t)| (name.as_bytes().to_vec(), kind(t))).collect())
        }
        Op::Add(path, value) => {
            tree.add(path, value.clone()).unwrap();
            OpResult::Unit
        }
        Op::Remove(path) => {
            tree.remove(path).unwrap();
            OpResult::Unit
        }
        Op::Copy { from, to } => OpResult::Copied(tree.copy(from, to).unwrap()),
    }
}
