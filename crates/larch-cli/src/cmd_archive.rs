//! `larch archive STORE --lower DIR (--keep-blocks N | --commit H) [--json]`: archive mode
//! (`docs/store.md`, *Archive mode*): moves the store's sealed chunk files below the chunk of a
//! commit to the lower directory `DIR` (another disk), where reads follow them. Nothing is
//! collected: every commit stays readable, with `--lower DIR`.

use crate::inspect::resolve_commit;
use crate::output::emit_line;
use anyhow::{Context, bail};
use clap::Args;
use larch_bench::stats::dir_bytes;
use larch_core::Hash;
use larch_store::{DEFAULT_BRANCH, Repo, RepoOptions};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `larch archive`.
#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// The store directory.
    store: PathBuf,
    /// Keep in the store directory the chunks of the last N blocks: move the chunks below the one
    /// holding the commit N first-parent steps behind the head.
    #[arg(long, value_name = "N", conflicts_with = "commit", required_unless_present = "commit")]
    keep_blocks: Option<u64>,
    /// Move the chunks below the one holding this commit (a hash, a branch, or `head`).
    #[arg(long, value_name = "HASH")]
    commit: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Bytes of every regular file directly in `dir` (0 when it does not exist).
fn disk_bytes(dir: &Path) -> anyhow::Result<u64> {
    match dir_bytes(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
        other => other.with_context(|| format!("listing {}", dir.display())),
    }
}

/// The commit `n` first-parent steps behind `from`, or `None` when the history is shorter.
fn steps_behind(repo: &Repo, from: Hash, n: u64) -> anyhow::Result<Option<Hash>> {
    let mut at = from;
    for _ in 0..n {
        let details = repo.commit_details(&at).with_context(|| format!("reading commit {at}"))?;
        match details.parents.first() {
            Some(parent) if !details.absent_parents.contains(parent) => at = *parent,
            _ => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// Runs `larch archive`.
pub fn run(args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    if !args.store.exists() {
        bail!("store {} does not exist", args.store.display());
    }
    // `--lower DIR|URL` is the global option: the lower layer the sealed chunks move to.
    let Some(lower_name) = crate::inspect::lower_raw() else {
        bail!(
            "larch archive needs --lower DIR or --lower s3://BUCKET/PREFIX: the lower layer the sealed chunks move to (created if absent; one per store)"
        );
    };
    let lower_layer = crate::lower::open(&args.store, true)?;
    // The bytes of a lower directory on disk (object storage: its uploads are reported instead).
    let lower_dir = crate::inspect::lower();
    let lower_bytes = || lower_dir.as_deref().map_or(Ok(0), disk_bytes);
    let lower = lower_name.display();
    let options = RepoOptions { create: false, ..RepoOptions::default() };
    let mut repo = lower_layer
        .open_writer(&args.store, options)
        .with_context(|| format!("opening store {} for writing", args.store.display()))?;
    let target = match (&args.commit, args.keep_blocks) {
        (Some(name), _) => Some(resolve_commit(&repo, Some(name))?),
        (None, Some(n)) => {
            let Some(head) = repo.branch(DEFAULT_BRANCH) else {
                bail!(
                    "the store has no head yet (branch `{DEFAULT_BRANCH}` does not exist): nothing to archive"
                )
            };
            steps_behind(&repo, head, n)?
        }
        (None, None) => bail!("give --keep-blocks N or --commit HASH"),
    };
    let (upper_before, lower_before) = (disk_bytes(&args.store)?, lower_bytes()?);
    let report = match target {
        Some(target) => Some(
            repo.archive(&target)
                .with_context(|| format!("archiving {} into {lower}", args.store.display()))?,
        ),
        None => None,
    };
    repo.close().with_context(|| format!("closing store {}", args.store.display()))?;
    let uploads = lower_layer.finish_uploads();
    let (upper_after, lower_after) = (disk_bytes(&args.store)?, lower_bytes()?);
    if args.json {
        let out = json!({
            "store": args.store.display().to_string(),
            "lower": lower.to_string(),
            "uploads": uploads.as_ref().map(|u| json!({
                "uploaded": u.uploaded,
                "uploaded_bytes": u.uploaded_bytes,
                "backlog": u.backlog,
                "backlog_bytes": u.backlog_bytes,
                "failures": u.failures,
                "last_error": u.last_error,
            })),
            "commit": target.map(|hash| hash.to_string()),
            "commit_chunk": report.as_ref().map(|r| r.commit_chunk),
            "chunks_moved": report.as_ref().map_or(0, |r| r.chunks_moved),
            "bytes_moved": report.as_ref().map_or(0, |r| r.bytes_moved),
            "chunks_already_lower": report.as_ref().map_or(0, |r| r.chunks_already_lower),
            "upper_chunks": report.as_ref().map(|r| r.upper_chunks),
            "flag_published": report.as_ref().is_some_and(|r| r.flag_published),
            "seconds": report.as_ref().map_or(0.0, |r| r.elapsed.as_secs_f64()),
            "upper_bytes_before": upper_before,
            "upper_bytes_after": upper_after,
            "lower_bytes_before": lower_before,
            "lower_bytes_after": lower_after,
        });
        emit_line(serde_json::to_string_pretty(&out)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(target), Some(report)) = (target, report) else {
        emit_line(format!(
            "the history is shorter than {} blocks: nothing to archive",
            args.keep_blocks.unwrap_or(0)
        ))?;
        return Ok(ExitCode::SUCCESS);
    };
    emit_line(format!("commit {target} is in chunk {}", report.commit_chunk))?;
    emit_line(format!(
        "moved {} chunk files ({} bytes) to {} in {:.3} s; {} were already there{}",
        report.chunks_moved,
        report.bytes_moved,
        lower,
        report.elapsed.as_secs_f64(),
        report.chunks_already_lower,
        if report.flag_published { " (the store is now in archive mode: open it with --lower)" } else { "" }
    ))?;
    emit_line(format!(
        "store directory: {upper_before} → {upper_after} bytes, {} chunk files; lower directory: {lower_before} → {lower_after} bytes",
        report.upper_chunks
    ))?;
    if let Some(u) = uploads {
        emit_line(format!(
            "uploads: {} chunks ({} bytes) uploaded and verified, {} waiting ({} bytes), {} failed attempts retried",
            u.uploaded, u.uploaded_bytes, u.backlog, u.backlog_bytes, u.failures
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
