//! `larch recover STORE [--apply]`: finds the newest complete commit of a damaged store from its
//! pack and commit index, reports what publishing it would drop, and publishes it with `--apply`.
//! A store in archive mode needs the global `--lower DIR` or `--lower s3://BUCKET/PREFIX`; a collected store whose control file
//! has no valid slot is rebuilt from its chunk and segment files (docs/store.md, *Recovery*).

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch recover`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// The store directory.
    store: PathBuf,
    /// Publish the commit found (otherwise only report).
    #[arg(long)]
    apply: bool,
}

/// Plans (and with `--apply` performs) the recovery; exits with 1 when no complete commit exists.
pub fn run(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    // Archive mode: the global `--lower DIR|s3://...` (chunk files moved there are looked up in
    // it; object storage is opened as a reader: recovery never writes the bucket).
    let layer = crate::lower::open(&args.store, false)?;
    let plan = match layer.layer() {
        Some(layer) => larch_store::plan_recovery_layered(&args.store, Some(layer)),
        None => larch_store::plan_recovery_with(&args.store, crate::inspect::lower().as_deref()),
    }
    .with_context(|| format!("examining store {}", args.store.display()))?;
    let short = |hash: &larch_core::Hash| hash.to_hex().chars().take(16).collect::<String>();
    match &plan.open_error {
        None => println!("the store opens as it is"),
        Some(error) => println!("the store does not open: {error}"),
    }
    match &plan.published {
        Some(state) => println!(
            "published state: generation {}, pack {} bytes, {} commits, head {}",
            state.generation,
            state.pack_end,
            (state.index_end.saturating_sub(16)) / 44,
            state.branches.get("main").map_or_else(|| "none".to_string(), |(hash, _)| short(hash))
        ),
        None => println!("published state: none (no valid control slot)"),
    }
    if let Some(layout) = &plan.rebuilt_layout {
        println!("layout rebuilt from the files: {layout}");
    }
    println!(
        "pack: {} bytes; records check out up to {}; {} commit records found",
        plan.pack_len,
        plan.scan_end,
        plan.found.len()
    );
    for (commit, problem) in &plan.rejected {
        println!("  incomplete: commit {} at {}: {problem}", short(&commit.hash), commit.offset);
    }
    for (hash, offset) in &plan.index_only {
        println!("  named by the index but not in the readable pack: {} at {offset}", short(hash));
    }
    let Some(chosen) = &plan.chosen else {
        println!("no complete commit found: nothing can be published");
        return Ok(ExitCode::FAILURE);
    };
    let position = plan.found.iter().position(|c| c == chosen).map_or(0, |p| p + 1);
    println!(
        "newest complete commit: {} at offset {} ({} commits, pack end {})",
        chosen.hash.to_hex(),
        chosen.offset,
        position,
        chosen.end
    );
    println!(
        "publishing it drops: {} published commits, {} newer commit records, {} pack bytes past it{}",
        plan.dropped_published_commits(),
        plan.found.len() - position,
        plan.pack_len - chosen.end,
        if plan.dropped_branches.is_empty() {
            String::new()
        } else {
            format!(", branches {:?}", plan.dropped_branches)
        }
    );
    if plan.is_noop() {
        println!("nothing to do: the store already stands on it");
        return Ok(ExitCode::SUCCESS);
    }
    if args.apply {
        plan.apply().with_context(|| format!("publishing in {}", args.store.display()))?;
        println!("published: the store now stands on {}", chosen.hash.to_hex());
    } else {
        println!("run again with --apply to publish it");
    }
    Ok(ExitCode::SUCCESS)
}
