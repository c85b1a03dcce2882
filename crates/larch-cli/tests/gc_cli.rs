//! `larch replay --gc-every N --gc-keep M` and `larch gc`: a replay that collects garbage as it
//! goes checks every hash, reports its GCs and leaves a fsck-clean store holding fewer bytes than
//! the same replay without GC; `larch gc --keep-blocks` then collects down to the last blocks, and
//! the collected commits are refused with a message that says so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;
use common::{larch, larch_json, path_str, small_trace, text};
use std::path::Path;

fn dir_bytes(dir: &Path) -> u64 {
    larch_bench::stats::dir_bytes(dir).unwrap()
}

#[test]
fn replays_collect_as_they_go_and_larch_gc_collects_down_to_the_last_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 120, 5);

    // The same replay without and with a GC every 20 blocks keeping 30.
    let plain = dir.path().join("plain");
    let plain_summary = larch_json(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&plain),
        "--chunk-size",
        "16K",
        "--json",
    ]);
    assert!(plain_summary.get("gc").is_none(), "no GC section without --gc-every");
    let collected = dir.path().join("collected");
    let summary = larch_json(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&collected),
        "--chunk-size",
        "16K",
        "--gc-every",
        "20",
        "--gc-keep",
        "30",
        // Every GC point starts a GC (the default, `defer`, skips points while one runs).
        "--gc-when-busy",
        "wait",
        "--json",
    ]);
    assert_eq!(summary["commits_checked"], plain_summary["commits_checked"], "every hash checked");
    let gc = &summary["gc"];
    // Blocks 0..=121; GCs start after blocks 40, 60, 80, 100 and 120.
    assert_eq!(gc["started"], 5, "{gc}");
    assert!(gc["finished"].as_u64().unwrap() >= 3, "{gc}");
    assert!(gc["copied_bytes"].as_u64().unwrap() > 0, "{gc}");
    assert!(
        dir_bytes(&collected) < dir_bytes(&plain) * 9 / 10,
        "collected {} bytes against {} without GC",
        dir_bytes(&collected),
        dir_bytes(&plain)
    );
    assert!(
        std::fs::read_dir(&collected).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("seg."))
    );
    let out = larch(&["fsck", path_str(&collected)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(summary["last_commit"], plain_summary["last_commit"]);
    assert_eq!(
        (gc["deferred"].as_u64(), gc["skipped"].as_u64()),
        (Some(0), Some(0)),
        "waits by default: {gc}"
    );
    // `--gc-when-busy skip` (irmin-bench's schedule): every due GC is started or counted skipped.
    let skipping = dir.path().join("skipping");
    let args = ["replay", path_str(&trace), "--store", path_str(&skipping), "--chunk-size", "16K"];
    let gc_args = ["--gc-every", "20", "--gc-keep", "30", "--json", "--gc-when-busy"];
    let skipped = larch_json(&[&args[..], &gc_args[..], &["skip"]].concat());
    let skipped_gc = &skipped["gc"];
    assert_eq!(
        skipped_gc["started"].as_u64().unwrap() + skipped_gc["skipped"].as_u64().unwrap(),
        5,
        "{skipped_gc}"
    );
    assert_eq!(skipped_gc["waited_s"].as_f64(), Some(0.0), "{skipped_gc}");
    assert_eq!(skipped["last_commit"], plain_summary["last_commit"]);
    let out = larch(&[&args[..], &gc_args[..], &["later"]].concat());
    assert!(!out.status.success() && text(&out.stderr).contains("later"), "{}", text(&out.stderr));
    // `larch stats` scans the segments' runs and the chunks, skipping collected space.
    let stats = larch_json(&["stats", path_str(&collected), "--json"]);
    assert!(stats["gc_generation"].as_u64().unwrap() >= 3, "{stats}");
    assert!(!stats["segment_files"].as_array().unwrap().is_empty(), "{stats}");
    let (records, published) =
        (stats["record_bytes"].as_u64().unwrap(), stats["pack_bytes"].as_u64().unwrap());
    assert!(records < published * 9 / 10, "records {records} of {published} published");
    let plain_stats = larch_json(&["stats", path_str(&plain), "--json"]);
    assert_eq!(
        plain_stats["record_bytes"].as_u64().unwrap() + 16,
        plain_stats["pack_bytes"].as_u64().unwrap()
    );

    // `larch gc --keep-blocks 5` on the plain store: the head and the 4 commits before it stay.
    let log = larch_json(&["log", path_str(&plain), "--json"]);
    let hashes: Vec<String> =
        log.as_array().unwrap().iter().map(|c| c["hash"].as_str().unwrap().to_string()).collect();
    assert_eq!(hashes.len(), 122);
    let report = larch_json(&["gc", path_str(&plain), "--keep-blocks", "5", "--json"]);
    assert_eq!(report["commit"], hashes[4], "the 5th newest commit is the GC commit");
    assert_eq!(report["generation"], 1);
    let (before, after) = (report["disk_before"].as_u64().unwrap(), report["disk_after"].as_u64().unwrap());
    assert!(after < before * 2 / 3, "disk {before} -> {after}");
    assert_eq!(after, dir_bytes(&plain), "the report's disk after is the directory's size");
    let log = larch_json(&["log", path_str(&plain), "--json"]);
    assert_eq!(log.as_array().unwrap().len(), 5);
    let out = larch(&["ls", path_str(&plain), "--commit", &hashes[5], "/"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("garbage collection"), "{}", text(&out.stderr));
    let out = larch(&["ls", path_str(&plain), "--commit", &hashes[4], "/"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = larch(&["fsck", path_str(&plain)]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));

    // Refusals: a commit older than the last GC's, and nothing to keep.
    let out = larch(&["gc", path_str(&plain), "--commit", &hashes[10]]);
    assert!(!out.status.success());
    let out = larch(&["gc", path_str(&plain)]);
    assert!(!out.status.success(), "--keep-blocks or --commit is required");
    let text_report = larch(&["gc", path_str(&plain), "--keep-blocks", "2"]);
    assert!(text_report.status.success(), "{}", text(&text_report.stderr));
    assert!(text(&text_report.stdout).contains("garbage collection 2 of"), "{}", text(&text_report.stdout));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// The files of the store's segment list, by increasing range (`larch stats --json`): the segment
/// files, after the first chunk when the first GC kept it in place.
fn segment_names(dir: &Path) -> Vec<String> {
    let stats = larch_json(&["stats", path_str(dir), "--json"]);
    let names: Vec<String> = stats["segment_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|segment| segment["name"].as_str().unwrap().to_string())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("seg."))
        .collect();
    files.sort();
    let listed: Vec<String> = names.iter().filter(|name| name.starts_with("seg.")).cloned().collect();
    assert_eq!(files, listed, "every segment file is in the list, and only those");
    names
}

/// `larch gc --compact` marks through every old segment and merges those holding garbage; the
/// same GC without it marks none of them (a fresh process, generation not a multiple of 8) and
/// leaves more bytes on disk.
#[test]
fn larch_gc_compact_merges_the_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 120, 7);
    let store = dir.path().join("store");
    // Many small GCs: several segments whose records die later.
    let summary = larch_json(&[
        "replay",
        path_str(&trace),
        "--store",
        path_str(&store),
        "--chunk-size",
        "8K",
        "--gc-every",
        "15",
        "--gc-keep",
        "10",
        "--gc-when-busy",
        "wait",
        "--json",
    ]);
    assert!(summary["gc"]["finished"].as_u64().unwrap() >= 5, "{}", summary["gc"]);
    let segments = segment_names(&store);
    assert!(segments.len() >= 2, "{segments:?}");
    let (plain, compact) = (dir.path().join("plain"), dir.path().join("compact"));
    copy_dir(&store, &plain);
    copy_dir(&store, &compact);

    let report = larch_json(&["gc", path_str(&plain), "--keep-blocks", "5", "--json"]);
    assert_eq!(report["deep_mark"], false, "{report}");
    let report = larch_json(&["gc", path_str(&compact), "--keep-blocks", "5", "--compact", "--json"]);
    assert_eq!(report["deep_mark"], true, "{report}");
    // One per entry of the segment list: chunks kept in place by the first GC share one.
    let entries = segments.iter().filter(|name| name.starts_with("seg.")).count()
        + usize::from(segments.iter().any(|name| name.starts_with("chunk.")));
    assert_eq!(report["segments_marked"].as_u64().unwrap(), entries as u64, "{report}");
    assert!(report["segments_garbage"].as_u64().unwrap() > 0, "{report}");
    let merged: Vec<String> = report["merged_segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(!merged.is_empty(), "{report}");
    // The merged segments are the newest ones; the new segment replaces them.
    assert_eq!(merged, segments[segments.len() - merged.len()..].to_vec(), "{report}");
    let mut expected = segments[..segments.len() - merged.len()].to_vec();
    expected.push(report["segment"].as_str().unwrap().to_string());
    assert_eq!(segment_names(&compact), expected);
    assert!(
        dir_bytes(&compact) < dir_bytes(&plain),
        "compacted {} bytes, not compacted {}",
        dir_bytes(&compact),
        dir_bytes(&plain)
    );
    for store in [&plain, &compact] {
        let out = larch(&["fsck", path_str(store)]);
        assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    }
    // The text report names the compaction.
    let out = larch(&["gc", path_str(&compact), "--keep-blocks", "3", "--compact"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("old segments marked (all of them)"), "{}", text(&out.stdout));
}

/// A GC due after the last block (blocks 0..=40, a GC every 20 blocks keeping 30: the only one,
/// on block 10's commit, starts after block 40) runs while the replay ends: the summary reports
/// it, started and finished at the end, with its copied bytes and disk peak, in the JSON and the
/// text summaries.
#[test]
fn a_gc_running_at_the_last_block_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = small_trace(dir.path(), 39, 11);
    let args = |store: &Path| {
        let store = path_str(store).to_string();
        [trace.to_str().unwrap().to_string(), "--store".into(), store, "--chunk-size".into(), "8K".into()]
            .into_iter()
            .chain(["--gc-every", "20", "--gc-keep", "30"].map(String::from))
            .collect::<Vec<_>>()
    };
    let json_args: Vec<String> = ["replay".to_string()]
        .into_iter()
        .chain(args(&dir.path().join("json")))
        .chain(["--json".into()])
        .collect();
    let summary = larch_json(&json_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(summary["blocks"], 41, "{summary}");
    let gc = &summary["gc"];
    assert_eq!((gc["started"].as_u64(), gc["finished"].as_u64()), (Some(1), Some(1)), "{gc}");
    assert_eq!(gc["finished_at_close"], 1, "{gc}");
    // Its region (the first blocks, mostly live) is kept in place: nothing to copy.
    assert!(gc["copied_bytes"].as_u64().is_some(), "{gc}");
    assert!(gc["disk_peak_bytes"].as_u64().unwrap() > 0, "{gc}");
    assert!(gc["max_peak_over_start"].as_f64().unwrap() >= 1.0, "{gc}");
    assert_eq!(gc["gc_time"]["count"], 1, "{gc}");
    assert!(gc["close_wait_s"].as_f64().unwrap() >= 0.0, "{gc}");

    let text_args: Vec<String> =
        ["replay".to_string()].into_iter().chain(args(&dir.path().join("text"))).collect();
    let out = larch(&text_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("GCs at the end"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains(" 1 "), "{line}");
    assert!(stdout.contains("(1 finished"), "{stdout}");
}
