//! The scale ladder on the command line (issue 40): a streamed replay ends on the commit the
//! trace generator reports for the same parameters, its summary feeds `larch report curve`, and
//! bad ladder arguments are clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;
use common::{larch, path_str, text};

#[test]
fn a_streamed_replay_ends_on_the_generators_commit_and_plots_its_cost_curve() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let args = ["--blocks", "6", "--seed", "3", "--setup-part-ops", "60000"];
    let generated = larch(&[&["trace", "gen", "--out", path_str(&trace)][..], &args[..]].concat());
    assert!(generated.status.success(), "{}", text(&generated.stderr));
    let report = text(&generated.stdout);
    let final_commit =
        report.lines().find_map(|line| line.strip_prefix("final commit: ")).unwrap().to_string();
    assert!(report.contains("setup: 6 block(s)"), "{report}");

    let store = dir.path().join("store");
    let streamed =
        larch(&[&["replay", "--generate", "--json", "--store", path_str(&store)][..], &args[..]].concat());
    assert!(streamed.status.success(), "{}", text(&streamed.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&streamed.stdout).unwrap();
    assert_eq!(summary["last_commit"].as_str(), Some(final_commit.as_str()));
    assert_eq!(summary["store_head"].as_str(), Some(final_commit.as_str()));
    assert_eq!(summary["setup_blocks"].as_u64(), Some(6));
    assert_eq!(summary["blocks"].as_u64(), Some(6), "the regular blocks' summary");
    assert_eq!(summary["setup"]["blocks"].as_u64(), Some(7), "genesis and the setup");
    assert!(summary["setup_values"].as_u64().unwrap() > 300_000);

    let json = dir.path().join("run.json");
    std::fs::write(&json, &streamed.stdout).unwrap();
    let out = dir.path().join("report");
    let curve = larch(&["report", "curve", &format!("small={}", path_str(&json)), "-o", path_str(&out)]);
    assert!(curve.status.success(), "{}", text(&curve.stderr));
    let table = text(&curve.stdout);
    assert!(table.lines().any(|line| line.starts_with("| small | ")), "{table}");
    let svg = std::fs::read_to_string(out.join("cost_curve.svg")).unwrap();
    assert!(svg.contains("context ops/s, CPU"), "{svg}");
}

#[test]
fn bad_ladder_arguments_are_clear_errors() {
    let unknown = larch(&["replay", "--scale", "100x"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("expected 1x, 10x or mainnet"), "{}", text(&unknown.stderr));
    let tiny = larch(&["replay", "--generate", "--setup-part-ops", "10", "--in-memory"]);
    assert_eq!(tiny.status.code(), Some(2));
    assert!(text(&tiny.stderr).contains("setup-part-ops must be 0"), "{}", text(&tiny.stderr));
    let both = larch(&["replay", "some.trace", "--scale", "10x"]);
    assert_eq!(both.status.code(), Some(2));
    let not_streamed = larch(&["report", "curve", "/dev/null"]);
    assert_eq!(not_streamed.status.code(), Some(2));
    // The default 1x replay reads a generated trace file: no streamed setup to limit.
    let unused = larch(&["replay", "--setup-cache-size", "16M", "--blocks", "2", "--in-memory"]);
    assert!(!unused.status.success());
    assert!(
        text(&unused.stderr).contains("--setup-cache-size applies to a streamed setup"),
        "{}",
        text(&unused.stderr)
    );
}

#[test]
fn a_streamed_setups_cache_limit_is_lifted_for_the_regular_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.jsonl");
    let run = |limit: &str, store: &str| {
        let store = dir.path().join(store);
        let out = larch(&[
            "replay",
            "--generate",
            "--json",
            "--blocks",
            "8",
            "--seed",
            "3",
            "--setup-part-ops",
            "60000",
            "--setup-cache-size",
            limit,
            "--stats",
            path_str(&stats),
            "--store",
            path_str(&store),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        summary["last_commit"].as_str().unwrap().to_string()
    };
    let unlimited = run("96M", "a");
    // A 256 KiB cache during the setup: the same commits, and the regular blocks' cache grows
    // past it (the whole --cache-size is theirs again).
    assert_eq!(run("256K", "b"), unlimited);
    let most = std::fs::read_to_string(&stats)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|line| line["backend"]["cache_bytes"].as_u64())
        .max()
        .unwrap();
    assert!(most > 1 << 20, "the regular blocks' cache held {most} bytes at most");
}

#[test]
fn recorded_regular_blocks_replay_onto_the_setups_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = |name: &str| dir.path().join(name);
    let trace = dir.path().join("regular.trace");
    let params = ["--generate", "--json", "--seed", "3", "--setup-part-ops", "60000"];
    let stream = |blocks: &str, name: &str, extra: &[&str]| {
        let path = store(name);
        let args = [&["replay", "--blocks", blocks, "--store", path_str(&path)][..], &params[..], extra];
        let out = larch(&args.concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let setup = stream("0", "setup", &[]);
    let full = stream("6", "full", &["--record-regular", path_str(&trace)]);
    assert_ne!(setup["last_commit"], full["last_commit"]);
    assert!(trace.exists() && !dir.path().join("regular.trace.partial").exists());

    let fresh_only = larch(&["replay", path_str(&trace), "--store", path_str(&store("setup"))]);
    assert!(!fresh_only.status.success());
    assert!(text(&fresh_only.stderr).contains("already holds commits"), "{}", text(&fresh_only.stderr));
    let onto = larch(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store("setup")),
        "--onto-store",
        "--read-ahead-ops",
        "64",
        "--json",
    ]);
    assert!(onto.status.success(), "{}", text(&onto.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&onto.stdout).unwrap();
    assert_eq!(summary["last_commit"], full["last_commit"]);
    assert_eq!(summary["store_head"], full["last_commit"]);
    assert_eq!(summary["commits_checked"].as_u64(), Some(6));
    let fsck = larch(&["fsck", path_str(&store("setup"))]);
    assert!(fsck.status.success(), "{}", text(&fsck.stdout));

    // An empty directory (left empty), a missing one (not created), the recording of a trace file
    // or of no regular block.
    std::fs::create_dir(store("empty")).unwrap();
    let empty = larch(&["replay", path_str(&trace), "--store", path_str(&store("empty")), "--onto-store"]);
    assert!(!empty.status.success());
    assert!(text(&empty.stderr).contains("is not a larch store"), "{}", text(&empty.stderr));
    assert_eq!(std::fs::read_dir(store("empty")).unwrap().count(), 0);
    let missing =
        larch(&["replay", path_str(&trace), "--store", path_str(&store("missing")), "--onto-store"]);
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("is not a store directory"), "{}", text(&missing.stderr));
    assert!(!store("missing").exists());
    let other = dir.path().join("other.trace");
    let record = ["--record-regular", path_str(&other)];
    let of_a_file = larch(&[&["replay", path_str(&trace), "--in-memory"][..], &record[..]].concat());
    assert_eq!(of_a_file.status.code(), Some(2), "{}", text(&of_a_file.stderr));
    let of_1x = larch(&[&["replay", "--in-memory", "--blocks", "1"][..], &record[..]].concat());
    assert!(text(&of_1x.stderr).contains("records a streamed replay"), "{}", text(&of_1x.stderr));
    let of_none =
        larch(&[&["replay", "--generate", "--in-memory", "--blocks", "0"][..], &record[..]].concat());
    assert!(text(&of_none.stderr).contains("no regular block to record"), "{}", text(&of_none.stderr));
    for refused in [of_1x, of_none] {
        assert!(!refused.status.success());
    }
    assert!(!other.exists());
}
