//! `larch stats STORE`: size on disk, commits, branches, records and bytes by kind, patch chain
//! lengths, from one sequential pass over the pack's record framing (`Repo::scan`), without the
//! hashing and reachability walk of `larch fsck`.

use crate::inspect::open_store;
use crate::output::{emit, emit_line};
use anyhow::Context;
use clap::Args;
use larch_bench::stats::dir_bytes;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The store directory.
    store: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `1.23 MiB` style sizes (three significant digits, binary units), as the reports write them.
fn human(bytes: u64) -> String {
    larch_bench::stats::fmt::bytes(bytes as f64)
}

/// Runs `larch stats`.
pub fn run(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let repo = open_store(&args.store)?;
    let report = repo.scan().with_context(|| format!("scanning {}", args.store.display()))?;
    let disk = dir_bytes(&args.store).with_context(|| format!("listing {}", args.store.display()))?;
    let records = report.records();
    let chunks = repo.chunk_files();
    let segments = repo.segment_files();
    let live_bytes: u64 = report.by_kind.values().map(|stats| stats.bytes).sum();
    if args.json {
        let kinds: serde_json::Map<_, _> = report
            .by_kind
            .iter()
            .map(|(kind, stats)| {
                (kind.name().to_owned(), json!({ "records": stats.count, "bytes": stats.bytes }))
            })
            .collect();
        let chains: serde_json::Map<_, _> =
            report.patch_chains.iter().map(|(chain, count)| (chain.to_string(), json!(count))).collect();
        let out = json!({
            "store": args.store.display().to_string(),
            "disk_bytes": disk,
            "pack_bytes": report.pack_bytes,
            "index_bytes": report.index_bytes,
            "chunk_files": chunks.iter().map(|(name, start, end)| json!({ "name": name, "start": start, "end": end })).collect::<Vec<_>>(),
            "gc_generation": repo.gc_generation(),
            "segment_files": segments.iter().map(|(name, start, end, kept)| json!({ "name": name, "range_start": start, "range_end": end, "record_bytes": kept })).collect::<Vec<_>>(),
            "record_bytes": live_bytes,
            "commits": report.commits,
            "branches": report.branches.iter().map(|(name, hash)| json!({ "name": name, "commit": hash.to_string() })).collect::<Vec<_>>(),
            "records": records,
            "by_kind": kinds,
            "patch_chains": chains,
            "mean_patch_chain": report.mean_chain(),
            "largest_record": report.largest_record.map(|(bytes, offset)| json!({ "bytes": bytes, "offset": offset })),
        });
        emit_line(serde_json::to_string_pretty(&out)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    writeln!(text, "store        {}", args.store.display())?;
    writeln!(text, "on disk      {} ({disk} bytes)", human(disk))?;
    writeln!(text, "pack         {} (published)", human(report.pack_bytes))?;
    if let (Some(first), Some(last)) = (chunks.first(), chunks.last()) {
        writeln!(text, "chunks       {} files ({} to {})", chunks.len(), first.0, last.0)?;
    }
    if !segments.is_empty() {
        let kept: u64 = segments.iter().map(|(_, _, _, kept)| kept).sum();
        // A chunk the first GC kept in place is listed with the segments (read as one).
        let in_place: Vec<&str> = segments
            .iter()
            .map(|(name, ..)| name.as_str())
            .filter(|name| name.starts_with("chunk."))
            .collect();
        writeln!(
            text,
            "gc           generation {}; {} segment files ({} of records kept below the first chunk){}",
            repo.gc_generation(),
            segments.len(),
            human(kept),
            if in_place.is_empty() {
                String::new()
            } else {
                format!(", of which {} kept in place", in_place.join(", "))
            }
        )?;
    }
    writeln!(text, "commit index {}", human(report.index_bytes))?;
    writeln!(text, "commits      {}", report.commits)?;
    for (name, hash) in &report.branches {
        writeln!(text, "branch       {name} → {hash}")?;
    }
    writeln!(
        text,
        "\n{:<18} {:>12} {:>12} {:>7} {:>10}",
        "record kind", "records", "bytes", "share", "mean"
    )?;
    for (kind, stats) in &report.by_kind {
        let share = 100.0 * stats.bytes as f64 / live_bytes.max(1) as f64;
        let mean = stats.bytes as f64 / stats.count.max(1) as f64;
        writeln!(
            text,
            "{:<18} {:>12} {:>12} {share:>6.1}% {mean:>8.1} B",
            kind.name(),
            stats.count,
            human(stats.bytes)
        )?;
    }
    writeln!(text, "{:<18} {records:>12}", "all")?;
    if !report.patch_chains.is_empty() {
        let chains: Vec<String> =
            report.patch_chains.iter().map(|(chain, count)| format!("{chain}: {count}")).collect();
        writeln!(text, "\npatch chains {} (mean {:.2})", chains.join(", "), report.mean_chain())?;
    }
    if let Some((bytes, offset)) = report.largest_record {
        writeln!(text, "largest record {} at pack offset {offset}", human(bytes))?;
    }
    emit(text)?;
    Ok(ExitCode::SUCCESS)
}
