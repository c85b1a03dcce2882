//! `larch log STORE [COMMIT|BRANCH] [-n N]`: commits with hash, date, author, message and parents,
//! newest first, from a read-only handle.

use crate::inspect::{format_date, open_store, resolve_commit};
use crate::output::{emit, emit_line};
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch log`.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// The store directory.
    store: PathBuf,
    /// The commit to start from: a hash (`Co…` or hex), a branch, or `head` (default).
    commit: Option<String>,
    /// Show at most N commits.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    max_count: Option<usize>,
    /// Print JSON (an array of commits) instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `larch log`.
pub fn run(args: LogArgs) -> anyhow::Result<ExitCode> {
    let repo = open_store(&args.store)?;
    let start = resolve_commit(&repo, args.commit.as_deref())?;
    let hashes = repo.log(&start)?;
    let limit = args.max_count.unwrap_or(usize::MAX);
    let mut commits = Vec::new();
    for hash in hashes.iter().take(limit) {
        commits.push(repo.commit_details(hash)?);
    }
    if args.json {
        let values: Vec<_> = commits
            .iter()
            .map(|commit| {
                json!({
                    "hash": commit.hash.to_string(),
                    "tree": commit.tree_hash.to_hex(),
                    "date": format_date(commit.info.date),
                    "timestamp": commit.info.date,
                    "author": commit.info.author,
                    "message": commit.info.message,
                    "parents": commit.parents.iter().map(ToString::to_string).collect::<Vec<_>>(),
                })
            })
            .collect();
        emit_line(serde_json::to_string_pretty(&values)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for (index, commit) in commits.iter().enumerate() {
        if index > 0 {
            text.push('\n');
        }
        writeln!(text, "commit {}", commit.hash)?;
        for parent in &commit.parents {
            writeln!(text, "parent {parent}")?;
        }
        writeln!(text, "tree   {}", commit.tree_hash.to_hex())?;
        writeln!(text, "author {}", commit.info.author)?;
        writeln!(text, "date   {} ({})", format_date(commit.info.date), commit.info.date)?;
        writeln!(text, "\n    {}", commit.info.message.replace('\n', "\n    "))?;
    }
    emit(text)?;
    Ok(ExitCode::SUCCESS)
}
