//! The recorder (recorded traces replay to the same results and hashes, and the genesis block records
//! exactly Irmin's fixture) and `trace info`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod formats_support;

use formats_support::*;
use larch_core::{Hash, MemoryRepo};
use larch_testkit::seeded_rng;
use larch_trace::format::{LarchWriter, OpSink, TraceFormat};
use larch_trace::info::{InfoOptions, VALUE_SIZE_LABELS, trace_info, trace_info_with, value_size_bucket};
use larch_trace::record::{RecordError, Recorder};
use larch_trace::{Op, OpKind, Scoped};

#[test]
fn recording_the_genesis_block_reproduces_irmins_fixture() {
    let mut recorder = Recorder::new(MemoryRepo::new(), Vec::new());
    let mut tree = recorder.genesis();
    assert_eq!(tree.find(&["data", "version"]).unwrap(), None);
    tree.add(&["data", "version"], b"genesis").unwrap();
    assert_eq!(tree.find(&["data", "sandbox_parameter"]).unwrap(), None);
    tree.add(&["protocol"], &hex_decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21"))
        .unwrap();
    tree.add(&["test_chain"], &[0]).unwrap();
    let hash = recorder.commit(tree, &[], 1530374852, "Genesis").unwrap();
    assert_eq!(hash.to_string(), GENESIS);
    let (repo, ops) = recorder.finish().unwrap();
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(ops, fixture_ops());
    assert_eq!(write_irmin(&ops), fixture()[..FIXTURE_COMPLETE]);
}

#[test]
fn recorded_workload_replays_with_the_same_results_and_hashes() {
    let (mut rng, _) = seeded_rng("record_replay", 99);
    let (ops, head) = record_tezos_like(&mut rng, 12, 150);
    assert_eq!(ops.iter().filter(|op| op.kind() == OpKind::Commit).count(), 13);
    let reads_found = ops.iter().filter(|op| matches!(op, Op::Find { found: true, .. })).count();
    let reads_missed = ops.iter().filter(|op| matches!(op, Op::Find { found: false, .. })).count();
    assert!(reads_found > 0 && reads_missed > 0, "{reads_found} {reads_missed}");
    assert!(ops.iter().any(|op| op.kind() == OpKind::Copy));
    assert_eq!(replay_and_check(&ops), 13);
    // Through a larch file and back, the same.
    let bytes = write_larch(&ops, &[]);
    let read: Vec<Op> =
        larch_trace::format::LarchReader::new(&bytes[..]).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(read, ops);
    match ops.last() {
        Some(Op::Commit { hash, .. }) => assert_eq!(hash.value(), head),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recorder_scopes_follow_the_handles() {
    let mut recorder = Recorder::new(MemoryRepo::new(), Vec::new());
    let mut tree = recorder.genesis();
    tree.add(&["a"], b"1").unwrap();
    let base = recorder.commit(tree, &[], 1, "base").unwrap();
    let mut left = recorder.checkout(&base).unwrap();
    let right = left.clone();
    left.add(&["b"], b"2").unwrap(); // `right` still names the checked-out context: Keep.
    assert!(right.mem(&["a"]).unwrap());
    assert!(!right.mem(&["b"]).unwrap());
    let mut right = right;
    right.remove(&["a"]).unwrap(); // Now the last handle: Forget.
    assert!(!right.copy(&["missing"], &["x"]).unwrap()); // Records nothing.
    assert!(left.copy(&["a"], &["c"]).unwrap());
    let head = recorder.commit(left, &[base], 2, "left").unwrap();
    drop(right);
    let (_, ops) = recorder.finish().unwrap();
    assert_eq!(
        ops,
        vec![
            Op::Add {
                path: steps(&["a"]),
                value: b"1".to_vec(),
                input: Scoped::Forget(0),
                out: Scoped::Keep(1)
            },
            Op::Commit {
                hash: Scoped::Keep(base),
                date: 1,
                message: "base".into(),
                parents: vec![],
                input: Scoped::Forget(1)
            },
            Op::Checkout { commit: Scoped::Keep(base), out: Scoped::Keep(2) },
            Op::Add {
                path: steps(&["b"]),
                value: b"2".to_vec(),
                input: Scoped::Keep(2),
                out: Scoped::Keep(3)
            },
            Op::Mem { path: steps(&["a"]), found: true, input: Scoped::Keep(2) },
            Op::Mem { path: steps(&["b"]), found: false, input: Scoped::Keep(2) },
            Op::Remove { path: steps(&["a"]), input: Scoped::Forget(2), out: Scoped::Keep(4) },
            Op::Copy {
                from: steps(&["a"]),
                to: steps(&["c"]),
                input: Scoped::Forget(3),
                out: Scoped::Keep(5)
            },
            Op::Commit {
                hash: Scoped::Keep(head),
                date: 2,
                message: "left".into(),
                parents: vec![Scoped::Keep(base)],
                input: Scoped::Forget(5)
            },
        ]
    );
    assert_eq!(replay_and_check(&ops), 2);
}

#[test]
fn recorder_errors_are_typed() {
    let mut recorder = Recorder::new(MemoryRepo::new(), Vec::new());
    assert!(matches!(recorder.checkout(&Hash([3; 32])), Err(RecordError::Repo(_))));
    let tree = recorder.genesis();
    let err = recorder.finish().err().unwrap();
    assert!(matches!(err, RecordError::HandlesAlive(1)), "{err:?}");
    drop(tree);
    // A finished sink refuses further operations, reported as a trace error.
    let mut sink = LarchWriter::new(Vec::new(), &[]).unwrap();
    sink.finish().unwrap();
    let mut recorder = Recorder::new(MemoryRepo::new(), sink);
    let mut tree = recorder.genesis();
    assert!(matches!(tree.add(&["a"], b"1"), Err(RecordError::Trace(larch_trace::TraceError::Finished))));
}

#[test]
fn info_of_the_fixture() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tezos_actions_1commit.repr");
    let info = trace_info(&path).unwrap();
    assert_eq!(info.format, TraceFormat::Irmin);
    assert_eq!((info.ops, info.blocks, info.bytes), (6, 1, 300));
    assert_eq!(info.count(OpKind::Find), 2);
    assert_eq!(info.count(OpKind::Add), 3);
    assert_eq!(info.count(OpKind::Commit), 1);
    assert_eq!(info.read_misses, 2);
    assert_eq!(info.read_mismatches, 0);
    assert_eq!(info.final_commit.unwrap().to_string(), GENESIS);
    assert_eq!(info.truncated_tail, Some(296));
    // Values of 7 ("genesis"), 32 and 1 bytes.
    let mut expected = [0u64; 13];
    expected[value_size_bucket(7)] += 1;
    expected[value_size_bucket(32)] += 1;
    expected[value_size_bucket(1)] += 1;
    assert_eq!(info.value_sizes, expected);
    assert_eq!(
        (VALUE_SIZE_LABELS[value_size_bucket(7)], VALUE_SIZE_LABELS[value_size_bucket(32)]),
        ("4-7", "32-64")
    );
    let dirs: Vec<(u64, &str)> = info.largest_dirs.iter().map(|d| (d.entries, d.path.as_str())).collect();
    assert_eq!(dirs, vec![(3, ""), (1, "data")]);
    let text = info.to_string();
    assert!(text.contains(GENESIS) && text.contains("truncated tail") && text.contains("data"), "{text}");
}

#[test]
fn info_of_a_recorded_larch_trace_with_metadata() {
    let (mut rng, _) = seeded_rng("info_recorded", 5);
    let (ops, head) = record_tezos_like(&mut rng, 8, 200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.larch");
    let metadata =
        vec![("generator".to_owned(), "formats_record test".to_owned()), ("seed".to_owned(), "5".to_owned())];
    let mut sink = larch_trace::format::create_trace(&path, TraceFormat::Larch, &metadata).unwrap();
    for op in &ops {
        sink.write_op(op).unwrap();
    }
    sink.finish().unwrap();
    drop(sink);
    let info = trace_info(&path).unwrap();
    assert_eq!(info.metadata, metadata);
    assert_eq!(info.ops, ops.len() as u64);
    assert_eq!(info.blocks, 9);
    assert_eq!(info.final_commit, Some(head));
    assert_eq!(info.read_mismatches, 0);
    assert!(info.apply_note.is_none(), "{:?}", info.apply_note);
    assert_eq!(info.op_counts.iter().sum::<u64>(), info.ops);
    assert_eq!(info.value_sizes.iter().sum::<u64>(), info.count(OpKind::Add));
    // The largest directory is data/contracts/index (up to 200 accounts), sorted largest first.
    let top = &info.largest_dirs[0];
    assert_eq!(top.path, "data/contracts/index");
    assert!(top.entries > 100, "{top:?}");
    assert!(info.largest_dirs.windows(2).all(|w| w[0].entries >= w[1].entries));
    assert!(info.to_string().contains("formats_record test"));
    // Without applying the operations.
    let mut source = larch_trace::open_trace(&path).unwrap();
    let quick = trace_info_with(&mut *source, &InfoOptions { largest_dirs: 0, recent_commits: 1 }).unwrap();
    assert!(quick.largest_dirs.is_empty());
    assert_eq!(quick.op_counts, info.op_counts);
}

#[test]
fn info_reports_inconsistent_traces_without_failing() {
    // A read of a context that was never produced.
    let ops = vec![Op::Find { path: steps(&["a"]), found: false, input: Scoped::Keep(9) }];
    let bytes = write_larch(&ops, &[]);
    let mut source = larch_trace::format::open_reader(std::io::Cursor::new(bytes)).unwrap();
    let info = trace_info_with(&mut *source, &InfoOptions::default()).unwrap();
    assert!(info.apply_note.as_deref().unwrap().contains("context 9"), "{:?}", info.apply_note);
    // A corrupted trace is an error.
    let mut bytes = write_larch(&fixture_ops(), &[]);
    let at = bytes.len() / 2;
    bytes[at] ^= 4;
    let mut source = larch_trace::format::open_reader(std::io::Cursor::new(bytes)).unwrap();
    assert!(trace_info_with(&mut *source, &InfoOptions::default()).is_err());
}
