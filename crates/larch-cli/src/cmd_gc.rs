//! `larch gc STORE (--keep-blocks N | --commit HASH)`: garbage collection of a store. Keeps the
//! given commit, every commit written after it and everything they reach; reclaims the rest and
//! returns its disk space. With `--compact`, also marks every old GC segment and merges those
//! holding garbage into the new one (docs/gc-design.md §6). Shows a progress bar while it runs and
//! prints a report.

use crate::inspect::resolve_commit;
use crate::output::emit_line;
use anyhow::{Context, bail};
use clap::Args;
use larch_core::Hash;
use larch_store::{DEFAULT_BRANCH, GcOptions, GcPhase, GcReport, Repo, RepoOptions};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `larch gc`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["keep_blocks", "commit"])))]
pub struct GcArgs {
    /// The store directory (opened as its writer: no other writer may hold it).
    store: PathBuf,
    /// Keep the last N blocks: the GC commit is N-1 first-parent steps behind the head, so that
    /// the head and the N-1 commits before it are kept.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    keep_blocks: Option<u64>,
    /// Keep this commit (a hash `Co…` or hex, or a branch) and every commit written after it.
    #[arg(long, value_name = "HASH")]
    commit: Option<String>,
    /// Compact the old GC segments too: mark through all of them and merge the newest ones that
    /// hold garbage into the new segment (what it copies stays within 25% of the store's size).
    #[arg(long)]
    compact: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// The commit `keep` first-parent steps behind the head (the oldest commit there is if the
/// history is shorter).
fn commit_behind_head(repo: &Repo, keep: u64) -> anyhow::Result<Hash> {
    let head = repo
        .branch(DEFAULT_BRANCH)
        .with_context(|| format!("the store has no head (branch `{DEFAULT_BRANCH}`): nothing to keep"))?;
    let mut commit = head;
    for _ in 1..keep {
        let details = repo.commit_details(&commit)?;
        match details.parents.first() {
            Some(parent) if repo.contains(parent) => commit = *parent,
            _ => break,
        }
    }
    Ok(commit)
}

/// Runs `larch gc`.
pub fn run(args: GcArgs) -> anyhow::Result<ExitCode> {
    if !args.store.exists() {
        bail!("store {} does not exist", args.store.display());
    }
    let lower = crate::lower::open(&args.store, true)?;
    let options = RepoOptions { create: false, ..RepoOptions::default() };
    let mut repo = lower
        .open_writer(&args.store, options)
        .with_context(|| format!("opening store {} as its writer", args.store.display()))?;
    let commit = match (&args.commit, args.keep_blocks) {
        (Some(name), _) => resolve_commit(&repo, Some(name))?,
        (None, Some(keep)) => commit_behind_head(&repo, keep)?,
        (None, None) => bail!("give --keep-blocks N or --commit HASH"),
    };
    repo.gc_start_with(&commit, GcOptions { compact: args.compact })
        .with_context(|| format!("starting the garbage collection on {commit}"))?;
    let bar = crate::progress::bytes_bar("marking", 0);
    while let Some(progress) = repo.gc_progress() {
        bar.set_prefix(match progress.phase {
            GcPhase::Mark => "marking",
            GcPhase::Copy => "copying",
            GcPhase::WaitingForSwitch => "switching",
        });
        bar.set_length(progress.total_bytes);
        bar.set_position(progress.done_bytes);
        if progress.phase == GcPhase::WaitingForSwitch {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Switches, publishes once more and unlinks the collected files: `disk_after` is the disk
    // given back.
    let report = repo.gc_wait();
    bar.finish_and_clear();
    let report = report?.context("the garbage collection ended without a report")?;
    let code = finish(repo, report, &args)?;
    // Object storage: a GC in archive mode retires chunks only; nothing new waits, but an earlier
    // writer's backlog was resumed at the open.
    lower.finish_uploads();
    Ok(code)
}

fn finish(repo: Repo, report: GcReport, args: &GcArgs) -> anyhow::Result<ExitCode> {
    repo.close().with_context(|| format!("closing store {}", args.store.display()))?;
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    if args.json {
        let value = json!({
            "commit": report.commit.to_string(),
            "generation": report.generation,
            "disk_before": report.disk_before,
            "disk_after": report.disk_after,
            "disk_peak": report.disk_peak,
            "region_bytes": report.region_bytes,
            "live_records": report.live_records,
            "base_only_records": report.base_only_records,
            "copied_bytes": report.copied_bytes,
            "chunks_removed": report.chunks_removed,
            "deep_mark": report.deep_mark,
            "segments_marked": report.segments_marked,
            "merged_segments": report.merged_segments,
            "segments_garbage": report.segments_garbage,
            "segment": report.segment,
            "kept_in_place": report.kept_in_place.as_ref().map(|(name, bytes)| json!({"file": name, "bytes": bytes})),
            "branches_removed": report.branches_removed,
            "slices": report.slice + 1,
            "marks": report.marks,
            "mark_records": report.mark_records,
            "mark_reads": report.mark_reads,
            "mark_s": report.mark_time.as_secs_f64(),
            "copy_s": report.copy_time.as_secs_f64(),
            "switch_pause_s": report.switch_pause.as_secs_f64(),
            "total_s": report.total_time.as_secs_f64(),
        });
        emit_line(serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    emit_line(format_args!("garbage collection {} of {}", report.generation, args.store.display()))?;
    emit_line(format_args!("  kept        {} and every later commit", report.commit))?;
    emit_line(format_args!(
        "  disk        {:.1} MiB before, {:.1} MiB after (peak {:.1} MiB, +{:.1}%)",
        mib(report.disk_before),
        mib(report.disk_after),
        mib(report.disk_peak),
        if report.disk_before > 0 {
            (report.disk_peak as f64 / report.disk_before as f64 - 1.0) * 100.0
        } else {
            0.0
        }
    ))?;
    emit_line(format_args!(
        "  collected   {:.1} MiB of old files: {} live records copied ({:.1} MiB, {} kept as patch bases only), {} chunk files removed",
        mib(report.region_bytes),
        report.live_records,
        mib(report.copied_bytes),
        report.base_only_records,
        report.chunks_removed
    ))?;
    if let Some((name, bytes)) = &report.kept_in_place {
        emit_line(format_args!(
            "  kept        {name} in place ({:.1} MiB, mostly live: read as a segment from now on)",
            mib(*bytes)
        ))?;
    }
    if report.segments_marked > 0 {
        emit_line(format_args!(
            "  segments    {} old segments marked{} ({:.1} MiB of garbage in them), {} merged{}",
            report.segments_marked,
            if report.deep_mark { " (all of them)" } else { "" },
            mib(report.segments_garbage),
            report.merged_segments.len(),
            if report.merged_segments.is_empty() {
                String::new()
            } else {
                format!(": {}", report.merged_segments.join(", "))
            }
        ))?;
    }
    if !report.branches_removed.is_empty() {
        emit_line(format_args!(
            "  branches    removed (they named collected commits): {}",
            report.branches_removed.join(", ")
        ))?;
    }
    emit_line(format_args!(
        "  time        {:.2} s (mark {:.2} s, copy {:.2} s, switch {:.1} ms)",
        report.total_time.as_secs_f64(),
        report.mark_time.as_secs_f64(),
        report.copy_time.as_secs_f64(),
        report.switch_pause.as_secs_f64() * 1e3
    ))?;
    emit_line(format_args!(
        "  mark        {} slice(s), {} mark(s): {} records visited, {} read",
        report.slice + 1,
        report.marks,
        report.mark_records,
        report.mark_reads
    ))?;
    Ok(ExitCode::SUCCESS)
}
