//! End-to-end tests of the `larch` command: each runs the built binary in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_bench::{GenParams, Generator};
use larch_trace::format::create_trace;
use larch_trace::{Op, Scoped, TraceFormat};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GENESIS: &str = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj";

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A small generated trace (20 regular blocks) written by `larch trace gen`.
fn small_trace(dir: &Path, format: &str) -> PathBuf {
    let path = dir.join(format!("small.{format}"));
    let out = larch(&[
        "trace",
        "gen",
        "--out",
        path_str(&path),
        "--format",
        format,
        "--blocks",
        "20",
        "--accounts",
        "300",
        "--ops-per-block",
        "80",
        "--seed",
        "7",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("final commit"), "{}", stdout(&out));
    path
}

#[test]
fn replay_into_a_store_checks_hashes_and_writes_stats_report_and_a_clean_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let store = dir.path().join("store");
    let report = dir.path().join("report");
    let out = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store),
        "--report",
        path_str(&report),
        "--sync",
        "never",
        "--cache-size",
        "8M",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("22 blocks (complete)"), "{text}");
    assert!(text.contains("22 commits, all ok"), "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["blocks"], 22);
    assert_eq!(summary["complete"], true);
    assert!(summary["store_size_bytes"].as_u64().unwrap() > 0);
    let svgs = std::fs::read_dir(&report)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "svg"))
        .count();
    assert!(svgs >= 3, "{svgs} charts");
    assert!(std::fs::read_to_string(report.join("stats.jsonl")).unwrap().lines().count() >= 24);

    let fsck = larch(&["fsck", path_str(&store)]);
    assert!(fsck.status.success(), "{}{}", stdout(&fsck), stderr(&fsck));
    assert!(stdout(&fsck).contains("(0 spilled to a temporary file)"), "{}", stdout(&fsck));
    // With 16 records in memory at most and a 1 MiB cache: the same report, the frontier spilled.
    let small = larch(&["fsck", path_str(&store), "--max-pending", "16", "--cache-size", "1M"]);
    assert!(small.status.success(), "{}{}", stdout(&small), stderr(&small));
    assert!(!stdout(&small).contains("(0 spilled"), "{}", stdout(&small));
    let without_frontier = |out: &str| -> String {
        out.lines().filter(|line| !line.starts_with("records waiting")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(without_frontier(&stdout(&small)), without_frontier(&stdout(&fsck)));

    // The store now holds commits: a second replay into it is refused.
    let again = larch(&["replay", path_str(&trace), "--store", path_str(&store)]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("already holds commits"), "{}", stderr(&again));
}

#[test]
fn the_irmin_fixture_replays_to_the_mainnet_genesis_hash() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../larch-trace/tests/data/tezos_actions_1commit.repr");
    let out = larch(&["replay", path_str(&fixture), "--in-memory", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(summary["blocks"], 1);
    assert_eq!(summary["commits_checked"], 1);
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("s.jsonl");
    let out = larch(&["replay", path_str(&fixture), "--stats", path_str(&stats), "--sync", "never"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stat_text = std::fs::read_to_string(&stats).unwrap();
    assert!(stat_text.contains(GENESIS), "{stat_text}");
}

#[test]
fn conversion_round_trips_and_both_formats_replay_with_checks() {
    let dir = tempfile::tempdir().unwrap();
    let larch_trace = small_trace(dir.path(), "larch");
    let irmin = dir.path().join("t.irmin");
    let back = dir.path().join("t.back.irmin");
    let larch_again = dir.path().join("t.larch");
    for (input, output, to) in
        [(&larch_trace, &irmin, "irmin"), (&irmin, &larch_again, "larch"), (&larch_again, &back, "irmin")]
    {
        let out = larch(&["trace", "convert", path_str(input), path_str(output), "--to", to]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read(&irmin).unwrap(), std::fs::read(&back).unwrap());
    for trace in [&irmin, &larch_again] {
        let out = larch(&["replay", path_str(trace), "--in-memory"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("22 commits, all ok"), "{}", stdout(&out));
    }
    let info = larch(&["trace", "info", path_str(&irmin)]);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(stdout(&info).contains("in 22 blocks"), "{}", stdout(&info));
    let same = larch(&["trace", "convert", path_str(&irmin), path_str(&irmin), "--to", "larch"]);
    assert_eq!(same.status.code(), Some(2));
}

/// Writes a generated trace whose last commit records a wrong hash.
fn trace_with_wrong_commit(path: &Path) {
    let params = GenParams { blocks: 5, accounts: 200, ops_per_block: 40, ..GenParams::default() };
    let (mut ops, _) = Generator::new(params).unwrap().collect().unwrap();
    let last = ops.iter().rposition(|op| matches!(op, Op::Commit { .. })).unwrap();
    if let Some(Op::Commit { hash, .. }) = ops.get_mut(last) {
        let mut bytes = *hash.value().as_bytes();
        bytes[0] ^= 1;
        *hash = Scoped::Keep(larch_core::Hash::from_slice(&bytes).unwrap());
    }
    let mut sink = create_trace(path, TraceFormat::Larch, &[]).unwrap();
    for op in &ops {
        sink.write_op(op).unwrap();
    }
    sink.finish().unwrap();
}

#[test]
fn pipelined_replays_write_the_same_commits_as_committing_on_the_replay_thread() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let mut runs = Vec::new();
    // The commit thread (the default), syncs on a publisher thread, both, neither.
    for (name, extra) in [
        ("plain", &["--no-pipeline", "--sync", "commit"][..]),
        ("publisher", &["--no-pipeline", "--sync", "pipelined"][..]),
        ("pipeline", &[][..]),
        ("both", &["--sync", "pipelined"][..]),
        ("depth1", &["--pipeline-depth", "1"][..]),
        ("depth16", &["--pipeline-depth", "16"][..]),
        ("read_ahead", &["--read-ahead-ops", "64", "--read-ahead-threads", "3"][..]),
    ] {
        let store = dir.path().join(name);
        let mut args = vec!["replay", path_str(&trace), "--store", path_str(&store), "--json"];
        args.extend_from_slice(extra);
        let out = larch(&args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(summary["commits_checked"], 22, "{name}");
        assert_eq!(summary["last_commit"], summary["store_head"], "{name}: every commit published");
        let pipelined = summary["store"].as_str().unwrap().contains(", pipeline depth ");
        assert_eq!(pipelined, !extra.contains(&"--no-pipeline"), "{name}: {summary}");
        let walked = summary["read_ahead"]["walked"].as_u64();
        let skipped = summary["read_ahead"]["skipped"].as_u64();
        assert_eq!(walked.is_some(), name == "read_ahead", "{name}: {summary}");
        // How many are walked depends on the threads' timing; every path is one or the other.
        assert!(walked.zip(skipped).is_none_or(|(w, s)| w + s > 0), "{name}: {summary}");
        let fsck = larch(&["fsck", path_str(&store)]);
        assert!(fsck.status.success(), "{name}: {}{}", stdout(&fsck), stderr(&fsck));
        runs.push((summary["store_head"].clone(), std::fs::read(store.join("chunk.000000")).unwrap()));
    }
    assert!(runs.iter().all(|(head, _)| *head == runs[0].0), "the same last commit");
    assert!(runs[0].1 == runs[1].1, "syncing on a publisher thread writes the same pack");
}

#[test]
fn a_wrong_recorded_hash_fails_naming_the_block_and_removes_the_partial_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("wrong.trace");
    trace_with_wrong_commit(&trace);
    let store = dir.path().join("store");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--sync", "never"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("block 6"), "{err}");
    assert!(err.contains("commit"), "{err}");
    assert!(!store.exists(), "a partial store was left behind");
    // With --no-check the same trace replays.
    let out = larch(&["replay", path_str(&trace), "--in-memory", "--no-check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn malformed_traces_and_bad_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.trace");
    std::fs::write(&bad, b"NOTATRACE and more bytes").unwrap();
    let store = dir.path().join("store");
    let out = larch(&["replay", path_str(&bad), "--store", path_str(&store)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad.trace"), "{}", stderr(&out));
    assert!(!store.join("control").exists());

    let truncated = dir.path().join("truncated.trace");
    let full = std::fs::read(small_trace(dir.path(), "larch")).unwrap();
    std::fs::write(&truncated, &full[..full.len() / 2]).unwrap();
    let out = larch(&["replay", path_str(&truncated), "--store", path_str(&store)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("truncated.trace"), "{}", stderr(&out));
    assert!(!store.exists(), "a partial store was left behind");

    let missing = larch(&["replay", path_str(&dir.path().join("nope.trace")), "--in-memory"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("nope.trace"), "{}", stderr(&missing));

    let sync = larch(&["replay", "--sync", "sometimes"]);
    assert!(!sync.status.success());
    assert!(stderr(&sync).contains("sync"), "{}", stderr(&sync));
    let size = larch(&["replay", "--cache-size", "lots"]);
    assert!(!size.status.success());
    assert!(stderr(&size).contains("invalid size"), "{}", stderr(&size));
    let zero = larch(&["replay", "--read-ahead-ops", "0"]);
    assert!(!zero.status.success());
    assert!(stderr(&zero).contains("--read-ahead-ops"), "{}", stderr(&zero));
    let streamed = larch(&["replay", "--generate", "--read-ahead-ops", "64"]);
    assert!(!streamed.status.success());
    assert!(stderr(&streamed).contains("cannot be used with"), "{}", stderr(&streamed));
    let rung = larch(&["replay", "--scale", "10x", "--blocks", "1", "--read-ahead-ops", "64"]);
    assert_eq!(rung.status.code(), Some(2));
    assert!(stderr(&rung).contains("--read-ahead-ops needs a trace file"), "{}", stderr(&rung));
    let memory = larch(&["replay", "--in-memory", "--read-ahead-ops", "64"]);
    assert!(!memory.status.success());
    assert!(stderr(&memory).contains("cannot be used with"), "{}", stderr(&memory));
}

#[test]
fn fsck_reports_a_corrupted_store_and_a_path_that_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let store = dir.path().join("store");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--sync", "never"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pack = store.join("chunk.000000");
    let mut bytes = std::fs::read(&pack).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&pack, bytes).unwrap();
    let out = larch(&["fsck", path_str(&store)]);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("pack"), "{}", stdout(&out));
    let spilled = larch(&["fsck", path_str(&store), "--max-pending", "4"]);
    assert_eq!(spilled.status.code(), Some(1), "{}{}", stdout(&spilled), stderr(&spilled));
    let problems = |out: &str| {
        out.lines().skip_while(|line| !line.contains("problem(s)")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(problems(&stdout(&spilled)), problems(&stdout(&out)));

    let not_a_store = larch(&["fsck", path_str(dir.path())]);
    assert_eq!(not_a_store.status.code(), Some(2));
    assert!(!stderr(&not_a_store).is_empty());
}

#[test]
fn report_compare_and_plot_read_stat_files() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    for (stats, target) in [(&a, "--in-memory"), (&b, "--mmap")] {
        let out = larch(&["replay", path_str(&trace), target, "--stats", path_str(stats), "--sync", "never"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out =
        larch(&["report", "compare", &format!("memory={}", path_str(&a)), &format!("pack={}", path_str(&b))]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("memory") && text.contains("pack"), "{text}");
    let json = larch(&["report", "compare", "--json", path_str(&a), path_str(&b)]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(value["runs"].as_array().unwrap().len(), 2);
    let charts = dir.path().join("charts");
    let out = larch(&["report", "plot", path_str(&a), path_str(&b), "--out", path_str(&charts)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<_> = stdout(&out).lines().map(PathBuf::from).collect();
    assert!(written.len() >= 3);
    for chart in written {
        assert!(std::fs::read_to_string(chart).unwrap().starts_with("<svg"));
    }
}

#[test]
fn replay_without_a_trace_generates_the_default_one_and_checks_it() {
    // The README's first command, cut to 2 regular blocks (genesis and the full setup block still
    // run): the trace is generated by a child `larch trace gen`, then replayed with checks.
    let out = larch(&["replay", "--blocks", "2", "--json", "--sync", "never"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(summary["blocks"], 4);
    assert_eq!(summary["commits_checked"], 4);
    assert_eq!(summary["complete"], true);
    assert!(summary["context_ops"].as_u64().unwrap() > 100_000, "{summary}");
    assert!(summary["store"].as_str().unwrap().starts_with("pack:"), "{summary}");
    // The generator's report went to stderr, leaving stdout to the summary.
    assert!(stderr(&out).contains("final commit"), "{}", stderr(&out));
}

#[test]
fn replay_accepts_sync_every_n_as_two_words_and_names_its_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let store = dir.path().join("store");
    let out = larch(&["replay", path_str(&trace), "--store", path_str(&store), "--sync", "every", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(sync every 5, pipeline depth 4)"), "{text}");
    // The last commit named by the summary is the store's head, as `larch log` reads it.
    let log = larch(&["log", path_str(&store), "-n", "1", "--json"]);
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).unwrap();
    let head = log[0]["hash"].as_str().unwrap();
    assert!(text.contains(&format!("Last commit {head} (head of the store")), "{text}");
    let json = larch(&["replay", path_str(&trace), "--in-memory", "--json", "--sync", "every", "3"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let summary: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(summary["last_commit"], head, "the same trace gives the same last commit in memory");
    // A policy that does not parse is still an error.
    let out = larch(&["replay", path_str(&trace), "--in-memory", "--sync", "every", "zero"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn replay_with_verified_reads() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path(), "larch");
    let store = dir.path().join("store");
    let out = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store),
        "--sync",
        "never",
        "--verify-reads",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("22 commits, all ok"), "{}", stdout(&out));
}
