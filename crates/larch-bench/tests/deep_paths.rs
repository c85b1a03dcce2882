//! Crafted traces with paths of 10,000 and 100,000 steps (issue 9, point 5): `trace info` on
//! both formats, and replay into the in-memory repository and into the pack store, succeed (no
//! stack overflow, no abort). Before the recursion was guarded, a 5,000-step path aborted
//! `larch replay --store`, in-memory replay overflowed at 20,000 steps and `trace info` at 100,000.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../larch-trace/tests/formats_support/mod.rs"]
mod formats_support;

use formats_support::{write_irmin, write_larch};
use larch_bench::{ReplayOptions, RunMeta, replay};
use larch_core::{CommitInfo, Hash, MemoryRepo, Tree, schema};
use larch_trace::{Op, Path, Scoped, trace_info};

const DATE: i64 = 1_600_000_000;

/// A one-block trace: add a value at a `depth`-step path, read it back, copy the deep directory
/// one level up, commit. Returns the operations and the commit hash they must produce.
fn deep_trace(depth: usize) -> (Vec<Op>, Hash) {
    let path: Path = (0..depth).map(|i| format!("k{}", i % 3).into_bytes()).collect();
    let mut tree = Tree::empty();
    tree.add(&path.steps(), b"deep".to_vec()).unwrap();
    let from: Path = Path::from_steps(&path.steps()[..depth - 1]);
    let to: Path = Path::from_steps([b"copy"]);
    assert!(tree.copy(&from.steps(), &to.steps()).unwrap());
    let info = CommitInfo::tezos(DATE, "deep");
    let hash = schema::commit_hash(&tree.hash(), &[], &info);
    let ops = vec![
        Op::Add { path: path.clone(), value: b"deep".to_vec(), input: Scoped::Keep(0), out: Scoped::Keep(1) },
        Op::Find { path: path.clone(), found: true, input: Scoped::Keep(1) },
        Op::MemTree { path: from.clone(), found: true, input: Scoped::Keep(1) },
        Op::Copy { from, to, input: Scoped::Forget(1), out: Scoped::Keep(2) },
        Op::Commit {
            hash: Scoped::Keep(hash),
            date: DATE,
            message: "deep".into(),
            parents: Vec::new(),
            input: Scoped::Forget(2),
        },
    ];
    (ops, hash)
}

fn check(depth: usize) {
    let (ops, hash) = deep_trace(depth);
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("t.larch", write_larch(&ops, &[])), ("t.irmin", write_irmin(&ops))] {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let info = trace_info(&file).unwrap();
        assert_eq!(info.final_commit, Some(hash), "{name}");
        assert_eq!(info.read_mismatches, 0, "{name}");
        assert!(info.apply_note.is_none(), "{name}: {:?}", info.apply_note);
    }
    let meta = RunMeta::default();
    let mut memory = MemoryRepo::new();
    let summary = replay(
        &mut memory,
        ops.iter().cloned().map(Ok::<_, std::io::Error>),
        &ReplayOptions::default(),
        &meta,
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(memory.commit_count(), 1, "{summary:?}");
    assert!(memory.commit_record(&hash).is_some());
    let store_dir = tempfile::tempdir().unwrap();
    let mut store = larch_store::Repo::open(store_dir.path()).unwrap();
    replay(
        &mut store,
        ops.into_iter().map(Ok::<_, std::io::Error>),
        &ReplayOptions::default(),
        &meta,
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(store.head(), Some(hash));
    store.close().unwrap();
    let report = larch_store::fsck(store_dir.path()).unwrap();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_10_000_step_path_through_trace_info_and_replay() {
    check(10_000);
}

#[test]
fn a_100_000_step_path_through_trace_info_and_replay() {
    check(100_000);
}
