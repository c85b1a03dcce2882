//! Replayer semantics against the in-memory repository: context tables with Keep/Forget, checkout
//! through the recorded → real map, a reorg, an abandoned context, read and hash checks, typed
//! errors naming block, op and operation.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_bench::replay::{GcSchedule, GcWhenBusy, ReplayError, ReplayOptions, Replayer, RunMeta, replay};
use larch_bench::stats::{StatLine, read_stat_file, summarise};
use larch_bench::{GenParams, Generator};
use larch_core::{CommitInfo, Hash, MemoryRepo, Tree};
use larch_trace::{Op, OpKind, Scoped};
use std::convert::Infallible;

const GENESIS: &str = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj";

fn path(text: &str) -> larch_trace::Path {
    text.split('/').map(|step| step.as_bytes()).collect()
}

fn keep<T>(value: T) -> Scoped<T> {
    Scoped::Keep(value)
}

fn forget<T>(value: T) -> Scoped<T> {
    Scoped::Forget(value)
}

fn add(p: &str, value: &str, input: Scoped<u64>, out: Scoped<u64>) -> Op {
    Op::Add { path: path(p), value: value.as_bytes().to_vec(), input, out }
}

fn find(p: &str, found: bool, input: Scoped<u64>) -> Op {
    Op::Find { path: path(p), found, input }
}

fn commit(hash: Scoped<Hash>, date: i64, parents: Vec<Scoped<Hash>>, input: Scoped<u64>) -> Op {
    Op::Commit { hash, date, message: format!("block at {date}"), parents, input }
}

/// The Tezos mainnet genesis block (irmin's `tezos_actions_1commit.repr`).
fn genesis_block() -> Vec<Op> {
    let protocol = hex::decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21").unwrap();
    vec![
        find("data/version", false, keep(0)),
        add("data/version", "genesis", forget(0), keep(1)),
        find("data/sandbox_parameter", false, keep(1)),
        Op::Add { path: path("protocol"), value: protocol, input: forget(1), out: keep(2) },
        Op::Add { path: path("test_chain"), value: vec![0], input: forget(2), out: keep(3) },
        Op::Commit {
            hash: keep(GENESIS.parse().unwrap()),
            date: 1_530_374_852,
            message: "Genesis".to_string(),
            parents: vec![],
            input: forget(3),
        },
    ]
}

/// Expected commit hashes of [`scenario`], computed directly with larch-core trees (without the
/// replayer's tables): genesis, b1, b2a, b2b (a sibling of b2a: the reorg), b3 (back on b2a).
fn expected_hashes() -> [Hash; 5] {
    let mut repo = MemoryRepo::new();
    let mut tree: Tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    tree.add(
        &["protocol"],
        hex::decode("38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21").unwrap(),
    )
    .unwrap();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    let genesis = repo.commit(&tree, &[], CommitInfo::tezos(1_530_374_852, "Genesis")).unwrap();
    assert_eq!(genesis.to_base58(), GENESIS);

    let mut t1 = repo.checkout(&genesis).unwrap();
    t1.add(&["a", "b"], b"1".to_vec()).unwrap();
    t1.add(&["a", "c"], b"2".to_vec()).unwrap();
    let b1 = repo.commit(&t1, &[genesis], CommitInfo::tezos(10, "block at 10")).unwrap();

    let mut t2a = repo.checkout(&b1).unwrap();
    t2a.add(&["d"], b"x".to_vec()).unwrap();
    let b2a = repo.commit(&t2a, &[b1], CommitInfo::tezos(20, "block at 20")).unwrap();

    let mut t2b = repo.checkout(&b1).unwrap();
    t2b.remove(&["a", "b"]).unwrap();
    let sub = t2b.find_tree(&["a"]).unwrap().unwrap();
    t2b.add_tree(&["z"], &sub).unwrap();
    let b2b = repo.commit(&t2b, &[b1], CommitInfo::tezos(21, "block at 21")).unwrap();

    let mut t3 = repo.checkout(&b2a).unwrap();
    t3.add(&["e"], b"y".to_vec()).unwrap();
    let b3 = repo.commit(&t3, &[b2a], CommitInfo::tezos(30, "block at 30")).unwrap();
    [genesis, b1, b2a, b2b, b3]
}

/// Five blocks: genesis; b1 (with an abandoned context 12 read once and never committed, and an
/// output forgotten at once); b2a; b2b built again on b1 (a reorg: sibling of b2a, with a remove
/// and a copy); b3 back on b2a.
fn scenario() -> Vec<Op> {
    let [genesis, b1, b2a, b2b, b3] = expected_hashes();
    let mut ops = genesis_block();
    ops.extend([
        // Block 1 (ops 6..): on genesis.
        Op::Checkout { commit: keep(genesis), out: keep(10) },
        add("a/b", "1", forget(10), keep(11)),
        Op::Mem { path: path("a/b"), found: true, input: keep(11) },
        add("junk", "never committed", keep(11), keep(12)),
        add("junk2", "dropped at once", keep(11), forget(13)),
        find("junk", true, forget(12)),
        add("a/c", "2", forget(11), keep(14)),
        Op::MemTree { path: path("a"), found: true, input: keep(14) },
        commit(keep(b1), 10, vec![forget(genesis)], forget(14)),
        // Block 2 (ops 15..): b2a on b1.
        Op::Checkout { commit: keep(b1), out: keep(20) },
        add("d", "x", forget(20), keep(21)),
        commit(keep(b2a), 20, vec![keep(b1)], forget(21)),
        // Block 3 (ops 18..): the reorg, b2b on b1 again.
        Op::Checkout { commit: keep(b1), out: keep(30) },
        Op::Remove { path: path("a/b"), input: forget(30), out: keep(31) },
        Op::Copy { from: path("a"), to: path("z"), input: forget(31), out: keep(32) },
        Op::MemTree { path: path("z/c"), found: true, input: keep(32) },
        find("z/b", false, keep(32)),
        commit(forget(b2b), 21, vec![forget(b1)], forget(32)),
        // Block 4 (ops 24..): back on b2a.
        Op::Checkout { commit: keep(b2a), out: keep(40) },
        find("d", true, keep(40)),
        find("z", false, keep(40)),
        add("e", "y", forget(40), keep(41)),
        commit(keep(b3), 30, vec![forget(b2a)], forget(41)),
    ]);
    ops
}

fn ok_ops(ops: Vec<Op>) -> impl Iterator<Item = Result<Op, Infallible>> {
    ops.into_iter().map(Ok)
}

fn run(ops: Vec<Op>, options: ReplayOptions) -> Result<larch_bench::RunSummary, ReplayError> {
    let mut repo = MemoryRepo::new();
    replay(&mut repo, ok_ops(ops), &options, &RunMeta::default(), None, &mut |_| {})
}

#[test]
fn replays_the_genesis_fixture() {
    let mut repo = MemoryRepo::new();
    let summary = replay(
        &mut repo,
        ok_ops(genesis_block()),
        &ReplayOptions::default(),
        &RunMeta::default(),
        None,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((summary.blocks, summary.ops, summary.reads_checked, summary.commits_checked), (1, 6, 2, 1));
    assert!(repo.commit_record(&GENESIS.parse().unwrap()).is_some());
}

#[test]
fn replays_a_reorg_and_an_abandoned_context() {
    let hashes = expected_hashes();
    let mut repo = MemoryRepo::new();
    let mut replayer = Replayer::new(&mut repo, ReplayOptions::default());
    let mut blocks = Vec::new();
    for op in scenario() {
        if let Some(block) = replayer.apply(op).unwrap() {
            blocks.push(block);
        }
    }
    let commits: Vec<String> = blocks.iter().map(|b| b.commit.clone()).collect();
    let expected: Vec<String> = hashes.iter().map(Hash::to_base58).collect();
    assert_eq!(commits, expected);
    assert_eq!(blocks.iter().map(|b| b.first_op).collect::<Vec<_>>(), [0, 6, 15, 18, 24]);
    assert_eq!(blocks.iter().map(|b| b.ops).collect::<Vec<_>>(), [6, 9, 3, 6, 5]);
    assert_eq!(replayer.reads_checked(), 2 + 3 + 2 + 2);
    assert_eq!(replayer.commits_checked(), 5);
    // Every context was forgotten; only commits tagged Keep at their last use remain mapped.
    assert_eq!(replayer.live_contexts(), 0);
    assert_eq!(replayer.real_commit(&hashes[4]), Some(hashes[4]));
    assert_eq!(replayer.real_commit(&hashes[1]), None, "b1 was forgotten by the reorg's parent");
    assert_eq!(replayer.real_commit(&hashes[3]), None, "b2b was forgotten at its commit");
    assert_eq!(blocks[1].op_times.add.count, 4);
    assert_eq!(blocks[3].op_times.copy.count, 1);
    assert_eq!(blocks[3].reads_checked, 2);
    drop(replayer);
    assert_eq!(repo.commit_count(), 5);
}

/// The scenario with block 2's commit (op 17) recording b2b's hash instead of b2a's.
fn scenario_with_wrong_commit_hash() -> Vec<Op> {
    let mut ops = scenario();
    if let Op::Commit { hash, .. } = &mut ops[17] {
        *hash = keep(expected_hashes()[3]);
    }
    ops
}

/// Checks that `error` is the hash mismatch of block 2's commit (op 17).
fn assert_block_2_commit_mismatch(error: &ReplayError) {
    match error {
        ReplayError::HashMismatch { at, expected, actual } => {
            assert_eq!((at.block, at.op_index, at.kind), (2, 17, OpKind::Commit));
            assert_eq!(*expected, expected_hashes()[3]);
            assert_eq!(*actual, expected_hashes()[2]);
        }
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn wrong_recorded_hash_names_block_and_op() {
    let error = run(scenario_with_wrong_commit_hash(), ReplayOptions::default()).unwrap_err();
    assert_block_2_commit_mismatch(&error);
    let message = error.to_string();
    assert!(message.starts_with("block 2, op 17 (commit): trace says commit Co"), "{message}");
}

#[test]
fn wrong_recorded_hash_fails_a_pipelined_replay_naming_the_same_block_and_op() {
    // Through a pipelined store writer the commit's hash is checked on its commit thread, and the
    // difference is reported by a later call: the replay still names the commit at fault.
    let dir = tempfile::tempdir().unwrap();
    let store = larch_store::Repo::open(dir.path()).unwrap();
    let mut repo = larch_store::PipelinedRepo::new(store).unwrap();
    let ops = ok_ops(scenario_with_wrong_commit_hash());
    let error = replay(&mut repo, ops, &ReplayOptions::default(), &RunMeta::default(), None, &mut |_| {})
        .unwrap_err();
    assert_block_2_commit_mismatch(&error);
}

#[test]
fn wrong_read_result_names_path_and_results() {
    let mut ops = scenario();
    ops[8] = Op::Mem { path: path("a/b"), found: false, input: keep(11) };
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "block 1, op 8 (mem a/b): trace says no contents, replay says contents present"
    );
    let mut ops = scenario();
    ops[25] = find("d", false, keep(40));
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    assert_eq!(error.to_string(), "block 4, op 25 (find d): trace says not found, replay says found");
    assert!(matches!(error, ReplayError::ReadMismatch { expected: false, actual: true, .. }));
}

#[test]
fn undefined_and_forgotten_contexts_are_errors() {
    let mut ops = genesis_block();
    ops[2] = find("data/sandbox_parameter", false, keep(99));
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    assert!(matches!(&error, ReplayError::UndefinedContext { id: 99, at } if at.op_index == 2), "{error}");

    // Context 0 is forgotten by op 1; reading it again is an error, not a panic.
    let mut ops = genesis_block();
    ops.insert(2, find("data/version", false, keep(0)));
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    assert!(matches!(error, ReplayError::UndefinedContext { id: 0, .. }));
    assert!(error.to_string().contains("context 0 is not defined"));
}

#[test]
fn checkout_of_an_unknown_or_forgotten_hash_is_an_error() {
    let mut ops = genesis_block();
    let unknown = Hash::of_bytes(b"no such commit");
    ops.push(Op::Checkout { commit: keep(unknown), out: keep(5) });
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    match &error {
        ReplayError::UnknownCommit { at, hash } => {
            assert_eq!((at.block, at.op_index, at.kind), (1, 6, OpKind::Checkout));
            assert_eq!(*hash, unknown);
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(error.to_string().starts_with(&format!("block 1, op 6 (checkout {unknown})")));

    // b2a's hash is forgotten as block 4's parent: checking it out again fails.
    let mut ops = scenario();
    let b2a = expected_hashes()[2];
    ops.push(Op::Checkout { commit: keep(b2a), out: keep(50) });
    assert!(matches!(run(ops, ReplayOptions::default()), Err(ReplayError::UnknownCommit { .. })));
}

#[test]
fn copy_of_a_missing_source_is_an_error() {
    let mut ops = scenario();
    ops[20] = Op::Copy { from: path("nowhere"), to: path("z"), input: forget(31), out: keep(32) };
    let error = run(ops, ReplayOptions::default()).unwrap_err();
    assert!(matches!(error, ReplayError::CopySourceMissing { .. }));
    assert_eq!(error.to_string(), "block 3, op 20 (copy nowhere -> z): copy source does not exist");
}

#[test]
fn no_check_replays_through_wrong_results_and_hashes() {
    let mut ops = scenario();
    let bogus = Hash::of_bytes(b"bogus b1");
    // b1 recorded under a wrong hash, used consistently by later checkouts and parents.
    let b1 = expected_hashes()[1];
    for op in &mut ops {
        match op {
            Op::Checkout { commit, .. } if commit.value() == b1 => *commit = keep(bogus),
            Op::Commit { hash, parents, .. } => {
                if hash.value() == b1 {
                    *hash = keep(bogus);
                }
                for parent in parents.iter_mut().filter(|p| p.value() == b1) {
                    *parent = keep(bogus);
                }
            }
            _ => {}
        }
    }
    ops[8] = Op::Mem { path: path("a/b"), found: false, input: keep(11) };
    assert!(matches!(run(ops.clone(), ReplayOptions::default()), Err(ReplayError::ReadMismatch { .. })));
    let summary = run(ops, ReplayOptions { check_hashes: false, ..ReplayOptions::default() }).unwrap();
    assert_eq!(summary.blocks, 5);
    assert_eq!((summary.reads_checked, summary.commits_checked), (0, 0));
    assert!(!summary.check_hashes);
    assert!(summary.to_string().contains("checks off"));
}

#[test]
fn max_blocks_stops_reading_the_trace() {
    let mut pulled = 0;
    let ops = scenario().into_iter().map(|op| {
        pulled += 1;
        Ok::<_, Infallible>(op)
    });
    let mut repo = MemoryRepo::new();
    let options = ReplayOptions { max_blocks: Some(2), ..ReplayOptions::default() };
    let mut seen = Vec::new();
    let summary =
        replay(&mut repo, ops, &options, &RunMeta::default(), None, &mut |block| seen.push(block.block))
            .unwrap();
    assert_eq!(summary.blocks, 2);
    assert_eq!(seen, [0, 1]);
    assert_eq!(pulled, 15, "stops without pulling the first op past the limit");
    assert_eq!(summary.ops, 15);
    assert_eq!(repo.commit_count(), 2);
}

#[derive(Debug, thiserror::Error)]
#[error("frame truncated")]
struct Truncated;

#[test]
fn reader_errors_name_the_op_index() {
    let ops = genesis_block().into_iter().map(Ok).chain(std::iter::once(Err(Truncated)));
    let mut repo = MemoryRepo::new();
    let error = replay(&mut repo, ops, &ReplayOptions::default(), &RunMeta::default(), None, &mut |_| {})
        .unwrap_err();
    assert!(matches!(error, ReplayError::Trace { op_index: 6, .. }));
    assert_eq!(error.to_string(), "reading op 6 of the trace: frame truncated");
    assert!(error.location().is_none());
}

#[test]
fn stat_lines_parse_back_into_the_same_summary() {
    let mut ops = scenario();
    // Two trailing operations after the last commit: applied, in no block.
    ops.push(Op::Checkout { commit: keep(expected_hashes()[4]), out: keep(60) });
    ops.push(find("e", true, forget(60)));
    let mut repo = MemoryRepo::new();
    let mut out = Vec::new();
    let meta = RunMeta { trace: "scenario.trace".to_string(), store: "memory".to_string() };
    let summary =
        replay(&mut repo, ok_ops(ops), &ReplayOptions::default(), &meta, Some(&mut out), &mut |_| {})
            .unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 5 + 1);
    for line in &lines {
        let _: StatLine = serde_json::from_str(line).unwrap();
    }
    assert!(lines[0].contains(r#""type":"header""#));
    assert!(lines[6].contains(r#""type":"end""#));

    let file = read_stat_file(&out[..]).unwrap();
    assert_eq!(file.header.trace, "scenario.trace");
    assert_eq!(file.header.store, "memory");
    assert!(file.header.options.check_hashes);
    assert_eq!(file.blocks.len(), 5);
    assert_eq!(file.end.as_ref().map(|e| (e.blocks, e.ops, e.trailing_ops)), Some((5, 31, 2)));
    assert_eq!(file.blocks[4].commit, expected_hashes()[4].to_base58());
    assert!(file.blocks[4].backend.objects_written.unwrap() > 0);
    assert_eq!(summarise(&file, None), summary);

    assert_eq!(summary.blocks, 5);
    assert_eq!(summary.ops, 29);
    assert_eq!(summary.trailing_ops, 2);
    assert!(summary.complete);
    assert_eq!(summary.context_ops, 29 - 5 - 4);
    assert_eq!(summary.adds, 9);
    assert_eq!(summary.reads_checked, 9);
    assert_eq!(summary.commits_checked, 5);
    assert_eq!(summary.regular_block_time.as_ref().map(|d| d.count), Some(3));
    let kinds: Vec<(String, u64)> = summary.op_kinds.iter().map(|k| (k.kind.clone(), k.count)).collect();
    assert_eq!(
        kinds.iter().map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(" "),
        "checkout=4 add=9 remove=1 copy=1 find=6 mem=1 mem_tree=2 commit=5"
    );
    let table = summary.to_string();
    assert!(table.contains("checked 9 reads and 5 commits, all ok"), "{table}");
    let json = serde_json::to_string(&summary).unwrap();
    let back: larch_bench::RunSummary = serde_json::from_str(&json).unwrap();
    assert_eq!(back, summary);
}

/// A memory repository that records the GC hooks the replayer calls: each GC "runs" until
/// `runs_for` more commits have been made, then finishes.
struct GcRecorder {
    repo: MemoryRepo,
    commits: Vec<Hash>,
    started: Vec<(usize, Hash)>,
    running_until: Option<usize>,
    runs_for: usize,
    waits: usize,
}

impl GcRecorder {
    fn new(runs_for: usize) -> GcRecorder {
        GcRecorder {
            repo: MemoryRepo::new(),
            commits: vec![],
            started: vec![],
            running_until: None,
            runs_for,
            waits: 0,
        }
    }
}

impl larch_core::ContextRepo for GcRecorder {
    type Error = larch_core::RepoError;

    fn empty_tree(&self) -> Tree {
        self.repo.empty_tree()
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree, Self::Error> {
        self.repo.checkout(commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, Self::Error> {
        let hash = self.repo.commit(tree, parents, info)?;
        self.commits.push(hash);
        Ok(hash)
    }

    fn gc_start(&mut self, commit: &Hash) -> Result<bool, Self::Error> {
        assert!(self.running_until.is_none(), "a GC started while another runs");
        self.started.push((self.commits.len(), *commit));
        self.running_until = Some(self.commits.len() + self.runs_for);
        Ok(true)
    }

    fn gc_running(&self) -> bool {
        self.running_until.is_some()
    }

    fn gc_finish(&mut self, wait: bool) -> Result<Option<larch_core::GcSummary>, Self::Error> {
        match self.running_until {
            Some(until) if wait || self.commits.len() >= until => {
                self.waits += usize::from(wait);
                self.running_until = None;
                Ok(Some(larch_core::GcSummary { total_s: 0.5, copied_bytes: 3, ..Default::default() }))
            }
            _ => Ok(None),
        }
    }
}

/// `--gc-every 1 --gc-keep 1` on the five-block scenario: after blocks 2, 3 and 4 (not after block
/// 1: its target would be genesis, the oldest commit) a GC starts on the commit of the block one
/// behind; with `GcWhenBusy::Wait` the one still running when the next is due is waited for, and
/// the replay's end waits for the last one; the stat lines and the summary report them all.
#[test]
fn a_gc_schedule_starts_collections_on_the_commit_keep_blocks_behind() {
    let mut repo = GcRecorder::new(2);
    let schedule = GcSchedule { every: 1, keep: 1, when_busy: GcWhenBusy::Wait };
    let options = ReplayOptions { gc: Some(schedule), ..ReplayOptions::default() };
    let mut blocks = Vec::new();
    let ops = scenario().into_iter().map(Ok::<_, Infallible>);
    let summary =
        replay(&mut repo, ops, &options, &RunMeta::default(), None, &mut |block| blocks.push(block.clone()))
            .unwrap();
    let hashes = expected_hashes();
    // Block b's commit is hashes[b] (b2a is block 2, b2b block 3, b3 block 4).
    let targets: Vec<(usize, Hash)> = repo.started.clone();
    assert_eq!(targets, vec![(3, hashes[1]), (4, hashes[2]), (5, hashes[3])]);
    assert_eq!(repo.waits, 3, "each GC was still running when the next was due, the last one at the end");
    let gc = |b: usize| blocks[b].gc.clone().unwrap();
    assert!(!gc(2).started && !gc(2).running, "the GC after block 2 is reported by block 3");
    assert!(gc(3).started && gc(3).running && gc(3).finished.is_empty());
    assert_eq!(gc(4).finished.len(), 1);
    let gc_summary = summary.gc.clone().expect("a GC summary");
    // The GC started after the last block and the two that switched after it (waited for by the
    // schedule, then by the end) count too.
    assert_eq!((gc_summary.started, gc_summary.finished, gc_summary.copied_bytes), (3, 3, 9));
    assert_eq!(gc_summary.finished_at_close, 2);
    assert!(summary.to_string().contains("Garbage collection"));
}

/// Replays a small generated 14-block trace (genesis, setup, 12 regular blocks) with a GC due after
/// every second block from block 2 on, keeping one block, into a recorder whose GCs each run for
/// three commits. Returns the GCs started (commits made before each start, and its target: the
/// commit of the block `keep` behind the due block), the waits, and the summary.
fn replay_busy_schedule(when_busy: GcWhenBusy) -> (Vec<(usize, usize)>, usize, larch_bench::RunSummary) {
    let params = GenParams {
        blocks: 12,
        accounts: 100,
        ops_per_block: 20,
        abandon_rate: 0.0,
        reorg_rate: 0.0,
        ..GenParams::default()
    };
    let (ops, _) = Generator::new(params).unwrap().collect().unwrap();
    let mut repo = GcRecorder::new(3);
    let options =
        ReplayOptions { gc: Some(GcSchedule { every: 2, keep: 1, when_busy }), ..ReplayOptions::default() };
    let summary = replay(&mut repo, ok_ops(ops), &options, &RunMeta::default(), None, &mut |_| {}).unwrap();
    assert_eq!(repo.commits.len(), 14);
    // Each target as the index of its commit (block b's commit is commits[b]).
    let started = repo
        .started
        .iter()
        .map(|(made, target)| (*made, repo.commits.iter().position(|c| c == target).unwrap()))
        .collect();
    (started, repo.waits, summary)
}

/// `defer`: a GC due while the previous one runs starts after the first block that ends with the
/// previous one finished, on the commit it was due on; a newer due GC supersedes a deferred one
/// (counted as never started); the replay never waits.
#[test]
fn a_due_gc_is_deferred_while_the_previous_one_runs() {
    let (started, waits, summary) = replay_busy_schedule(GcWhenBusy::Defer);
    // Due after blocks 2, 4, 6, 8, 10, 12. Block 2's GC (target block 1) runs until 6 commits
    // are made; block 4's (target 3) is deferred and starts after block 5; block 6's (target 5)
    // is deferred, then superseded by block 8's (target 7), which starts at once (the previous
    // finished with block 8); block 10's (target 9) is deferred and starts after block 11;
    // block 12's is deferred and the trace ends: it never starts, and the end waits for block
    // 11's.
    assert_eq!(started, vec![(3, 1), (6, 3), (9, 7), (12, 9)]);
    assert_eq!(waits, 1, "only the end waits");
    let gc = summary.gc.expect("a GC summary");
    assert_eq!((gc.started, gc.deferred, gc.skipped, gc.waited_s), (4, 4, 2, 0.0));
    assert_eq!((gc.finished, gc.finished_at_close), (4, 1));
    let table = summary_table(&gc);
    assert!(table.contains("GCs deferred"), "{table}");
    // `defer` is the default policy (`larch replay --gc-when-busy`).
    assert_eq!(replay_busy_schedule(GcWhenBusy::default()).0, started);
}

/// `skip` (irmin-bench's behaviour): a GC due while the previous one runs is not started.
#[test]
fn a_due_gc_is_skipped_while_the_previous_one_runs() {
    let (started, waits, summary) = replay_busy_schedule(GcWhenBusy::Skip);
    assert_eq!(started, vec![(3, 1), (7, 5), (11, 9)]);
    // The last GC finished with the last block: the end has none to wait for.
    assert_eq!(waits, 0);
    let gc = summary.gc.expect("a GC summary");
    assert_eq!((gc.started, gc.deferred, gc.skipped), (3, 0, 3));
}

/// `wait`: every due GC starts on time, after waiting for the previous one.
#[test]
fn a_due_gc_waits_for_the_previous_one() {
    let (started, waits, summary) = replay_busy_schedule(GcWhenBusy::Wait);
    assert_eq!(started, vec![(3, 1), (5, 3), (7, 5), (9, 7), (11, 9), (13, 11)]);
    assert_eq!(waits, 6, "five due GCs and the end waited");
    let gc = summary.gc.expect("a GC summary");
    assert_eq!((gc.started, gc.deferred, gc.skipped), (6, 0, 0));
    assert_eq!((gc.finished, gc.finished_at_close), (6, 1));
}

fn summary_table(gc: &larch_bench::stats::GcRunSummary) -> String {
    gc.to_string()
}
