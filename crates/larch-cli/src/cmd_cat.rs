//! `larch cat STORE [--commit C] PATH [--hex]`: the raw bytes of a value.

use crate::inspect::{open_store, parse_path, resolve_commit, show_path, walk};
use crate::output::emit_line;
use anyhow::{anyhow, bail};
use clap::Args;
use larch_core::Kind;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch cat`.
#[derive(Args, Debug)]
pub struct CatArgs {
    /// The store directory.
    store: PathBuf,
    /// The value's path, `a/b/c`.
    path: String,
    /// The commit: a hash (`Co…` or hex), a branch, or `head` (default).
    #[arg(long, short = 'c')]
    commit: Option<String>,
    /// Print the bytes as hex (and a newline) instead of raw.
    #[arg(long, conflicts_with = "json")]
    hex: bool,
    /// Print JSON (path, hash, size, hex value) instead of the raw bytes.
    #[arg(long)]
    json: bool,
}

/// Runs `larch cat`.
pub fn run(args: CatArgs) -> anyhow::Result<ExitCode> {
    let repo = open_store(&args.store)?;
    let commit = resolve_commit(&repo, args.commit.as_deref())?;
    let steps = parse_path(Some(&args.path));
    let tree = walk(&repo.checkout(&commit)?, &steps)?;
    if tree.kind() == Kind::Node {
        bail!("{} is a directory, not a value (use `larch ls`)", show_path(&steps));
    }
    let value = tree.find::<&[u8]>(&[])?.ok_or_else(|| anyhow!("no value at {}", show_path(&steps)))?;
    let bytes = value.as_bytes();
    if args.json {
        let out = json!({
            "commit": commit.to_string(),
            "path": show_path(&steps),
            "hash": tree.hash().to_hex(),
            "size": bytes.len(),
            "hex": hex::encode(bytes),
        });
        emit_line(serde_json::to_string_pretty(&out)?)?;
    } else if args.hex {
        emit_line(hex::encode(bytes))?;
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}
