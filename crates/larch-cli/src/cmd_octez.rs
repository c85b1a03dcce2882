//! `larch import octez-snapshot FILE NEW`: the context of an Octez snapshot archive into a new
//! larch store (`docs/octez.md`).

use crate::output::emit_line;
use anyhow::{Context, bail};
use clap::Args;
use larch_irmin::IrminStore;
use larch_octez::OctezError;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `larch import octez-snapshot`.
#[derive(Args, Debug)]
pub struct OctezSnapshotArgs {
    /// The snapshot archive (`-`: standard input), as `octez-node snapshot export` writes it, or
    /// a snapshot exported as a directory (`--export-format raw`), read in place.
    file: PathBuf,
    /// The larch store to create (must not exist).
    new_store: PathBuf,
}

/// Where the context's files are written while the archive is read: a build directory beside
/// the new store (`.NEW.context.importing-PID`), removed at the end, and by a later import when
/// its process died.
fn context_target(new_store: &Path) -> PathBuf {
    let name =
        new_store.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    new_store.with_file_name(format!("{name}.context"))
}

/// Removes the directory when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `larch import octez-snapshot`.
pub fn import_snapshot(args: &OctezSnapshotArgs) -> anyhow::Result<ExitCode> {
    if args.new_store.exists() {
        bail!("{} already exists: the import creates a new store", args.new_store.display());
    }
    let started = Instant::now();
    // A snapshot exported as a directory is read in place; an archive is streamed, its context's
    // files written to a scratch directory beside the new store.
    let (snapshot, context, _scratch) = if args.file.is_dir() {
        let snapshot = larch_octez::read_directory(&args.file)
            .with_context(|| format!("reading the Octez snapshot directory {}", args.file.display()))?;
        (snapshot, args.file.join("context"), None)
    } else {
        let target = context_target(&args.new_store);
        for stale in larch_store::remove_stale_builds(&target)? {
            emit_line(format_args!("removed {}: the context files of an import that died", stale.display()))?;
        }
        let scratch_dir = larch_store::build_dir(&target);
        std::fs::create_dir(&scratch_dir).with_context(|| format!("creating {}", scratch_dir.display()))?;
        let scratch = Scratch(scratch_dir);
        let input: Box<dyn Read> = if args.file.as_os_str() == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            Box::new(
                std::fs::File::open(&args.file)
                    .with_context(|| format!("opening {}", args.file.display()))?,
            )
        };
        let snapshot = larch_octez::read_archive(input, &scratch.0)
            .with_context(|| format!("reading the Octez snapshot {}", args.file.display()))?;
        (snapshot, scratch.0.clone(), Some(scratch))
    };
    let meta = &snapshot.metadata;
    emit_line(format_args!(
        "Octez snapshot version {}: chain {}, mode {}, block {} at level {} ({})",
        snapshot.version, meta.chain_name, meta.mode, meta.block_hash, meta.level, meta.timestamp
    ))?;
    let expected = snapshot.block.resulting_context_hash;
    let archive = match snapshot.archive_bytes {
        0 => String::new(),
        bytes => format!("; archive {bytes} bytes"),
    };
    emit_line(format_args!(
        "  context {} ({} files, {} bytes){archive}",
        expected.to_base58(),
        snapshot.context_files,
        snapshot.context_bytes
    ))?;
    let store = IrminStore::open(&context).context("opening the snapshot's context (context/)")?;
    let head = store.head().context("reading the commit of the snapshot's context")?;
    if head.hash != expected {
        return Err(OctezError::ContextMismatch { expected, found: head.hash }.into());
    }
    let summary = crate::cmd_import::import_staged(&store, std::slice::from_ref(&head), &args.new_store)?;
    drop(store);
    drop(_scratch);
    emit_line(format_args!(
        "imported context {} into {} in {:.2} s: {} objects, {:.1} MB written; every hash verified",
        summary.head.to_base58(),
        args.new_store.display(),
        started.elapsed().as_secs_f64(),
        summary.objects_written,
        summary.bytes_written as f64 / 1e6
    ))?;
    Ok(ExitCode::SUCCESS)
}
