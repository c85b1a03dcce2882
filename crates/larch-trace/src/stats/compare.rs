//! Side-by-side comparison of runs, with every run's ratio to the first (like irmin-bench's
//! `trace_stats.exe pp`).

use crate::op::OpKind;
use crate::stats::fmt;
use crate::stats::record::{StatsError, read_stat_path};
use crate::stats::summary::{Distribution, RunSummary, summarise};
use serde::{Deserialize, Serialize};
use std::fmt as sfmt;
use std::path::PathBuf;

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

/// Runs side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The runs' labels, the baseline first.
    pub runs: Vec<String>,
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
    for kind in OpKind::ALL {
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
    Comparison { runs: runs.iter().map(|r| r.label.clone()).collect(), rows }
}

/// Reads stat files, cuts them all to the smallest block count (as irmin-bench does), summarises
/// and compares them. Each run is labelled with its given label, or else its file's name.
pub fn compare_stat_files(files: &[(Option<String>, PathBuf)]) -> Result<Comparison, StatsError> {
    let mut loaded = Vec::with_capacity(files.len());
    for (label, path) in files {
        let file = read_stat_path(path)?;
        let label = label.clone().unwrap_or_else(|| {
            path.file_name()
                .map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
        });
        loaded.push((label, file));
    }
    let common = loaded.iter().map(|(_, file)| file.blocks.len() as u64).min();
    let summaries: Vec<RunSummary> = loaded
        .iter()
        .map(|(label, file)| {
            let mut summary = summarise(file, common);
            summary.label = label.clone();
            summary
        })
        .collect();
    Ok(compare(&summaries))
}

impl sfmt::Display for Comparison {
    fn fmt(&self, f: &mut sfmt::Formatter<'_>) -> sfmt::Result {
        let name_width = self.rows.iter().map(|row| row.name.chars().count()).max().unwrap_or(0).max(6);
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                (0..self.runs.len())
                    .map(|i| {
                        let value = row
                            .values
                            .get(i)
                            .copied()
                            .flatten()
                            .map_or("n/a".to_string(), |v| row.unit.show(v));
                        if i == 0 {
                            value
                        } else {
                            let ratio = row.ratio(i).map_or("-".to_string(), |r| format!("{r:.2}x"));
                            format!("{value} ({ratio})")
                        }
                    })
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = (0..self.runs.len())
            .map(|i| {
                let label = self.runs[i].chars().count();
                cells.iter().map(|row| row[i].chars().count()).max().unwrap_or(0).max(label)
            })
            .collect();
        write!(f, "{:<name_width$}", "")?;
        for (label, width) in self.runs.iter().zip(&widths) {
            write!(f, "  {label:>width$}")?;
        }
        writeln!(f)?;
        for (row, cells) in self.rows.iter().zip(&cells) {
            write!(f, "{:<name_width$}", row.name)?;
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
