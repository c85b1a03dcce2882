//! `larch fsck STORE`: the integrity check of a store, with a progress bar over the bytes of the
//! pack it has swept.

use crate::output::emit;
use crate::size::parse_size;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `larch fsck`.
#[derive(Args, Debug)]
pub struct FsckArgs {
    /// The store directory.
    store: PathBuf,
    /// Byte budget of the cache of decoded objects (the bases of patches and the children of
    /// inodes, read again while the check sweeps the pack from its end down). The check's other
    /// memory is the records reached and not checked yet (`records waiting at most`), whatever
    /// the store's size. Sizes: `64M` and `64MiB` are binary (K = 1024), `64MB` is decimal.
    #[arg(long, value_parser = parse_size, default_value = "64MiB")]
    cache_size: u64,
    /// The most records reached and not checked yet kept in memory (about 100 bytes each); the
    /// others wait in a temporary file of `$TMPDIR` (no name; gone when the check ends).
    #[arg(long, default_value_t = larch_store::DEFAULT_FSCK_PENDING)]
    max_pending: usize,
}

/// Checks the store; exits with 1 when it has problems (all are printed).
pub fn run(args: FsckArgs) -> anyhow::Result<ExitCode> {
    let lower = crate::lower::open(&args.store, false)?;
    let options = larch_store::RepoOptions {
        create: false,
        cache_bytes: args.cache_size,
        ..larch_store::RepoOptions::default()
    };
    let repo = lower
        .open_read_only(&args.store, options)
        .with_context(|| format!("opening store {}", args.store.display()))?;
    // Made at the first report, which gives its length.
    let mut bar: Option<indicatif::ProgressBar> = None;
    let fsck_options = larch_store::FsckOptions { max_pending: args.max_pending, ..Default::default() };
    let report = repo.fsck_with_progress(&fsck_options, &mut |progress| {
        let bar = bar.get_or_insert_with(|| crate::progress::bytes_bar("checking", progress.pack_bytes));
        bar.set_length(progress.pack_bytes);
        bar.set_position(progress.swept_bytes);
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    emit(&report)?;
    lower.report_cache();
    Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
