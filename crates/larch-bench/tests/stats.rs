//! Summaries, comparisons and charts from block statistics: percentiles on known distributions,
//! backend-derived figures, ratios, stat files cut to a common length, well-formed SVG.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_bench::replay::{ReplayOptions, RunMeta, replay};
use larch_bench::stats::{
    BlockStats, Distribution, IoCounters, StatEnd, StatFile, StatHeader, StatLine, Summariser, compare,
    compare_stat_files, read_stat_path, render_svg, summarise, write_charts, write_line,
};
use larch_bench::stats::{LoadedRun, StatsError, load_run};
use larch_core::{BackendStats, ContextRepo};
use larch_core::{CommitInfo, Hash, MemoryRepo, RepoError, Tree};
use larch_trace::{Op, Scoped};
use std::convert::Infallible;
use std::path::PathBuf;

fn header(store: &str) -> StatHeader {
    let mut header = StatHeader {
        format: "larch-stats".to_string(),
        version: 1,
        trace: "t.trace".to_string(),
        store: store.to_string(),
        ..StatHeader::default()
    };
    header.options.check_hashes = true;
    header.initial.backend.store_size_bytes = Some(100);
    header.initial.backend.cache_hits = Some(0);
    header.initial.backend.cache_misses = Some(0);
    header.initial.backend.object_bytes_written = Some(0);
    header
}

/// Block `i` of a synthetic run: wall time `wall` seconds, 10 adds and 5 finds taking 1 µs each,
/// a commit of `wall / 4`; the store grows by 100 bytes per block.
fn block(i: u64, wall: f64) -> BlockStats {
    let mut stats = BlockStats {
        block: i,
        first_op: i * 17,
        ops: 17,
        wall_s: wall,
        cpu_s: Some(wall / 2.0),
        commit_s: wall / 4.0,
        rss_bytes: Some(1000 + i),
        max_rss_bytes: Some(5000 + i),
        io: Some(IoCounters { wchar: 300, write_bytes: 4096, rchar: 50, ..IoCounters::default() }),
        reads_checked: 5,
        commit_checked: true,
        ..BlockStats::default()
    };
    stats.op_times.checkout.count = 1;
    stats.op_times.add.count = 10;
    stats.op_times.add.seconds = 10e-6;
    stats.op_times.find.count = 5;
    stats.op_times.find.seconds = 5e-6;
    stats.op_times.commit.count = 1;
    stats.op_times.commit.seconds = wall / 4.0;
    stats.backend.store_size_bytes = Some(100 + 100 * (i + 1));
    stats.backend.object_bytes_written = Some(200 * (i + 1));
    stats.backend.cache_hits = Some(9 * (i + 1));
    stats.backend.cache_misses = Some(i + 1);
    stats
}

/// A run of `n` blocks: genesis 1 s, setup 2 s, then regular blocks of `scale × k` ms, k = 1..
fn run_file(store: &str, n: u64, scale: f64) -> StatFile {
    let mut blocks = Vec::new();
    let mut elapsed = 0.0;
    for i in 0..n {
        let wall = match i {
            0 => 1.0,
            1 => 2.0,
            k => scale * (k - 1) as f64 * 1e-3,
        };
        let mut b = block(i, wall);
        elapsed += wall;
        b.elapsed_wall_s = elapsed;
        b.elapsed_cpu_s = Some(elapsed / 2.0);
        blocks.push(b);
    }
    let end =
        StatEnd { blocks: n, ops: n * 17, trailing_ops: 0, wall_s: elapsed, gc: None, read_ahead: None };
    StatFile { header: header(store), blocks, end: Some(end) }
}

#[test]
fn percentiles_of_a_known_distribution() {
    let values: Vec<(f64, u64)> = (1..=100).rev().map(|v| (v as f64, 1000 - v)).collect();
    let d = Distribution::of(&values).unwrap();
    assert_eq!((d.count, d.min, d.p50, d.p90, d.p99, d.max), (100, 1.0, 50.0, 90.0, 99.0, 100.0));
    assert_eq!(d.max_block, 900);
    assert!((d.mean - 50.5).abs() < 1e-12);
    assert!((d.sd - (9999.0_f64 / 12.0).sqrt()).abs() < 1e-9, "population sd of 1..=100: {}", d.sd);
    let one = Distribution::of(&[(7.0, 3)]).unwrap();
    assert_eq!((one.p50, one.p99, one.sd, one.max_block), (7.0, 7.0, 0.0, 3));
    assert!(Distribution::of(&[]).is_none());
}

#[test]
fn summary_separates_regular_blocks_and_derives_backend_figures() {
    // 102 blocks: genesis (1 s), setup (2 s), then 1, 2, …, 100 ms.
    let file = run_file("pack", 102, 1.0);
    let s = summarise(&file, None);
    assert_eq!((s.blocks, s.ops, s.context_ops, s.adds), (102, 102 * 17, 102 * 15, 1020));
    let all = s.block_time.as_ref().unwrap();
    assert_eq!((all.count, all.max, all.max_block), (102, 2.0, 1));
    let regular = s.regular_block_time.as_ref().unwrap();
    assert_eq!(regular.count, 100);
    assert!((regular.p50 - 0.050).abs() < 1e-12 && (regular.p90 - 0.090).abs() < 1e-12);
    assert!((regular.p99 - 0.099).abs() < 1e-12 && (regular.max - 0.100).abs() < 1e-12);
    assert_eq!(regular.max_block, 101);
    let commit = s.commit_time.as_ref().unwrap();
    assert_eq!((commit.max, commit.max_block), (0.5, 1));
    // Rates over CPU time (half the wall time here).
    let wall = 3.0 + 5.050;
    assert!((s.wall_s - wall).abs() < 1e-9);
    assert!((s.cpu_usage.unwrap() - 0.5).abs() < 1e-9);
    assert!((s.adds_per_s.unwrap() - 1020.0 / (wall / 2.0)).abs() < 1e-6);
    assert!((s.blocks_per_wall_s.unwrap() - 102.0 / wall).abs() < 1e-9);
    // Context ops: twice as many per CPU second as per wall second.
    assert!((s.context_ops_per_wall_s.unwrap() - (102.0 * 15.0) / wall).abs() < 1e-6);
    assert!((s.context_ops_per_s.unwrap() - 2.0 * s.context_ops_per_wall_s.unwrap()).abs() < 1e-6);
    let json = serde_json::to_value(&s).unwrap();
    assert!(json.get("context_ops_per_wall_s").and_then(|v| v.as_f64()).is_some());
    let add = s.op_kinds.iter().find(|k| k.kind == "add").unwrap();
    assert!((add.mean_us.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(s.op_kinds.iter().find(|k| k.kind == "remove").unwrap().mean_us, None);
    // Store and I/O figures relative to the header's initial sample.
    assert_eq!(s.store_size_bytes, Some(100 + 100 * 102));
    assert_eq!(s.store_growth_bytes, Some(100 * 102));
    assert_eq!(s.store_bytes_per_block, Some(100.0));
    assert_eq!(s.object_bytes_written, Some(200 * 102));
    assert_eq!(s.io.map(|io| io.wchar), Some(300 * 102));
    assert!((s.write_amplification.unwrap() - 1.5).abs() < 1e-12);
    assert!((s.cache_hit_ratio.unwrap() - 0.9).abs() < 1e-12);
    assert_eq!(s.max_rss_bytes, Some(5101));
    assert_eq!(s.final_rss_bytes, Some(1101));
    assert_eq!((s.reads_checked, s.commits_checked), (510, 102));
    // Each block: 15 µs of adds and finds plus the commit; the rest of its wall time is unseen.
    let in_ops = 102.0 * 15e-6 + wall / 4.0;
    assert!((s.in_ops_s - in_ops).abs() < 1e-9);
    assert!((s.unseen_s - (wall - in_ops)).abs() < 1e-9);
    assert!(s.complete);
    let table = s.to_string();
    for needle in ["block (regular)", "Context.add/s", "90.0%", "1.50x", "write amplification", "(block 101)"]
    {
        assert!(table.contains(needle), "missing {needle:?} in\n{table}");
    }
}

#[test]
fn cut_summaries_are_incomplete_and_streaming_matches_the_file() {
    let file = run_file("pack", 10, 1.0);
    let cut = summarise(&file, Some(4));
    assert_eq!(cut.blocks, 4);
    assert!(!cut.complete);
    let mut summariser = Summariser::new(&file.header);
    for b in &file.blocks {
        summariser.push(b);
    }
    assert_eq!(summariser.finish(file.end.as_ref()), summarise(&file, None));
}

#[test]
fn comparison_ratios_to_the_first_run() {
    let base = summarise(&run_file("base", 52, 2.0), None);
    let fast = summarise(&run_file("fast", 52, 1.0), None);
    let comparison = compare(&[base, fast]);
    assert_eq!(comparison.runs, ["base", "fast"]);
    let mean = comparison.row("block mean (regular)").unwrap();
    assert_eq!(mean.ratio(0), Some(1.0));
    assert!((mean.ratio(1).unwrap() - 0.5).abs() < 1e-12);
    let blocks = comparison.row("blocks").unwrap();
    assert_eq!(blocks.values, [Some(52.0), Some(52.0)]);
    assert_eq!(blocks.ratio(1), Some(1.0));
    assert_eq!(comparison.row("add mean").unwrap().ratio(1), Some(1.0));
    assert_eq!(comparison.row("remove mean").unwrap().ratio(1), None);
    let text = comparison.to_string();
    assert!(text.contains("(0.50x)") && text.contains("(1.00x)"), "{text}");
    let header = text.lines().next().unwrap();
    assert!(header.contains("base") && header.contains("fast"));
    let store_line = text.lines().find(|l| l.starts_with("store ")).unwrap();
    assert!(store_line.contains("base") && store_line.contains("fast"), "{text}");
    assert_eq!(comparison.setups.iter().find(|s| s.name == "complete").unwrap().values, ["yes", "yes"]);
    assert!(!text.contains("cache hit ratio") || text.contains("90.0%"));
}

fn write_stat_file(dir: &std::path::Path, name: &str, file: &StatFile) -> PathBuf {
    let path = dir.join(name);
    let mut out = Vec::new();
    write_line(&mut out, &StatLine::Header(file.header.clone())).unwrap();
    for b in &file.blocks {
        write_line(&mut out, &StatLine::Block(b.clone())).unwrap();
    }
    if let Some(end) = &file.end {
        write_line(&mut out, &StatLine::End(end.clone())).unwrap();
    }
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn stat_files_round_trip_and_compare_on_common_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let long = run_file("long", 30, 1.0);
    let short = run_file("short", 12, 1.0);
    let long_path = write_stat_file(dir.path(), "long.jsonl", &long);
    let short_path = write_stat_file(dir.path(), "short.jsonl", &short);
    assert_eq!(read_stat_path(&long_path).unwrap(), long);
    let comparison = compare_stat_files(&[(Some("A".to_string()), long_path), (None, short_path)]).unwrap();
    assert_eq!(comparison.runs, ["A", "short.jsonl"]);
    assert_eq!(comparison.row("blocks").unwrap().values, [Some(12.0), Some(12.0)]);
    assert_eq!(comparison.row("wall time").unwrap().ratio(1), Some(1.0));
}

#[test]
fn summaries_compare_with_stat_files_of_the_same_length() {
    let dir = tempfile::tempdir().unwrap();
    let stats_path = write_stat_file(dir.path(), "run.jsonl", &run_file("stats", 20, 1.0));
    let summary = summarise(&run_file("summary", 20, 2.0), None);
    let summary_path = dir.path().join("summary.json");
    std::fs::write(&summary_path, serde_json::to_string_pretty(&summary).unwrap()).unwrap();
    assert!(matches!(load_run(&summary_path).unwrap(), LoadedRun::Summary(_)));
    assert!(matches!(load_run(&stats_path).unwrap(), LoadedRun::Stats(_)));
    let files = [(None, stats_path.clone()), (Some("S".to_string()), summary_path.clone())];
    let comparison = compare_stat_files(&files).unwrap();
    assert_eq!(comparison.runs, ["run.jsonl", "S"]);
    assert!((comparison.row("block mean (regular)").unwrap().ratio(1).unwrap() - 2.0).abs() < 1e-12);
    // A longer summary cannot be cut to a shorter stat file.
    let short_path = write_stat_file(dir.path(), "short.jsonl", &run_file("short", 10, 1.0));
    let error = compare_stat_files(&[(None, short_path), (None, summary_path)]).unwrap_err();
    assert!(matches!(error, StatsError::CannotCut { blocks: 20, common: 10, .. }), "{error}");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "[1, 2]").unwrap();
    assert!(matches!(load_run(&junk), Err(StatsError::NotARun { .. })));
}

#[test]
fn bad_stat_files_are_typed_errors() {
    use larch_bench::stats::read_stat_file;
    let no_header = r#"{"type":"end","blocks":0,"ops":0,"trailing_ops":0,"wall_s":0.0}"#;
    assert!(matches!(read_stat_file(no_header.as_bytes()), Err(StatsError::Structure { line: 1, .. })));
    assert!(matches!(read_stat_file("{not json".as_bytes()), Err(StatsError::Json { line: 1, .. })));
    assert!(matches!(read_stat_file("".as_bytes()), Err(StatsError::Structure { .. })));
    let mut foreign = header("x");
    foreign.format = "other".to_string();
    let line = serde_json::to_string(&StatLine::Header(foreign)).unwrap();
    assert!(matches!(read_stat_file(line.as_bytes()), Err(StatsError::Format { .. })));
}

/// Checks that `svg` is well-formed XML as far as tags go: every element closed in order.
fn assert_balanced(svg: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("unterminated tag") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name.trim()), "mismatched </{name}>");
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            stack.push(tag.split_whitespace().next().unwrap().to_string());
        }
        assert!(!tag.contains('<'), "'<' inside a tag");
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

#[test]
fn charts_are_well_formed_svg_with_one_series_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = run_file("a<&>", 40, 1.0);
    let mut b = run_file("b", 3000, 0.5);
    for block in &mut b.blocks {
        block.backend.store_size_bytes = None;
    }
    let runs = [("run a<&>".to_string(), &a), ("run b".to_string(), &b)];
    let written = write_charts(&runs, &dir.path().join("charts")).unwrap();
    let names: Vec<String> =
        written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["block_time.svg", "rss.svg", "store_size.svg", "context_ops_per_s.svg"]);
    for path in &written {
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{}", path.display());
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_balanced(&svg);
        let expected = if path.ends_with("store_size.svg") { 1 } else { 2 };
        assert_eq!(svg.matches("<polyline").count(), expected, "{}", path.display());
        assert!(svg.contains("run a&lt;&amp;&gt;"));
    }
    // The long run is reduced to at most MAX_POINTS points.
    let svg = std::fs::read_to_string(dir.path().join("charts/block_time.svg")).unwrap();
    let longest = svg
        .lines()
        .filter(|l| l.contains("<polyline"))
        .map(|l| l.split("points=\"").nth(1).unwrap().split('"').next().unwrap().split(' ').count())
        .max()
        .unwrap();
    // Blocks 2..3000 (regular blocks only), averaged two by two.
    assert_eq!(longest, 1499);
    assert!(svg.contains("mean of 2 consecutive blocks"));
    assert!(
        render_svg(&larch_bench::stats::Chart {
            title: "empty".to_string(),
            x_label: "block".to_string(),
            y_unit: larch_bench::stats::YUnit::Number,
            series: vec![],
        })
        .contains("</svg>")
    );
}

/// A repository with counters, to check that backend statistics reach the stat file.
struct CountingRepo {
    inner: MemoryRepo,
    commits: u64,
}

impl ContextRepo for CountingRepo {
    type Error = RepoError;
    fn empty_tree(&self) -> Tree {
        self.inner.empty_tree()
    }
    fn checkout(&mut self, commit: &Hash) -> Result<Tree, RepoError> {
        self.inner.checkout(commit)
    }
    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, RepoError> {
        self.commits += 1;
        self.inner.commit(tree, parents, info)
    }
    fn stats(&self) -> BackendStats {
        BackendStats {
            store_size_bytes: Some(1000 + 500 * self.commits),
            object_bytes_written: Some(400 * self.commits),
            cache_hits: Some(3 * self.commits),
            cache_misses: Some(self.commits),
            ..BackendStats::default()
        }
    }
}

#[test]
fn backend_stats_flow_from_the_repo_into_the_summary() {
    let mut repo = CountingRepo { inner: MemoryRepo::new(), commits: 0 };
    let mut ops = Vec::new();
    let mut parent: Option<Hash> = None;
    for i in 0..4u64 {
        let input = if let Some(p) = parent {
            ops.push(Op::Checkout { commit: Scoped::Keep(p), out: Scoped::Keep(i * 10) });
            i * 10
        } else {
            0
        };
        ops.push(Op::Add {
            path: larch_trace::Path::from_steps([b"k".to_vec(), i.to_string().into_bytes()]),
            value: vec![1],
            input: Scoped::Forget(input),
            out: Scoped::Keep(i * 10 + 1),
        });
        let fake = Hash::of_bytes(&i.to_le_bytes());
        ops.push(Op::Commit {
            hash: Scoped::Keep(fake),
            date: i as i64,
            message: String::new(),
            parents: parent.into_iter().map(Scoped::Forget).collect(),
            input: Scoped::Forget(i * 10 + 1),
        });
        parent = Some(fake);
    }
    let options = ReplayOptions { check_hashes: false, ..ReplayOptions::default() };
    let mut out = Vec::new();
    let meta = RunMeta { trace: "synthetic".to_string(), store: "counting".to_string() };
    let summary = replay(
        &mut repo,
        ops.into_iter().map(Ok::<_, Infallible>),
        &options,
        &meta,
        Some(&mut out),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(summary.blocks, 4);
    assert_eq!(summary.store_size_bytes, Some(3000));
    assert_eq!(summary.store_growth_bytes, Some(2000));
    assert_eq!(summary.store_bytes_per_block, Some(500.0));
    assert_eq!(summary.object_bytes_written, Some(1600));
    assert_eq!(summary.cache_hit_ratio, Some(0.75));
    let file = larch_bench::stats::read_stat_file(&out[..]).unwrap();
    assert_eq!(file.header.initial.backend.store_size_bytes, Some(1000));
    let sizes: Vec<Option<u64>> = file.blocks.iter().map(|b| b.backend.store_size_bytes).collect();
    assert_eq!(sizes, [Some(1500), Some(2000), Some(2500), Some(3000)]);
    if cfg!(target_os = "linux") {
        assert!(
            file.blocks.iter().all(|b| b.cpu_s.is_some() && b.rss_bytes.is_some() && b.page_faults.is_some())
        );
    }
}

#[test]
fn a_block_s_page_faults_round_trip_and_are_optional_in_older_files() {
    let with = BlockStats { page_faults: Some(18), ..block(3, 0.1) };
    let line = serde_json::to_string(&StatLine::Block(with.clone())).unwrap();
    assert!(line.contains("\"page_faults\":18"), "{line}");
    let StatLine::Block(back) = serde_json::from_str(&line).unwrap() else { panic!("not a block line") };
    assert_eq!(back, with);
    // A stat file written before the field existed.
    let older = line.replace(",\"page_faults\":18", "");
    assert_ne!(older, line);
    let StatLine::Block(back) = serde_json::from_str(&older).unwrap() else { panic!("not a block line") };
    assert_eq!(back.page_faults, None);
    assert_eq!(back.block, 3);
}
