//! `larch snapshot export|import|verify`: portable snapshots of one commit
//! (`docs/snapshot-format.md`).

use crate::output::emit_line;
use anyhow::Context;
use clap::Subcommand;
use indicatif::{HumanBytes, ProgressBar};
use larch_core::Hash;
use larch_snapshot::{ExportOptions, Progress};
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Subcommands of `larch snapshot`.
#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Write the full tree of one commit (default: the head), its info and parent hashes, into one
    /// portable file (`-` for stdout).
    Export {
        /// The store directory.
        store: PathBuf,
        /// The snapshot file to write (`-`: stdout).
        out: PathBuf,
        /// The commit to export (base58 or hex); default: the head of `main`.
        #[arg(long)]
        commit: Option<Hash>,
        /// Deflate level of the frames, 0 (store them) to 9.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=9))]
        level: u32,
        /// Back-reference window in objects (1 to 2^20): a repeated object further back is
        /// written again; bounds the memory of export and import.
        #[arg(long, default_value_t = larch_snapshot::format::DEFAULT_WINDOW,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(larch_snapshot::format::WINDOW_MAX)))]
        window: u32,
    },
    /// Build a new store from a snapshot (`-` for stdin); its head is the snapshot's commit, with
    /// the same hash. Every hash is checked before anything is published; on failure the new store
    /// is removed.
    Import {
        /// The snapshot file (`-`: stdin).
        file: PathBuf,
        /// The new store directory (must not exist).
        store: PathBuf,
    },
    /// Check a snapshot (every frame, record and hash) without writing anything.
    Verify {
        /// The snapshot file (`-`: stdin).
        file: PathBuf,
    },
}

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

fn update(bar: &ProgressBar, progress: Progress) {
    bar.set_position(progress.file_bytes);
    bar.set_message(format!("{} objects", progress.objects));
}

fn rate(bytes: u64, seconds: f64) -> String {
    format!("{}/s", HumanBytes((bytes as f64 / seconds.max(1e-9)) as u64))
}

/// Runs a `snapshot` subcommand.
pub fn run(command: SnapshotCommand) -> anyhow::Result<ExitCode> {
    match command {
        SnapshotCommand::Export { store, out, commit, level, window } => {
            export(&store, &out, commit, level, window)
        }
        SnapshotCommand::Import { file, store } => import(&file, &store),
        SnapshotCommand::Verify { file } => verify(&file),
    }
}

fn export(
    store: &Path,
    out: &Path,
    commit: Option<Hash>,
    level: u32,
    window: u32,
) -> anyhow::Result<ExitCode> {
    // A small cache: the walk reads each record once; patch bases are the only re-reads, and the
    // last versions suffice (4 MiB: 1.1 s CPU and 80 MB RSS on the default trace's head, against
    // 1.3 s and 120 MB with 32 MiB, 250 MB with 128 MiB). Reads
    // are `pread`s: a memory map saves 0.3-0.5 s of system time but counts the pack's pages in the
    // RSS (460 MB on the default trace's store).
    let lower = crate::lower::open(store, false)?;
    let options = larch_store::RepoOptions {
        cache_bytes: 4 << 20,
        create: false,
        ..larch_store::RepoOptions::default()
    };
    let repo =
        lower.open_read_only(store, options).with_context(|| format!("opening store {}", store.display()))?;
    let options = ExportOptions { compression: (level > 0).then_some(level), window };
    let bar = crate::progress::bytes_with_message("export", None);
    let started = Instant::now();
    let mut on_progress = |progress: Progress| update(&bar, progress);
    let summary = if is_stdio(out) {
        let stdout = std::io::stdout();
        larch_snapshot::export(
            &repo,
            commit,
            BufWriter::with_capacity(1 << 20, stdout),
            options,
            &mut on_progress,
        )
    } else {
        let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
        let result = larch_snapshot::export(
            &repo,
            commit,
            BufWriter::with_capacity(1 << 20, &file),
            options,
            &mut on_progress,
        );
        let result = result.and_then(|summary| {
            file.sync_all().map_err(|source| larch_snapshot::SnapshotError::Io {
                op: "syncing",
                path: out.to_path_buf(),
                source,
            })?;
            Ok(summary)
        });
        if result.is_err() {
            // A partial snapshot would fail its import anyway; do not leave it looking finished.
            let _ = std::fs::remove_file(out);
        }
        result
    };
    bar.finish_and_clear();
    let summary = summary.with_context(|| format!("exporting {}", store.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let counts = &summary.counts;
    let lines = [
        format!("exported commit {} (tree {})", summary.commit, summary.tree),
        format!(
            "  objects     {} ({} contents, {} directories, {} inode leaves, {} inode trees), {} inline values, {} back-references",
            counts.objects(),
            counts.contents,
            counts.flat,
            counts.values,
            counts.tree,
            counts.inline,
            counts.back_references
        ),
        format!(
            "  bytes       {} in {} frames ({} of records, {} of names, {} of values)",
            summary.file_bytes, summary.frames, summary.stream_bytes, counts.name_bytes, counts.value_bytes
        ),
        format!(
            "  time        {seconds:.2} s ({}, {:.0} objects/s)",
            rate(summary.file_bytes, seconds),
            counts.objects() as f64 / seconds.max(1e-9)
        ),
    ];
    for line in lines {
        // With the snapshot on stdout, the summary goes to stderr.
        if is_stdio(out) {
            eprintln!("{line}");
        } else {
            emit_line(line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn open_input(file: &Path) -> anyhow::Result<(Box<dyn Read>, Option<u64>)> {
    if is_stdio(file) {
        return Ok((Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock())), None));
    }
    let opened = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let len = opened.metadata().ok().map(|meta| meta.len());
    Ok((Box::new(BufReader::with_capacity(1 << 20, opened)), len))
}

fn import(file: &Path, store: &Path) -> anyhow::Result<ExitCode> {
    let (input, len) = open_input(file)?;
    let bar = crate::progress::bytes_with_message("import", len);
    let started = Instant::now();
    let summary = larch_snapshot::import(input, store, &mut |progress| update(&bar, progress));
    bar.finish_and_clear();
    let summary =
        summary.with_context(|| format!("importing {} into {}", file.display(), store.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let counts = &summary.counts;
    let parents: Vec<String> = summary.parents.iter().map(Hash::to_string).collect();
    for stale in &summary.stale_removed {
        emit_line(format_args!("removed {}: the build directory of an import that died", stale.display()))?;
    }
    emit_line(format_args!(
        "imported commit {} (tree {}) into {}",
        summary.commit,
        summary.tree,
        store.display()
    ))?;
    emit_line(format_args!(
        "  parents     {} (absent from the new store)",
        if parents.is_empty() { "none".to_string() } else { parents.join(", ") }
    ))?;
    emit_line(format_args!(
        "  objects     {} verified ({} contents, {} directories, {} inode leaves, {} inode trees), {} inline values",
        counts.objects(),
        counts.contents,
        counts.flat,
        counts.values,
        counts.tree,
        counts.inline
    ))?;
    emit_line(format_args!(
        "  bytes       {} read ({} of records), {} hashed, {} written to the store",
        summary.file_bytes, summary.stream_bytes, counts.hashed_bytes, summary.store_bytes
    ))?;
    emit_line(format_args!(
        "  time        {seconds:.2} s ({}, {:.0} objects/s)",
        rate(summary.file_bytes, seconds),
        counts.objects() as f64 / seconds.max(1e-9)
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn verify(file: &Path) -> anyhow::Result<ExitCode> {
    let (input, len) = open_input(file)?;
    let bar = crate::progress::bytes_with_message("verify", len);
    let decoded = larch_snapshot::verify(input, &mut |progress| update(&bar, progress));
    bar.finish_and_clear();
    let decoded = decoded.with_context(|| format!("verifying {}", file.display()))?;
    emit_line(format_args!(
        "snapshot of commit {} (tree {}): {} objects, {} bytes, every hash checked",
        decoded.commit,
        decoded.tree.0,
        decoded.counts.objects(),
        decoded.file_bytes
    ))?;
    Ok(ExitCode::SUCCESS)
}
