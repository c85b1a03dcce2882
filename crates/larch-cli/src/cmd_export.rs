//! `larch export irmin STORE DEST`: one commit of a larch store as a one-commit irmin-pack store,
//! the layout of the context inside an Octez snapshot (`docs/octez.md`).

use crate::output::emit_line;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use larch_core::Entry;
use larch_irmin::{ExportCommit, ExportParent};
use larch_store::{Repo, RepoOptions, StoreError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// What to export to.
#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// Write one commit as a one-commit irmin-pack store (Irmin 3.x, Tezos schema), in the layout
    /// of the context directory of an Octez snapshot (docs/octez.md).
    Irmin(IrminExportArgs),
}

/// Arguments of `larch export irmin`.
#[derive(Args, Debug)]
pub struct IrminExportArgs {
    /// The larch store.
    store: PathBuf,
    /// The irmin-pack directory to create (absent, or an empty directory).
    dest: PathBuf,
    /// The commit to export (hash `Co…` or hex, a branch, or `head`); default: the head.
    #[arg(long)]
    commit: Option<String>,
}

/// Runs `larch export`.
pub fn run(command: ExportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ExportCommand::Irmin(args) => export_irmin(&args),
    }
}

/// Whether `dest` may be created or filled: absent, or an empty directory.
fn check_dest(dest: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!("{} exists and is not empty: the export writes a new irmin-pack store", dest.display());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{} exists and is not an empty directory", dest.display())),
    }
}

fn export_irmin(args: &IrminExportArgs) -> anyhow::Result<ExitCode> {
    // The walk reads each record about once: a small cache suffices.
    let lower = crate::lower::open(&args.store, false)?;
    let options = RepoOptions { cache_bytes: 16 << 20, create: false, ..RepoOptions::default() };
    if !args.store.exists() {
        bail!("store {} does not exist", args.store.display());
    }
    let repo = lower
        .open_read_only(&args.store, options)
        .with_context(|| format!("opening store {}", args.store.display()))?;
    let hash = crate::inspect::resolve_commit(&repo, args.commit.as_deref())?;
    check_dest(&args.dest)?;
    let commit = export_commit(&repo, &hash)?;
    let tree = repo.checkout(&hash)?;
    let Entry::Node(root) = tree.root() else { bail!("the tree of commit {hash} is not a directory") };
    for stale in larch_store::remove_stale_builds(&args.dest)? {
        emit_line(format_args!("removed {}: the build directory of an export that died", stale.display()))?;
    }
    let staging = larch_store::build_dir(&args.dest);
    if staging.exists() {
        bail!("{} already exists", staging.display());
    }
    let started = Instant::now();
    std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let bar = crate::progress::bytes_with_message("export", None);
    bar.set_message("0 objects");
    let written =
        larch_irmin::write_one_commit_with_progress(repo.source(), root, &commit, &staging, &mut |stats| {
            bar.set_position(stats.prefix_bytes);
            bar.set_message(format!("{} objects", stats.contents + stats.roots + stats.inodes));
        });
    bar.finish_and_clear();
    let written =
        written.map_err(anyhow::Error::from).and_then(|stats| publish(&staging, &args.dest).map(|()| stats));
    let stats = match written {
        Ok(stats) => stats,
        Err(error) => {
            // Leave nothing that looks like a store.
            let _ = std::fs::remove_dir_all(&staging);
            return Err(error);
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    emit_line(format_args!(
        "exported commit {} to {} in {seconds:.2} s",
        hash.to_base58(),
        args.dest.display()
    ))?;
    emit_line(format_args!(
        "  {} contents, {} directories, {} inner inodes, {} dangling parent(s); store.1.prefix {} bytes, store.dict {} steps ({} bytes)",
        stats.contents,
        stats.roots,
        stats.inodes,
        stats.dangling_parents,
        stats.prefix_bytes,
        stats.dict_steps,
        stats.dict_bytes
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The commit's fields, and each parent's when the store holds it.
fn export_commit(repo: &Repo, hash: &larch_core::Hash) -> anyhow::Result<ExportCommit> {
    let details = repo.commit_details(hash)?;
    let mut parents = Vec::with_capacity(details.parents.len());
    for parent in &details.parents {
        // A parent the store does not hold (never imported, or collected) is referred to by hash;
        // any other failure to read it (I/O, corruption) is an error, not a silent downgrade.
        let known = if details.absent_parents.contains(parent) {
            None
        } else {
            match repo.commit_details(parent) {
                Ok(p) => Some(p),
                Err(StoreError::UnknownCommit(_) | StoreError::Collected { .. }) => None,
                Err(e) => return Err(e).with_context(|| format!("reading parent commit {parent}")),
            }
        };
        parents.push(match known {
            Some(p) => {
                ExportParent::Known { hash: p.hash, tree_hash: p.tree_hash, parents: p.parents, info: p.info }
            }
            None => ExportParent::HashOnly(*parent),
        });
    }
    Ok(ExportCommit { hash: *hash, parents, info: details.info })
}

/// Renames the complete, synced staging directory to `dest` (replacing an empty directory) and
/// syncs the parent directory.
fn publish(staging: &Path, dest: &Path) -> anyhow::Result<()> {
    check_dest(dest)?;
    std::fs::rename(staging, dest)
        .with_context(|| format!("renaming {} to {}", staging.display(), dest.display()))?;
    sync_parent(dest)
}

/// Makes the rename of a directory to `dest` durable: syncs the directory holding `dest`.
pub(crate) fn sync_parent(dest: &Path) -> anyhow::Result<()> {
    let parent = match dest.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    larch_irmin::export::sync_dir(&parent)
        .with_context(|| format!("syncing {}, the directory of {}", parent.display(), dest.display()))
}
