//! `larch fsck STORE`: the integrity check of a store.

use crate::output::emit;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch fsck`.
#[derive(Args, Debug)]
pub struct FsckArgs {
    /// The store directory.
    store: PathBuf,
}

/// Checks the store; exits with 1 when it has problems (all are printed).
pub fn run(args: FsckArgs) -> anyhow::Result<ExitCode> {
    let lower = crate::lower::open(&args.store, false)?;
    let options = larch_store::RepoOptions { create: false, ..larch_store::RepoOptions::default() };
    let report = lower
        .open_read_only(&args.store, options)
        .with_context(|| format!("opening store {}", args.store.display()))?
        .fsck();
    emit(&report)?;
    lower.report_cache();
    Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
