//! `larch import irmin IRMIN_STORE NEWSTORE`: converts commits of an irmin-pack store (an Octez
//! context directory) into a new larch store, verifying every hash on the way.

use crate::output::emit_line;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use larch_core::{Hash, Tree};
use larch_irmin::{
    BuildStats, IrminCommit, IrminStore, SinkError, SinkTarget, StreamStats, TreeSink, build_tree,
    stream_tree,
};
use larch_store::{BulkTarget, BulkWriter, DEFAULT_BRANCH, Repo, RepoOptions, SyncPolicy};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// What to import.
#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// Import commits of an irmin-pack store (Irmin 3.x, Tezos schema) into a new larch store.
    Irmin(IrminArgs),
    /// Import the context of an Octez snapshot archive (snapshot version 9) into a new larch
    /// store, checking its commit against the context hash the snapshot's block data records.
    OctezSnapshot(crate::cmd_octez::OctezSnapshotArgs),
}

/// Arguments of `larch import irmin`.
#[derive(Args, Debug)]
pub struct IrminArgs {
    /// The irmin-pack store directory (with `store.control`).
    irmin_store: PathBuf,
    /// The larch store to create (must not exist).
    new_store: PathBuf,
    /// A commit to import (base58 `Co…` or hex); repeatable. Default: the newest commit.
    #[arg(long = "commit", value_name = "HASH")]
    commits: Vec<String>,
    /// Import every readable commit, oldest first.
    #[arg(long, conflicts_with = "commits")]
    all: bool,
    /// The lower layer's directory (default: IRMIN_STORE/lower).
    #[arg(long, value_name = "DIR")]
    lower: Option<PathBuf>,
}

/// Runs `larch import`.
pub fn run(command: ImportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImportCommand::Irmin(args) => import_irmin(args),
        ImportCommand::OctezSnapshot(args) => crate::cmd_octez::import_snapshot(&args),
    }
}

fn parse_hash(text: &str) -> anyhow::Result<Hash> {
    Hash::from_base58(text)
        .or_else(|_| Hash::from_hex(text))
        .map_err(|_| anyhow::anyhow!("{text:?} is not a commit hash (base58 Co… or 64 hex digits)"))
}

fn import_irmin(args: IrminArgs) -> anyhow::Result<ExitCode> {
    let store = match &args.lower {
        Some(lower) => IrminStore::open_with_lower(&args.irmin_store, lower),
        None => IrminStore::open(&args.irmin_store),
    }
    .with_context(|| format!("opening irmin store {}", args.irmin_store.display()))?;
    let mut commits: Vec<IrminCommit> = if args.all {
        store.commits()?.iter().map(|hash| store.find_commit(hash)).collect::<Result<_, _>>()?
    } else if args.commits.is_empty() {
        vec![store.head()?]
    } else {
        args.commits
            .iter()
            .map(|text| Ok(store.find_commit(&parse_hash(text)?)?))
            .collect::<anyhow::Result<_>>()?
    };
    // Pack order puts parents before their children.
    commits.sort_by_key(|commit| commit.offset);
    commits.dedup_by_key(|commit| commit.hash);
    if commits.is_empty() {
        bail!("no readable commit in {}", args.irmin_store.display());
    }
    let started = Instant::now();
    let summary = import_staged(&store, &commits, &args.new_store)?;
    let seconds = started.elapsed().as_secs_f64().max(1e-9);
    let read = store.stats();
    let mb = |bytes: u64| bytes as f64 / 1e6;
    emit_line(format_args!(
        "imported {} commit(s) into {} (head {}) in {:.2} s",
        commits.len(),
        args.new_store.display(),
        summary.head.to_base58(),
        seconds
    ))?;
    emit_line(format_args!(
        "  read from irmin: {} objects ({} nodes, {} contents; {} references reused: shared, or unchanged since the parent), {:.1} MB: {:.0} objects/s, {:.1} MB/s",
        read.objects,
        summary.built.nodes,
        summary.built.contents,
        summary.built.reused,
        mb(read.bytes),
        read.objects as f64 / seconds,
        mb(read.bytes) / seconds
    ))?;
    emit_line(format_args!(
        "  written to larch: {} objects, {:.1} MB; every hash verified",
        summary.objects_written,
        mb(summary.bytes_written)
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Imports `commits` of `store` into the new larch store `new_store`, built in a staging
/// directory beside it and renamed into place only when every commit was imported and checked;
/// on any error the staging directory is removed.
pub(crate) fn import_staged(
    store: &IrminStore,
    commits: &[IrminCommit],
    new_store: &Path,
) -> anyhow::Result<Summary> {
    if new_store.exists() {
        bail!("{} already exists: the import creates a new store", new_store.display());
    }
    // Builds of this target killed midway (their process gone, no writer in them) are removed.
    for stale in larch_store::remove_stale_builds(new_store)? {
        emit_line(format_args!("removed {}: the build directory of an import that died", stale.display()))?;
    }
    let staging = larch_store::build_dir(new_store);
    if staging.exists() {
        bail!("{} already exists", staging.display());
    }
    let summary = match convert(store, commits, &staging) {
        Ok(summary) => summary,
        Err(error) => {
            // Leave nothing that looks like a store.
            let _ = std::fs::remove_dir_all(&staging);
            return Err(error);
        }
    };
    if let Err(error) = std::fs::rename(&staging, new_store) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(error)
            .with_context(|| format!("renaming {} to {}", staging.display(), new_store.display()));
    }
    crate::cmd_export::sync_parent(new_store)?;
    Ok(summary)
}

/// What an import did.
pub(crate) struct Summary {
    pub(crate) head: Hash,
    pub(crate) built: BuildStats,
    pub(crate) objects_written: u64,
    pub(crate) bytes_written: u64,
}

fn bar(total: u64) -> ProgressBar {
    let bar = crate::progress::on_terminal(ProgressBar::new(total));
    let style =
        ProgressStyle::with_template("{prefix:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} commits {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix("import");
    bar
}

fn convert(store: &IrminStore, commits: &[IrminCommit], dir: &Path) -> anyhow::Result<Summary> {
    // A smaller cache than a replay's: an import reads each parent tree once, along the changes.
    let options =
        RepoOptions { sync: SyncPolicy::Never, cache_bytes: IMPORT_CACHE_BYTES, ..RepoOptions::default() };
    let mut repo = Repo::open_with(dir, options).with_context(|| format!("creating {}", dir.display()))?;
    let progress = bar(commits.len() as u64);
    let mut built = BuildStats::default();
    let mut head = None;
    for commit in commits {
        let mut tick = |_: &StreamStats| {
            let read = store.stats();
            progress.set_message(format!("{} objects, {:.1} MB read", read.objects, read.bytes as f64 / 1e6));
        };
        let base: Option<Tree> = match commit.parents.first() {
            Some(parent) if repo.contains(parent) => Some(repo.checkout(parent)?),
            _ => None,
        };
        let made = match base {
            // No parent in the store: stream the whole tree into the store, object by object, in
            // bounded memory.
            None => {
                let mut writer = repo.bulk_writer()?;
                let (tree_hash, tree_key, stats) =
                    stream_tree(store, commit, &mut BulkSink(&mut writer), &mut tick)
                        .with_context(|| format!("converting commit {}", commit.hash.to_base58()))?;
                built.nodes += stats.nodes;
                built.contents += stats.contents;
                built.reused += stats.shared;
                writer.commit(
                    Some(DEFAULT_BRANCH),
                    (tree_hash, tree_key),
                    &commit.parents,
                    commit.info.clone(),
                )?
            }
            // On top of its imported parent: only what changed is read and written.
            Some(base) => {
                let mut tick = |_: &BuildStats| tick(&StreamStats::default());
                let (tree, stats) = build_tree(store, commit, repo.source(), Some(&base), &mut tick)
                    .with_context(|| format!("converting commit {}", commit.hash.to_base58()))?;
                built.nodes += stats.nodes;
                built.contents += stats.contents;
                built.reused += stats.reused;
                commit_into(&mut repo, &tree, commit)?
            }
        };
        if made != commit.hash {
            bail!(
                "larch computes commit hash {} for Irmin commit {}",
                made.to_base58(),
                commit.hash.to_base58()
            );
        }
        head = Some(made);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let stats = repo.stats();
    repo.close().context("closing the new store")?;
    Ok(Summary {
        head: head.context("nothing imported")?,
        built,
        objects_written: stats.objects_written,
        bytes_written: stats.bytes_written,
    })
}

/// Commits `tree` as `commit`. Parents not imported (older history, or collected by Irmin's GC)
/// are recorded as absent parents: the commit hash still covers them.
fn commit_into(repo: &mut Repo, tree: &Tree, commit: &IrminCommit) -> anyhow::Result<Hash> {
    if commit.parents.iter().all(|parent| repo.contains(parent)) {
        Ok(repo.commit(tree, &commit.parents, commit.info.clone())?)
    } else {
        Ok(repo.commit_with_absent_parents(tree, &commit.parents, commit.info.clone())?)
    }
}

/// The store's bulk writer as the sink of a streamed Irmin tree.
struct BulkSink<'a, 'r>(&'a mut BulkWriter<'r>);

fn bulk_targets<'a>(entries: &'a [(&'a [u8], SinkTarget<'a>)]) -> Vec<(&'a [u8], BulkTarget<'a>)> {
    entries
        .iter()
        .map(|(name, target)| {
            let target = match *target {
                SinkTarget::Node { hash, key } => BulkTarget::Node { hash, key },
                SinkTarget::Contents { hash, key } => BulkTarget::Contents { hash, key },
                SinkTarget::Inline(bytes) => BulkTarget::Inline(bytes),
            };
            (*name, target)
        })
        .collect()
}

impl TreeSink for BulkSink<'_, '_> {
    fn inline_max(&self) -> usize {
        // Values this short are stored inside their directory's record, as the store's own
        // writer does (`docs/format.md` §3.5).
        larch_store::INLINE_MAX
    }

    fn contents(&mut self, bytes: &[u8]) -> Result<larch_core::ObjectKey, SinkError> {
        Ok(self.0.contents(bytes)?)
    }

    fn flat(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<larch_core::ObjectKey, SinkError> {
        Ok(self.0.flat(&bulk_targets(entries))?)
    }

    fn values(&mut self, entries: &[(&[u8], SinkTarget<'_>)]) -> Result<larch_core::ObjectKey, SinkError> {
        Ok(self.0.values(&bulk_targets(entries))?)
    }

    fn tree(
        &mut self,
        depth: u8,
        length: u64,
        children: &[(u8, Hash, larch_core::ObjectKey)],
    ) -> Result<larch_core::ObjectKey, SinkError> {
        Ok(self.0.tree(depth, length, children)?)
    }
}

/// The store's cache of decoded objects during an import (the replay's default is 152 MiB).
const IMPORT_CACHE_BYTES: u64 = 64 << 20;
