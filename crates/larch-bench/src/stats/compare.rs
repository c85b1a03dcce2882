//! Side-by-side comparison of runs, with every run's ratio to the first (like irmin-bench's
//! `trace_stats.exe pp`).

use crate::stats::fmt;
use crate::stats::plot::file_label;
use crate::stats::record::{StatFile, StatsError, read_stat_path};
use crate::stats::summary::{Distribution, RunSummary, summarise};
use larch_trace::op::OpKind;
use serde::{Deserialize, Serialize};
use std::fmt as sfmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// How a row's values are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Unit {
    /// A count.
    Count,
    /// Seconds, printed with an adapted unit.
    Seconds,
    /// A rate or plain number.
    Number,
    /// Bytes, printed with binary units.
    Bytes,
    /// A ratio printed as a percentage.
    Percent,
    /// A factor printed as `1.23x`.
    Factor,
}

impl Unit {
    fn show(self, value: f64) -> String {
        match self {
            Unit::Count => fmt::count(value.max(0.0).round() as u64),
            Unit::Seconds => fmt::duration(value),
            Unit::Number => fmt::number(value),
            Unit::Bytes => fmt::bytes(value),
            Unit::Percent => fmt::percent(value),
            Unit::Factor => format!("{value:.2}x"),
        }
    }
}

/// One metric across runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonRow {
    /// Metric name.
    pub name: String,
    /// How to print it.
    pub unit: Unit,
    /// One value per run (`None`: not measured).
    pub values: Vec<Option<f64>>,
}

impl ComparisonRow {
    /// The ratio of run `index`'s value to the first run's (`None` if either is missing or the
    /// first is zero).
    pub fn ratio(&self, index: usize) -> Option<f64> {
        let first = self.values.first().copied().flatten()?;
        let value = self.values.get(index).copied().flatten()?;
        (first != 0.0).then(|| value / first)
    }
}

/// One descriptive line across runs (trace, store, host, …).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupRow {
    /// What is described.
    pub name: String,
    /// One value per run.
    pub values: Vec<String>,
}

/// Runs side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The runs' labels, the baseline first.
    pub runs: Vec<String>,
    /// How each run was made.
    pub setups: Vec<SetupRow>,
    /// The metrics.
    pub rows: Vec<ComparisonRow>,
}

impl Comparison {
    /// The row named `name`.
    pub fn row(&self, name: &str) -> Option<&ComparisonRow> {
        self.rows.iter().find(|row| row.name == name)
    }
}

/// Compares runs; the first is the baseline of the ratios.
pub fn compare(runs: &[RunSummary]) -> Comparison {
    let mut rows = Vec::new();
    let mut row = |name: &str, unit: Unit, get: &dyn Fn(&RunSummary) -> Option<f64>| {
        rows.push(ComparisonRow { name: name.to_string(), unit, values: runs.iter().map(get).collect() });
    };
    let dist = |d: &Option<Distribution>, get: fn(&Distribution) -> f64| d.as_ref().map(get);
    row("blocks", Unit::Count, &|r| Some(r.blocks as f64));
    row("operations", Unit::Count, &|r| Some(r.ops as f64));
    row("wall time", Unit::Seconds, &|r| Some(r.wall_s));
    row("CPU time", Unit::Seconds, &|r| r.cpu_s);
    row("CPU usage", Unit::Percent, &|r| r.cpu_usage);
    row("blocks/s", Unit::Number, &|r| r.blocks_per_s);
    row("context ops/s", Unit::Number, &|r| r.context_ops_per_s);
    row("Context.add/s", Unit::Number, &|r| r.adds_per_s);
    row("block mean (regular)", Unit::Seconds, &|r| dist(&r.regular_block_time, |d| d.mean));
    row("block p50 (regular)", Unit::Seconds, &|r| dist(&r.regular_block_time, |d| d.p50));
    row("block p90 (regular)", Unit::Seconds, &|r| dist(&r.regular_block_time, |d| d.p90));
    row("block p99 (regular)", Unit::Seconds, &|r| dist(&r.regular_block_time, |d| d.p99));
    row("block max (regular)", Unit::Seconds, &|r| dist(&r.regular_block_time, |d| d.max));
    row("commit mean", Unit::Seconds, &|r| dist(&r.commit_time, |d| d.mean));
    row("commit max (tail latency)", Unit::Seconds, &|r| dist(&r.commit_time, |d| d.max));
    for kind in OpKind::ALL.into_iter().filter(|kind| *kind != OpKind::Commit) {
        let name = format!("{} mean", kind.name());
        row(&name, Unit::Seconds, &|r| r.op_kind(kind).and_then(|k| k.mean_us).map(|us| us / 1e6));
    }
    row("max RSS", Unit::Bytes, &|r| r.max_rss_bytes.map(|b| b as f64));
    row("store size", Unit::Bytes, &|r| r.store_size_bytes.map(|b| b as f64));
    row("store bytes/block", Unit::Bytes, &|r| r.store_bytes_per_block);
    row("new object bytes", Unit::Bytes, &|r| r.object_bytes_written.map(|b| b as f64));
    row("bytes written (wchar)", Unit::Bytes, &|r| r.io.map(|io| io.wchar as f64));
    row("bytes to disk", Unit::Bytes, &|r| r.io.map(|io| io.write_bytes as f64));
    row("bytes read (rchar)", Unit::Bytes, &|r| r.io.map(|io| io.rchar as f64));
    row("bytes from disk", Unit::Bytes, &|r| r.io.map(|io| io.read_bytes as f64));
    row("write amplification", Unit::Factor, &|r| r.write_amplification);
    row("cache hit ratio", Unit::Percent, &|r| r.cache_hit_ratio);
    let setup = |name: &str, get: &dyn Fn(&RunSummary) -> String| SetupRow {
        name: name.to_string(),
        values: runs.iter().map(get).collect(),
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let setups = vec![
        setup("trace", &|r| r.trace.clone()),
        setup("store", &|r| r.store.clone()),
        setup("host", &|r| r.hostname.clone()),
        setup("started", &|r| r.start_utc.clone()),
        setup("larch", &|r| r.larch_version.clone()),
        setup("checks", &|r| yes_no(r.check_hashes)),
        setup("complete", &|r| yes_no(r.complete)),
    ];
    Comparison { runs: runs.iter().map(|r| r.label.clone()).collect(), setups, rows }
}

/// A run read from a file: its stat file, or only its summary (`larch replay --json` output).
#[derive(Clone, Debug, PartialEq)]
pub enum LoadedRun {
    /// A stat file.
    Stats(Box<StatFile>),
    /// A summary.
    Summary(Box<RunSummary>),
}

/// Reads a stat file or a summary JSON file (told apart by the first line: a stat file starts
/// with its header line).
pub fn load_run(path: &Path) -> Result<LoadedRun, StatsError> {
    let mut first = String::new();
    BufReader::new(File::open(path)?).read_line(&mut first)?;
    if first.contains(r#""type":"header""#) {
        return Ok(LoadedRun::Stats(Box::new(read_stat_path(path)?)));
    }
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text)
        .map(|summary| LoadedRun::Summary(Box::new(summary)))
        .map_err(|source| StatsError::NotARun { path: path.display().to_string(), source })
}

/// Reads stat files (or summaries), cuts them all to the smallest block count (as irmin-bench
/// does; a summary cannot be cut, so it must have that count), summarises and compares them. Each
/// run is labelled with its given label, or else its file's name.
pub fn compare_stat_files(files: &[(Option<String>, PathBuf)]) -> Result<Comparison, StatsError> {
    let mut loaded = Vec::with_capacity(files.len());
    for (label, path) in files {
        let label = label.clone().unwrap_or_else(|| file_label(path));
        loaded.push((label, path, load_run(path)?));
    }
    let blocks = |run: &LoadedRun| match run {
        LoadedRun::Stats(file) => file.blocks.len() as u64,
        LoadedRun::Summary(summary) => summary.blocks,
    };
    let common = loaded.iter().map(|(_, _, run)| blocks(run)).min();
    let mut summaries = Vec::with_capacity(loaded.len());
    for (label, path, run) in loaded {
        let mut summary = match run {
            LoadedRun::Stats(file) => summarise(&file, common),
            LoadedRun::Summary(summary) => {
                let common = common.unwrap_or(0);
                if summary.blocks > common {
                    let path = path.display().to_string();
                    return Err(StatsError::CannotCut { path, blocks: summary.blocks, common });
                }
                *summary
            }
        };
        summary.label = label;
        summaries.push(summary);
    }
    Ok(compare(&summaries))
}

impl sfmt::Display for Comparison {
    fn fmt(&self, f: &mut sfmt::Formatter<'_>) -> sfmt::Result {
        // Rows no run measured (e.g. cache figures of stores without counters) are not printed.
        let rows: Vec<&ComparisonRow> =
            self.rows.iter().filter(|row| row.values.iter().any(Option::is_some)).collect();
        let name_width = rows
            .iter()
            .map(|row| &row.name)
            .chain(self.setups.iter().map(|row| &row.name))
            .map(|name| name.chars().count())
            .max()
            .unwrap_or(0)
            .max(6);
        let mut cells: Vec<Vec<String>> = self.setups.iter().map(|row| row.values.clone()).collect();
        cells.extend(rows.iter().map(|row| {
            (0..self.runs.len())
                .map(|i| {
                    let value = row.values.get(i).copied().flatten().map(|v| row.unit.show(v));
                    match (value, row.ratio(i)) {
                        (None, _) => "n/a".to_string(),
                        (Some(value), Some(ratio)) if i > 0 => format!("{value} ({ratio:.2}x)"),
                        (Some(value), _) => value,
                    }
                })
                .collect()
        }));
        let widths: Vec<usize> = self
            .runs
            .iter()
            .enumerate()
            .map(|(i, label)| {
                let cell_width = cells.iter().filter_map(|row| row.get(i)).map(|c| c.chars().count()).max();
                cell_width.unwrap_or(0).max(label.chars().count())
            })
            .collect();
        write!(f, "{:<name_width$}", "")?;
        for (label, width) in self.runs.iter().zip(&widths) {
            write!(f, "  {label:>width$}")?;
        }
        writeln!(f)?;
        let names = self.setups.iter().map(|row| &row.name).chain(rows.iter().map(|row| &row.name));
        for (index, (name, cells)) in names.zip(&cells).enumerate() {
            if index == self.setups.len() && index > 0 {
                writeln!(f)?;
            }
            write!(f, "{name:<name_width$}")?;
            for (cell, width) in cells.iter().zip(&widths) {
                write!(f, "  {cell:>width$}")?;
            }
            writeln!(f)?;
        }
        writeln!(
            f,
            "Ratios are to the first run; per-second rates are over CPU time; regular blocks exclude blocks 0 and 1."
        )
    }
}
