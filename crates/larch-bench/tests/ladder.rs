//! The scale ladder (issue 40): a rung is deterministic from its seed, a setup streamed into a
//! store in parts makes exactly the commits of the in-memory generator, the context's reported
//! size is the one its tree has, and bad parameters are refused with typed errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::replay::{ReplayOptions, RunMeta, replay, replay_generated};
use larch_bench::{BlockKind, GenError, GenParams, Generator, ParamError, Rung};
use larch_core::{ContextRepo, Hash, Kind, MemoryRepo, Tree};
use larch_store::{PipelinedRepo, Repo};
use larch_trace::op::Op;

/// A small rung with its setup in parts (the 10x and mainnet rungs' shape at a reduced scale).
fn small_rung(seed: u64) -> GenParams {
    GenParams {
        seed,
        blocks: 30,
        accounts: 3000,
        ops_per_block: 150,
        cycle_length: 8,
        largest_map: Some(4000),
        delegates: Some(20),
        setup_part_ops: 4000,
        setup_part_items: 0,
        abandon_rate: 0.05,
        reorg_rate: 0.05,
    }
}

/// The commit hashes of `ops`, in order.
fn commits(ops: &[Op]) -> Vec<Hash> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Commit { hash, .. } => Some(hash.value()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rung_is_deterministic_from_its_seed() {
    let seed = 40;
    println!("seed {seed}");
    let (first, report) = Generator::new(small_rung(seed)).unwrap().collect().unwrap();
    let (second, again) = Generator::new(small_rung(seed)).unwrap().collect().unwrap();
    assert!(report.setup_blocks > 3, "the setup is in parts: {} blocks", report.setup_blocks);
    assert_eq!(commits(&first), commits(&second));
    assert_eq!(first, second);
    assert_eq!(report, again);
    // The setup's last commit (genesis, then the setup blocks) is the seed's.
    let setup_end = commits(&first)[report.setup_blocks as usize];
    let (other, _) = Generator::new(small_rung(seed + 1)).unwrap().collect().unwrap();
    assert_ne!(commits(&other)[report.setup_blocks as usize], setup_end);
}

/// Streams `params` into `repo` (a store), and checks every commit against the in-memory
/// generator's, and the store's head.
fn streamed_matches_in_memory<R: ContextRepo>(repo: &mut R, params: GenParams) -> Vec<BlockKind> {
    let (ops, report) = Generator::new(params.clone()).unwrap().collect().unwrap();
    let expected = commits(&ops);
    let mut made = Vec::new();
    let mut kinds = Vec::new();
    let run = replay_generated(
        repo,
        Generator::new(params).unwrap(),
        &ReplayOptions::default(),
        &RunMeta::default(),
        None,
        None,
        &mut |kind, block| {
            kinds.push(kind);
            made.push(Hash::from_base58(&block.commit).unwrap());
        },
    )
    .unwrap();
    assert_eq!(made, expected);
    assert_eq!(run.report, report);
    assert_eq!(run.setup.blocks, report.setup_blocks + 1);
    assert_eq!(run.regular.blocks, report.blocks - report.setup_blocks - 1);
    assert_eq!(run.regular.commits_checked, run.regular.blocks);
    kinds
}

#[test]
fn a_setup_streamed_into_a_store_makes_the_in_memory_generators_commits() {
    let params = small_rung(7);
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(dir.path()).unwrap();
    let kinds = streamed_matches_in_memory(&mut repo, params.clone());
    let parts = kinds.iter().filter(|kind| **kind == BlockKind::SetupPart).count();
    assert!(parts >= 3, "{parts} setup parts");
    assert_eq!(kinds.iter().filter(|kind| **kind == BlockKind::SetupEnd).count(), 1);
    assert_eq!(kinds.iter().filter(|kind| **kind == BlockKind::Regular).count() as u64, params.blocks);
    let (_, report) = Generator::new(params).unwrap().collect().unwrap();
    assert_eq!(repo.head(), Some(report.final_commit));
    repo.close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}

#[test]
fn a_setup_streamed_through_the_commit_pipeline_makes_the_same_commits() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = PipelinedRepo::with_depth(Repo::open(dir.path()).unwrap(), 4).unwrap();
    streamed_matches_in_memory(&mut repo, small_rung(8));
    repo.into_inner().unwrap().close().unwrap();
}

/// A large burst (20,000 accounts' balances in one block, past the pipelined store's release
/// threshold) streamed through the commit pipeline: the carried tree given back once the burst
/// is written (`PipelinedRepo::releases`) builds the in-memory generator's commits.
#[test]
fn a_large_burst_streamed_through_the_commit_pipeline_makes_the_same_commits() {
    let params = GenParams {
        seed: 9,
        blocks: 22,
        accounts: 20_000,
        ops_per_block: 200,
        cycle_length: 4,
        largest_map: Some(2_000),
        delegates: Some(20),
        setup_part_ops: 20_000,
        setup_part_items: 0,
        ..GenParams::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut repo = PipelinedRepo::with_depth(Repo::open(dir.path()).unwrap(), 4).unwrap();
    streamed_matches_in_memory(&mut repo, params);
    assert!(repo.releases() >= 1, "the burst's carried tree was never given back");
    repo.into_inner().unwrap().close().unwrap();
    assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
}

/// Streams `params` into a new store at `dir`, recording its regular blocks into `record`.
fn stream_into(dir: &std::path::Path, params: GenParams, record: Option<&mut dyn larch_trace::OpSink>) {
    let mut repo = Repo::open(dir).unwrap();
    let generator = Generator::new(params).unwrap();
    let (options, meta) = (ReplayOptions::default(), RunMeta::default());
    let mut progress = |_: BlockKind, _: &larch_bench::stats::BlockStats| {};
    // (A trait object's lifetime shortens behind `&mut`, but not inside an `Option`.)
    let record = record.map(|sink| -> &mut dyn larch_trace::OpSink { sink });
    replay_generated(&mut repo, generator, &options, &meta, None, record, &mut progress).unwrap();
    repo.close().unwrap();
}

/// The regular blocks of a streamed replay, recorded as a trace and replayed onto a store that
/// holds only the setup (a streamed replay with no regular block): the same commits, reading
/// ahead or not; without `store_commits` the trace's first checkout is unknown to the replay.
#[test]
fn recorded_regular_blocks_replay_onto_the_setups_store() {
    let params = small_rung(11);
    let (ops, report) = Generator::new(params.clone()).unwrap().collect().unwrap();
    let regular_commits = &commits(&ops)[report.setup_blocks as usize + 1..];
    let stream = |dir: &std::path::Path, blocks: u64, record: Option<&mut dyn larch_trace::OpSink>| {
        stream_into(dir, GenParams { blocks, ..params.clone() }, record)
    };
    let recorded = tempfile::tempdir().unwrap();
    let mut trace: Vec<Op> = Vec::new();
    stream(recorded.path(), params.blocks, Some(&mut trace));
    assert_eq!(commits(&trace), regular_commits);
    // The recorded operations are the in-memory generator's after its setup.
    assert_eq!(trace[..], ops[ops.len() - trace.len()..]);

    // Onto a repository without the setup's commits: the store's error, not a dangling commit.
    let mut empty = MemoryRepo::new();
    let options = ReplayOptions { store_commits: true, ..ReplayOptions::default() };
    let ops = trace.iter().cloned().map(Ok::<Op, std::io::Error>);
    let err = replay(&mut empty, ops, &options, &RunMeta::default(), None, &mut |_| {}).unwrap_err();
    assert!(matches!(err, larch_bench::replay::ReplayError::NotInStore { .. }), "{err}");
    assert_eq!(empty.commit_count(), 0);

    for read_ahead in [None, Some(larch_bench::ReadAhead { ops: 64, threads: 2 })] {
        let setup = tempfile::tempdir().unwrap();
        stream(setup.path(), 0, None);
        let mut repo = Repo::open(setup.path()).unwrap();
        let commits_before = repo.commit_count();
        let ops = || trace.iter().cloned().map(Ok::<Op, std::io::Error>);
        let refused =
            replay(&mut repo, ops(), &ReplayOptions::default(), &RunMeta::default(), None, &mut |_| {});
        let err = refused.expect_err("a checkout of a commit the trace did not make");
        assert!(matches!(err, larch_bench::replay::ReplayError::UnknownCommit { .. }), "{err}");
        assert_eq!(repo.commit_count(), commits_before, "a refused replay committed nothing");

        let options = ReplayOptions { store_commits: true, read_ahead, ..ReplayOptions::default() };
        let summary = replay(&mut repo, ops(), &options, &RunMeta::default(), None, &mut |_| {}).unwrap();
        assert_eq!(summary.commits_checked, regular_commits.len() as u64);
        assert_eq!(repo.head(), Some(report.final_commit));
        repo.close().unwrap();
        assert!(larch_store::fsck(setup.path()).unwrap().is_clean());
    }
}

/// Values and directories of `tree`, itself included.
fn count(tree: &Tree) -> (u64, u64) {
    if tree.kind() == Kind::Contents {
        return (1, 0);
    }
    let mut totals = (0, 1);
    for (_, child) in tree.list::<&[u8]>(&[], 0, None).unwrap() {
        let (values, dirs) = count(&child);
        totals = (totals.0 + values, totals.1 + dirs);
    }
    totals
}

#[test]
fn the_reported_context_size_is_the_trees() {
    for setup_part_ops in [0, 5000] {
        let params = GenParams { blocks: 0, setup_part_ops, ..small_rung(3) };
        let (ops, report) = Generator::new(params.clone()).unwrap().collect().unwrap();
        let mut repo = MemoryRepo::new();
        let options = ReplayOptions::default();
        let meta = RunMeta::default();
        let ops = ops.into_iter().map(Ok::<_, std::convert::Infallible>);
        replay(&mut repo, ops, &options, &meta, None, &mut |_| {}).unwrap();
        let tree = repo.checkout(&report.final_commit).unwrap();
        assert_eq!(count(&tree), (report.setup_values, report.setup_dirs), "setup-part-ops {setup_part_ops}");
        assert_eq!(report.setup_dirs, params.setup_directories());
    }
}

/// The tree of the setup's last commit: `ops` replayed into memory.
fn setup_tree(ops: Vec<Op>, report: &larch_bench::GenReport) -> Hash {
    let mut repo = MemoryRepo::new();
    let ops = ops.into_iter().map(Ok::<_, std::convert::Infallible>);
    replay(&mut repo, ops, &ReplayOptions::default(), &RunMeta::default(), None, &mut |_| {}).unwrap();
    repo.checkout(&report.final_commit).unwrap().hash()
}

#[test]
fn setup_parts_bounded_by_items_are_smaller_and_build_the_same_context() {
    let base = GenParams { blocks: 0, ..small_rung(3) };
    let (ops, report) = Generator::new(base.clone()).unwrap().collect().unwrap();
    let items = 500;
    let bounded = GenParams { setup_part_items: items, ..base };
    let (bounded_ops, bounded_report) = Generator::new(bounded).unwrap().collect().unwrap();
    // Each part holds at most `items` directories of accounts, contracts or entries: a part of
    // big map entries (two operations each) stops at about 1,000 operations, not 4,000.
    assert!(
        bounded_report.setup_blocks > report.setup_blocks + 2,
        "{} parts bounded against {}",
        bounded_report.setup_blocks,
        report.setup_blocks
    );
    let parts: Vec<usize> = bounded_ops
        .split(|op| matches!(op, Op::Commit { .. }))
        .map(|part| part.iter().filter(|op| matches!(op, Op::Add { .. })).count())
        .collect();
    assert!(parts.iter().all(|&adds| adds <= 4000), "{parts:?}");
    let maps_part = parts.get(parts.len().saturating_sub(3)).copied().unwrap_or(0);
    assert!(maps_part < 2000, "a part of big map entries holds {maps_part} adds: {parts:?}");
    // The same context at the end of the setup, whatever its parts.
    assert_eq!(
        (bounded_report.setup_values, bounded_report.setup_dirs),
        (report.setup_values, report.setup_dirs)
    );
    assert_eq!(setup_tree(bounded_ops, &bounded_report), setup_tree(ops, &report));
}

#[test]
fn the_mainnet_rung_has_a_mainnet_sized_context() {
    let params = Rung::Mainnet.params(0, 1000);
    assert!(params.setup_directories() >= 20_000_000, "{}", params.setup_directories());
    assert!(params.setup_ops_estimate() >= 80_000_000, "{}", params.setup_ops_estimate());
    assert!(params.setup_part_ops > 0);
    let ten = Rung::X10.params(0, 1000);
    let one = Rung::X1.params(0, 1000);
    assert_eq!(one, GenParams { blocks: 1000, ..GenParams::default() });
    let ratio = ten.setup_directories() as f64 / one.setup_directories() as f64;
    assert!((7.0..13.0).contains(&ratio), "10x has {ratio} times the directories of 1x");
    // Regular blocks keep the default shape on every rung.
    for rung in Rung::ALL {
        let params = rung.params(5, 10);
        assert_eq!((params.ops_per_block, params.cycle_length), (2000, 256), "{rung}");
        assert_eq!(rung.name().parse::<Rung>(), Ok(rung));
    }
}

#[test]
fn bad_parameters_are_refused_with_typed_errors() {
    let refused = |params: GenParams| match Generator::new(params) {
        Err(GenError::Params(error)) => error,
        other => panic!("accepted or another error: {other:?}"),
    };
    let base = small_rung(1);
    assert_eq!(refused(GenParams { accounts: 99, ..base.clone() }), ParamError::Accounts(99));
    assert_eq!(refused(GenParams { ops_per_block: 3, ..base.clone() }), ParamError::OpsPerBlock(3));
    assert_eq!(refused(GenParams { cycle_length: 1, ..base.clone() }), ParamError::CycleLength(1));
    assert_eq!(refused(GenParams { reorg_rate: 0.9, ..base.clone() }), ParamError::Rate(0.9));
    assert_eq!(refused(GenParams { setup_part_ops: 999, ..base.clone() }), ParamError::SetupPartOps(999));
    assert_eq!(refused(GenParams { largest_map: Some(0), ..base.clone() }), ParamError::LargestMap(0));
    assert_eq!(
        refused(GenParams { largest_map: Some((1 << 31) + 1), ..base.clone() }),
        ParamError::LargestMap((1 << 31) + 1)
    );
    assert_eq!(
        refused(GenParams { delegates: Some(61), ..base.clone() }),
        ParamError::Delegates { value: 61, max: 60 }
    );
    assert!(Generator::new(GenParams { delegates: Some(60), ..base }).is_ok());
    assert_eq!("1X".parse::<Rung>(), Ok(Rung::X1));
    assert_eq!("100x".parse::<Rung>(), Err(ParamError::UnknownRung("100x".to_string())));
}
