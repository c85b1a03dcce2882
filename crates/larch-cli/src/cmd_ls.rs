//! `larch ls STORE [--commit C] [PATH] [--offset O --length L]`: the entries of a directory with
//! kind, hash and size, in Irmin's order and paginated as Octez's `Context.list ?offset ?length`
//! (the slice `[offset, offset + length)` of the listing). A commit's directory lists in the order
//! of its inode layout: by name up to 32 entries, in bucket order above (docs/list-order.md).

use crate::inspect::{kind_name, open_store, parse_path, resolve_commit, show_name, show_path, walk};
use crate::output::{emit, emit_line};
use anyhow::bail;
use clap::Args;
use larch_core::{Kind, Tree};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// The store directory.
    store: PathBuf,
    /// The directory, `a/b/c` (default: the root).
    path: Option<String>,
    /// The commit: a hash (`Co…` or hex), a branch, or `head` (default).
    #[arg(long, short = 'c')]
    commit: Option<String>,
    /// Skip this many entries of the listing (in Irmin's order: docs/list-order.md).
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Show at most this many entries (all to the end when absent).
    #[arg(long)]
    length: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The size column: bytes of a value, entries of a directory.
fn size_of(tree: &Tree) -> anyhow::Result<u64> {
    Ok(match tree.kind() {
        Kind::Contents => tree.find::<&[u8]>(&[])?.map_or(0, |value| value.as_bytes().len() as u64),
        Kind::Node => tree.length::<&[u8]>(&[])?,
    })
}

/// Runs `larch ls`.
pub fn run(args: LsArgs) -> anyhow::Result<ExitCode> {
    let repo = open_store(&args.store)?;
    let commit = resolve_commit(&repo, args.commit.as_deref())?;
    let steps = parse_path(args.path.as_deref());
    let dir = walk(&repo.checkout(&commit)?, &steps)?;
    if dir.kind() == Kind::Contents {
        bail!("{} is a value, not a directory (use `larch cat`)", show_path(&steps));
    }
    let total = dir.length::<&[u8]>(&[])?;
    let entries = dir.list::<&[u8]>(&[], args.offset, args.length)?;
    let mut rows = Vec::with_capacity(entries.len());
    for (name, tree) in &entries {
        rows.push((show_name(name.as_bytes()), tree.kind(), tree.hash(), size_of(tree)?));
    }
    if args.json {
        let values: Vec<_> = rows
            .iter()
            .map(|(name, kind, hash, size)| {
                json!({ "name": name, "kind": kind_name(*kind), "hash": hash.to_hex(), "size": size })
            })
            .collect();
        let out = json!({
            "commit": commit.to_string(),
            "path": show_path(&steps),
            "hash": dir.hash().to_hex(),
            "length": total,
            "offset": args.offset,
            "entries": values,
        });
        emit_line(serde_json::to_string_pretty(&out)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for (name, kind, hash, size) in &rows {
        let size = match kind {
            Kind::Contents => format!("{size} B"),
            Kind::Node => format!("{size} entries"),
        };
        writeln!(text, "{:<9}  {}  {size:>14}  {name}", kind_name(*kind), hash.to_hex())?;
    }
    writeln!(text, "({} of {total} entries of {} at commit {commit})", rows.len(), show_path(&steps))?;
    emit(text)?;
    Ok(ExitCode::SUCCESS)
}
