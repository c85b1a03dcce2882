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
    let report =
        larch_store::fsck(&args.store).with_context(|| format!("opening store {}", args.store.display()))?;
    emit(&report)?;
    Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
