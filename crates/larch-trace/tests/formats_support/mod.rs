//! Shared helpers of the format tests: the fixture, random operation sequences, a small Tezos-like
//! recorded workload, and a replay loop against a fresh `MemoryRepo`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::ContextRepo;
use larch_core::{Hash, MemoryRepo};
use larch_testkit::TestRng;
use larch_trace::format::{IrminWriter, LarchWriter, OpSink};
use larch_trace::record::Recorder;
use larch_trace::{Op, Path, Scoped};
use rand::Rng;
use std::collections::HashMap;

/// The Irmin fixture, as shipped.
pub fn fixture() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tezos_actions_1commit.repr")).unwrap()
}

/// Length of the fixture's complete part (its 7th frame is cut).
pub const FIXTURE_COMPLETE: usize = 296;

/// The recorded genesis hash of the fixture.
pub const GENESIS: &str = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj";

pub fn steps(path: &[&str]) -> Path {
    path.iter().map(|step| step.as_bytes()).collect()
}

/// The six operations of the fixture, written out by hand from spec §2.6.
pub fn fixture_ops() -> Vec<Op> {
    let protocol = hex_decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21");
    vec![
        Op::Find { path: steps(&["data", "version"]), found: false, input: Scoped::Keep(0) },
        Op::Add {
            path: steps(&["data", "version"]),
            value: b"genesis".to_vec(),
            input: Scoped::Forget(0),
            out: Scoped::Keep(1),
        },
        Op::Find { path: steps(&["data", "sandbox_parameter"]), found: false, input: Scoped::Keep(1) },
        Op::Add {
            path: steps(&["protocol"]),
            value: protocol,
            input: Scoped::Forget(1),
            out: Scoped::Keep(2),
        },
        Op::Add {
            path: steps(&["test_chain"]),
            value: vec![0],
            input: Scoped::Forget(2),
            out: Scoped::Keep(3),
        },
        Op::Commit {
            hash: Scoped::Keep(Hash::from_base58(GENESIS).unwrap()),
            date: 1530374852,
            message: "Genesis".to_owned(),
            parents: vec![],
            input: Scoped::Forget(3),
        },
    ]
}

pub fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn random_hex(rng: &mut TestRng, bytes: usize) -> Vec<u8> {
    (0..bytes).flat_map(|_| format!("{:02x}", rng.random::<u8>()).into_bytes()).collect()
}

fn random_step(rng: &mut TestRng) -> Vec<u8> {
    match rng.random_range(0..8) {
        0 => Vec::new(),
        1 => {
            let len = rng.random_range(1..33);
            random_hex(rng, len)
        }
        2 => {
            let len = rng.random_range(1..6);
            (0..len).map(|_| rng.random()).collect()
        }
        3 => b"ABCDEF".to_vec(),
        4 => b"abc".to_vec(),
        _ => {
            ["data", "contracts", "index", "balance", "big_maps"][rng.random_range(0..5)].as_bytes().to_vec()
        }
    }
}

fn random_path(rng: &mut TestRng, previous: &Path) -> Path {
    let keep = if previous.is_empty() { 0 } else { rng.random_range(0..=previous.len()) };
    let mut path = previous.clone();
    path.truncate(keep);
    let fresh = rng.random_range(0..4);
    for _ in 0..fresh {
        path.push(&random_step(rng));
    }
    if rng.random_range(0..20) == 0 {
        let len = rng.random_range(7..20);
        path = (0..len).map(|_| random_step(rng)).collect();
    }
    path
}

fn scoped<T>(rng: &mut TestRng, value: T) -> Scoped<T> {
    if rng.random() { Scoped::Keep(value) } else { Scoped::Forget(value) }
}

fn random_hash(rng: &mut TestRng, recent: &[Hash]) -> Hash {
    if !recent.is_empty() && rng.random_range(0..3) > 0 {
        let at = rng.random_range(0..recent.len());
        recent[at]
    } else {
        Hash(rng.random())
    }
}

/// A random operation sequence covering every field encoding (not replayable: ids and results are
/// arbitrary).
pub fn random_ops(rng: &mut TestRng, count: usize) -> Vec<Op> {
    let mut ops = Vec::with_capacity(count);
    let mut next_ctx = 0u64;
    let mut path = Path::new();
    let mut hashes: Vec<Hash> = Vec::new();
    let mut date = 1530374852i64;
    for _ in 0..count {
        let ctx = |rng: &mut TestRng, next: u64| -> u64 {
            match rng.random_range(0..10) {
                0 => rng.random(),
                1 => next.wrapping_sub(rng.random_range(0..5)),
                _ => next,
            }
        };
        let id = ctx(rng, next_ctx);
        let input = scoped(rng, id);
        next_ctx = next_ctx.wrapping_add(1);
        let id = ctx(rng, next_ctx);
        let out = scoped(rng, id);
        path = random_path(rng, &path);
        let op = match rng.random_range(0..8) {
            0 => {
                let hash = random_hash(rng, &hashes);
                Op::Checkout { commit: scoped(rng, hash), out }
            }
            1 => {
                let len = [0, 1, 2, 5, 40, 300][rng.random_range(0..6)];
                Op::Add { path: path.clone(), value: (0..len).map(|_| rng.random()).collect(), input, out }
            }
            2 => Op::Remove { path: path.clone(), input, out },
            3 => {
                let to = random_path(rng, &path);
                Op::Copy { from: path.clone(), to, input, out }
            }
            4 => Op::Find { path: path.clone(), found: rng.random(), input },
            5 => Op::Mem { path: path.clone(), found: rng.random(), input },
            6 => Op::MemTree { path: path.clone(), found: rng.random(), input },
            _ => {
                let hash = Hash(rng.random());
                date = match rng.random_range(0..10) {
                    0 => rng.random(),
                    _ => date.wrapping_add(rng.random_range(-5..60)),
                };
                let count = rng.random_range(0..4);
                let parents = (0..count)
                    .map(|_| {
                        let parent = random_hash(rng, &hashes);
                        scoped(rng, parent)
                    })
                    .collect();
                let message = ["", "Genesis", "lvl 12, 3 ops", "héhé ✓"][rng.random_range(0..4)].to_owned();
                hashes.push(hash);
                Op::Commit { hash: scoped(rng, hash), date, message, parents, input }
            }
        };
        ops.push(op);
    }
    ops
}

/// A copy of one of `seeds` with 1 to 3 random mutations: a flipped bit, a random byte, a
/// truncation or an inserted byte (for the fuzz tests of the readers).
pub fn mutated(rng: &mut TestRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..4) {
        if bytes.is_empty() {
            break;
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..4) {
            0 => bytes[at] ^= 1 << rng.random_range(0..8),
            1 => bytes[at] = rng.random(),
            2 => bytes.truncate(at),
            _ => bytes.insert(at, rng.random()),
        }
    }
    bytes
}

pub fn write_irmin(ops: &[Op]) -> Vec<u8> {
    let mut writer = IrminWriter::new(Vec::new()).unwrap();
    for op in ops {
        writer.write_op(op).unwrap();
    }
    writer.finish().unwrap();
    writer.into_inner().unwrap()
}

pub fn write_larch(ops: &[Op], metadata: &[(String, String)]) -> Vec<u8> {
    let mut writer = LarchWriter::new(Vec::new(), metadata).unwrap();
    for op in ops {
        writer.write_op(op).unwrap();
    }
    writer.finish().unwrap();
    writer.into_inner().unwrap()
}

/// Records a small Tezos-shaped workload through the recorder: genesis, then `blocks` blocks of
/// `ops` operations on `data/contracts/index/<44 hex>/…` and `data/big_maps/index/<n>/contents/<64
/// hex>/…` paths, with small values. Returns the operations and the head commit.
pub fn record_tezos_like(rng: &mut TestRng, blocks: usize, ops: usize) -> (Vec<Op>, Hash) {
    let mut recorder = Recorder::new(MemoryRepo::new(), Vec::new());
    let mut tree = recorder.genesis();
    tree.find(&["data", "version"]).unwrap();
    tree.add(&["data", "version"], b"genesis").unwrap();
    tree.add(&["protocol"], &hex_decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21"))
        .unwrap();
    tree.add(&["test_chain"], &[0]).unwrap();
    let mut head = recorder.commit(tree, &[], 1530374852, "Genesis").unwrap();
    let accounts: Vec<Vec<u8>> = (0..200).map(|_| random_hex(rng, 22)).collect();
    let entries: Vec<Vec<u8>> = (0..300).map(|_| random_hex(rng, 32)).collect();
    for level in 1..=blocks {
        let mut tree = recorder.checkout(&head).unwrap();
        for _ in 0..ops {
            let (first, second) = (rng.random_range(0..accounts.len()), rng.random_range(0..accounts.len()));
            let account = &accounts[first.min(second)];
            let leaf: &[u8] = [&b"balance"[..], b"counter", b"manager"][rng.random_range(0..3)];
            let contract: Vec<&[u8]> =
                vec![&b"data"[..], &b"contracts"[..], &b"index"[..], &account[..], leaf];
            let entry = &entries[rng.random_range(0..entries.len())];
            let map = format!("{}", rng.random_range(0..5)).into_bytes();
            let big_map: Vec<&[u8]> = vec![
                &b"data"[..],
                &b"big_maps"[..],
                &b"index"[..],
                &map[..],
                &b"contents"[..],
                &entry[..],
                &b"data"[..],
            ];
            let path = if rng.random_range(0..4) == 0 { big_map } else { contract };
            let len = [1, 2, 3, 5, 7, 12, 40, 90][rng.random_range(0..8)];
            let value: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            match rng.random_range(0..100) {
                0..40 => drop(tree.find(&path).unwrap()),
                40..70 => tree.add(&path, &value).unwrap(),
                70..92 => drop(tree.mem(&path).unwrap()),
                92..95 => tree.remove(&path).unwrap(),
                95..99 => drop(tree.mem_tree(&path[..3]).unwrap()),
                _ => drop(tree.copy(&path, &[&b"data"[..], &b"copies"[..], &map[..]]).unwrap()),
            }
        }
        head =
            recorder.commit(tree, &[head], 1530374852 + 30 * level as i64, &format!("lvl {level}")).unwrap();
    }
    let (_, ops) = recorder.finish().unwrap();
    (ops, head)
}

/// Replays `ops` against a fresh `MemoryRepo` (simple loop), asserting every read result and commit
/// hash; returns the number of commits checked.
pub fn replay_and_check(ops: &[Op]) -> usize {
    let mut repo = MemoryRepo::new();
    let mut contexts = HashMap::new();
    contexts.insert(0u64, ContextRepo::empty_tree(&repo));
    let mut commits = 0;
    for (row, op) in ops.iter().enumerate() {
        let take = |contexts: &mut HashMap<u64, larch_core::Tree>, scoped: &Scoped<u64>| {
            if scoped.is_forget() {
                contexts.remove(&scoped.value()).unwrap()
            } else {
                contexts[&scoped.value()].clone()
            }
        };
        match op {
            Op::Checkout { commit, out } => {
                let tree = ContextRepo::checkout(&mut repo, &commit.value()).unwrap();
                contexts.insert(out.value(), tree);
            }
            Op::Add { path, value, input, out } => {
                let mut tree = take(&mut contexts, input);
                tree.add(&path.steps(), value.clone()).unwrap();
                contexts.insert(out.value(), tree);
            }
            Op::Remove { path, input, out } => {
                let mut tree = take(&mut contexts, input);
                tree.remove(&path.steps()).unwrap();
                contexts.insert(out.value(), tree);
            }
            Op::Copy { from, to, input, out } => {
                let mut tree = take(&mut contexts, input);
                assert!(tree.copy(&from.steps(), &to.steps()).unwrap(), "row {row}: copy source missing");
                contexts.insert(out.value(), tree);
            }
            Op::Find { path, found, input } => {
                let tree = take(&mut contexts, input);
                assert_eq!(tree.find(&path.steps()).unwrap().is_some(), *found, "row {row}: find {path:?}");
            }
            Op::Mem { path, found, input } => {
                let tree = take(&mut contexts, input);
                assert_eq!(tree.mem(&path.steps()).unwrap(), *found, "row {row}: mem {path:?}");
            }
            Op::MemTree { path, found, input } => {
                let tree = take(&mut contexts, input);
                assert_eq!(tree.mem_tree(&path.steps()).unwrap(), *found, "row {row}: mem_tree {path:?}");
            }
            Op::Commit { hash, date, message, parents, input } => {
                let tree = take(&mut contexts, input);
                let parents: Vec<Hash> = parents.iter().map(|p| p.value()).collect();
                let info = larch_core::CommitInfo::tezos(*date, message.clone());
                let made = ContextRepo::commit(&mut repo, &tree, &parents, info).unwrap();
                assert_eq!(made, hash.value(), "row {row}: commit hash");
                commits += 1;
            }
        }
        if let Some(out) = match op {
            Op::Checkout { out, .. }
            | Op::Add { out, .. }
            | Op::Remove { out, .. }
            | Op::Copy { out, .. } => Some(out),
            _ => None,
        } && out.is_forget()
        {
            contexts.remove(&out.value());
        }
    }
    commits
}
