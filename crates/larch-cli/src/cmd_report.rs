//! `larch report compare|plot`: runs side by side, and charts of runs.

use crate::output::{emit, emit_line};
use anyhow::Context;
use clap::Subcommand;
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
    }
    Ok(ExitCode::SUCCESS)
}
