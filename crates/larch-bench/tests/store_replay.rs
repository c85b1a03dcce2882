//! The replayer on the persistent pack store: a generated trace replays with every hash checked, the
//! store's counters reach the summary, and the store is fsck-clean afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::replay::{ReadAhead, ReplayOptions, RunMeta, replay};
use larch_bench::{GenParams, Generator};
use larch_store::Repo;
use larch_trace::op::Op;

#[test]
fn a_generated_trace_replays_into_the_pack_store_with_hashes_checked() {
    let params = GenParams { blocks: 12, accounts: 300, ops_per_block: 60, ..GenParams::default() };
    let (ops, report) = Generator::new(params).unwrap().collect().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let summary = replay(
        &mut repo,
        ops.into_iter().map(Ok::<_, std::convert::Infallible>),
        &ReplayOptions::default(),
        &RunMeta::default(),
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(summary.blocks, report.blocks);
    assert_eq!(summary.commits_checked, report.blocks);
    assert!(summary.store_size_bytes.unwrap() > 0);
    assert!(summary.objects_written.unwrap() > 0);
    assert_eq!(repo.head(), Some(report.final_commit));
    repo.close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}

#[test]
fn a_replay_reading_ahead_makes_the_same_commits_and_walks_the_operations_paths() {
    let params = GenParams { blocks: 30, accounts: 2_000, ops_per_block: 150, ..GenParams::default() };
    let (ops, report) = Generator::new(params).unwrap().collect().unwrap();
    // Paths of the operations: one each, two for a copy.
    let paths: u64 = ops
        .iter()
        .map(|op| match op {
            Op::Checkout { .. } | Op::Commit { .. } => 0,
            Op::Copy { .. } => 2,
            _ => 1,
        })
        .sum();
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let options =
        ReplayOptions { read_ahead: Some(ReadAhead { ops: 256, threads: 4 }), ..ReplayOptions::default() };
    let summary = replay(
        &mut repo,
        ops.into_iter().map(Ok::<_, std::convert::Infallible>),
        &options,
        &RunMeta::default(),
        None,
        &mut |_| {},
    )
    .unwrap();
    // Every commit hash and read result checked against the trace.
    assert_eq!(summary.commits_checked, report.blocks);
    assert_eq!(repo.head(), Some(report.final_commit));
    // Every path queued is walked or skipped (how many are walked depends on the threads' timing:
    // the unit tests of `read_ahead` check the walks); a path repeated within 4,096 (a `find`
    // then an `add` of the same key) is queued once.
    let counts = summary.read_ahead.expect("the summary reports the walkers");
    assert!(counts.walked + counts.skipped > 0, "{counts:?}");
    assert!(counts.walked + counts.skipped < paths, "{counts:?} for {paths} paths");
    repo.close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}
