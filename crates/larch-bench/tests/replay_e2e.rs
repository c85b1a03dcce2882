//! End to end: Irmin's own trace fixture and generated Tezos-like traces replay with every read and
//! commit hash checked, through the trace readers, into the in-memory repository.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_bench::replay::{ReplayError, ReplayOptions, RunMeta, replay};
use larch_bench::stats::read_stat_file;
use larch_bench::{GenParams, Generator};
use larch_core::MemoryRepo;
use larch_trace::Op;
use larch_trace::format::{TraceFormat, create_trace, open_trace};
use std::convert::Infallible;
use std::path::Path;

#[test]
fn irmin_fixture_replays_with_its_recorded_hash() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../larch-trace/tests/data/tezos_actions_1commit.repr");
    let source = open_trace(&path).unwrap();
    let mut repo = MemoryRepo::new();
    let mut stats = Vec::new();
    let meta = RunMeta { trace: path.display().to_string(), store: "memory".to_string() };
    let summary =
        replay(&mut repo, source, &ReplayOptions::default(), &meta, Some(&mut stats), &mut |_| {}).unwrap();
    assert_eq!((summary.blocks, summary.ops, summary.trailing_ops), (1, 6, 0));
    assert_eq!((summary.reads_checked, summary.commits_checked), (2, 1));
    assert!(summary.complete);
    let file = read_stat_file(&stats[..]).unwrap();
    assert_eq!(file.blocks[0].commit, "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj");
}

fn generated(blocks: u64, seed: u64) -> Vec<Op> {
    let params = GenParams {
        blocks,
        seed,
        accounts: 300,
        ops_per_block: 60,
        cycle_length: 8,
        abandon_rate: 0.1,
        reorg_rate: 0.1,
        ..GenParams::default()
    };
    let mut ops = Vec::new();
    Generator::new(params)
        .unwrap()
        .run(
            &mut |op| {
                ops.push(op);
                Ok::<(), Infallible>(())
            },
            &mut |_, _| {},
        )
        .unwrap();
    ops
}

#[test]
fn generated_traces_replay_with_every_check() {
    for seed in [1, 2] {
        let ops = generated(40, seed);
        let commits = ops.iter().filter(|op| matches!(op, Op::Commit { .. })).count() as u64;
        let mut repo = MemoryRepo::new();
        let mut blocks_seen = 0;
        let summary = replay(
            &mut repo,
            ops.into_iter().map(Ok::<_, Infallible>),
            &ReplayOptions::default(),
            &RunMeta::default(),
            None,
            &mut |_| blocks_seen += 1,
        )
        .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        assert_eq!(summary.blocks, commits);
        assert_eq!(blocks_seen, commits);
        assert_eq!(summary.commits_checked, commits);
        assert!(summary.reads_checked > 0);
        assert_eq!(summary.trailing_ops, 0);
    }
}

#[test]
fn generated_trace_replays_from_both_file_formats() {
    let ops = generated(12, 7);
    let dir = tempfile::tempdir().unwrap();
    for format in [TraceFormat::Larch, TraceFormat::Irmin] {
        let path = dir.path().join(format!("trace.{}", format.name()));
        let mut sink = create_trace(&path, format, &[]).unwrap();
        for op in &ops {
            sink.write_op(op).unwrap();
        }
        sink.finish().unwrap();
        drop(sink);
        let mut repo = MemoryRepo::new();
        let summary = replay(
            &mut repo,
            open_trace(&path).unwrap(),
            &ReplayOptions::default(),
            &RunMeta::default(),
            None,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(summary.blocks, 14, "{}", format.name());
    }
}

#[test]
fn a_corrupted_generated_trace_fails_at_the_right_place() {
    let mut ops = generated(10, 3);
    // Flip the recorded result of the last read of block 5.
    let mut block = 0;
    let mut target = None;
    for (index, op) in ops.iter().enumerate() {
        match op {
            Op::Commit { .. } => {
                if block == 5 {
                    break;
                }
                block += 1;
            }
            Op::Find { .. } | Op::Mem { .. } | Op::MemTree { .. } if block == 5 => target = Some(index),
            _ => {}
        }
    }
    let target = target.expect("block 5 has a read");
    match &mut ops[target] {
        Op::Find { found, .. } | Op::Mem { found, .. } | Op::MemTree { found, .. } => *found = !*found,
        _ => unreachable!(),
    }
    let mut repo = MemoryRepo::new();
    let error = replay(
        &mut repo,
        ops.into_iter().map(Ok::<_, Infallible>),
        &ReplayOptions::default(),
        &RunMeta::default(),
        None,
        &mut |_| {},
    )
    .unwrap_err();
    let at = error.location().unwrap();
    assert_eq!((at.block, at.op_index), (5, target as u64), "{error}");
    assert!(matches!(error, ReplayError::ReadMismatch { .. }));
}
