//! `larch report compare|plot|curve`: runs side by side, charts of runs, and the scale ladder's
//! cost curve.

use crate::output::{emit, emit_line};
use anyhow::Context;
use clap::Subcommand;
use larch_bench::RunSummary;
use larch_bench::stats::{CurvePoint, CurveTable, cost_curve_chart, render_svg};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Subcommands of `larch report`.
#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Print runs side by side, with ratios to the first (stat files or `--json` summaries; runs
    /// are cut to the shortest one). Label a run with `LABEL=FILE`.
    Compare {
        /// Stat files or summaries, the reference first.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<String>,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write SVG charts (block time, RSS, store size over the replay) of one or more runs.
    Plot {
        /// Stat files; label a run with `LABEL=FILE`.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<String>,
        /// Directory to write the charts into (created if absent).
        #[arg(long, short, default_value = "larch-report")]
        out: PathBuf,
    },
    /// The scale ladder's cost curve: print a Markdown table of the runs (ops/s, p99, largest
    /// block, peak RSS, store bytes, read syscalls per block against the context's size) and
    /// write `cost_curve.svg` (each figure as a ratio to the first run's). The runs are the
    /// `--json` summaries of streamed replays (`larch replay --scale RUNG --json`), smallest
    /// first; label one with `LABEL=FILE`.
    Curve {
        /// Summaries, the smallest rung first.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<String>,
        /// Directory to write the chart into (created if absent).
        #[arg(long, short, default_value = "larch-report")]
        out: PathBuf,
    },
}

/// Splits `LABEL=FILE` (when `FILE` names no existing file as a whole, the text is a plain path).
pub fn labelled(arg: &str) -> (Option<String>, PathBuf) {
    if !Path::new(arg).exists()
        && let Some((label, path)) = arg.split_once('=')
        && !label.is_empty()
    {
        return (Some(label.to_string()), PathBuf::from(path));
    }
    (None, PathBuf::from(arg))
}

/// Runs a `report` subcommand.
pub fn run(command: ReportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ReportCommand::Compare { runs, json } => {
            let files: Vec<_> = runs.iter().map(|arg| labelled(arg)).collect();
            let comparison = larch_bench::stats::compare_stat_files(&files).context("comparing runs")?;
            if json {
                emit_line(serde_json::to_string_pretty(&comparison)?)?;
            } else {
                emit(&comparison)?;
            }
        }
        ReportCommand::Plot { runs, out } => {
            let files: Vec<_> = runs.iter().map(|arg| labelled(arg)).collect();
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let written = larch_bench::stats::plot_stat_files(&files, &out).context("plotting runs")?;
            for path in written {
                emit_line(path.display())?;
            }
        }
        ReportCommand::Curve { runs, out } => {
            let mut points = Vec::with_capacity(runs.len());
            for arg in &runs {
                let (label, path) = labelled(arg);
                points.push(curve_point(label, &path)?);
            }
            emit_line(CurveTable(&points))?;
            if let Some(chart) = cost_curve_chart(&points) {
                std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
                let path = out.join("cost_curve.svg");
                std::fs::write(&path, render_svg(&chart))
                    .with_context(|| format!("writing {}", path.display()))?;
                emit_line(path.display())?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One run of the cost curve: a `larch replay --json` summary of a streamed replay.
fn curve_point(label: Option<String>, path: &Path) -> anyhow::Result<CurvePoint> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let count = |key: &str| {
        value.get(key).and_then(serde_json::Value::as_u64).with_context(|| {
            format!(
                "{} has no {key}: not the summary of a streamed replay (larch replay --scale RUNG --json)",
                path.display()
            )
        })
    };
    let (context_values, context_dirs) = (count("setup_values")?, count("setup_dirs")?);
    let summary: RunSummary = serde_json::from_value(value)
        .with_context(|| format!("reading the summary in {}", path.display()))?;
    let label = label.unwrap_or_else(|| path.display().to_string());
    Ok(CurvePoint { label, context_values, context_dirs, summary })
}
