//! `larch replay`: the main job. Replays a trace (or, with none, a freshly generated Tezos-like
//! trace) into a fresh store (or, `--onto-store`, a store holding the commits it goes on from),
//! checks every recorded read and commit hash (a streamed replay's are read and hashed on its own
//! tree), records per-block statistics, and prints the summary.

use crate::output::{emit, emit_line};
use crate::progress::blocks_bar;
use crate::replay_archive::{Archive, ArchiveSchedule, ArchiveSummary, Archiving};
use crate::replay_args::ReplayArgs;
use crate::replay_record::RegularRecording;
use anyhow::{Context, bail};
use larch_bench::stats::plot_stat_files;
use larch_bench::{
    BlockKind, GcSchedule, GenParams, GenReport, Generator, ReadAhead, ReplayOptions, RunMeta, RunSummary,
    Rung,
};
use larch_core::{BackendStats, CommitInfo, ContextRepo, GcSummary, Hash, MemoryRepo, Tree};
use larch_store::{CacheBudget, PipelinedRepo, Repo, RepoOptions};
use larch_trace::format::BoxedSource;
use larch_trace::open_trace;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The default cache budget of a pipelined replay: the commit thread's heap (its own pages for
/// the records it decodes and primes) and the trees carried from block to block in memory add
/// to the resident set. 96 MiB (was 128): budgets from 64 to 384 MiB ran the default trace at the
/// same rate within the machine's noise (misses 1.68M at 64 MiB, 1.29M at 128, 0.90M at 384, but
/// a larger heap costs as much as the misses it saves), and 96 MiB holds the peak RSS near 250
/// MiB with the allocator's longer purge delay (docs/benchmarks.md at c117370, "Issue 11, ninth round").
const PIPELINE_CACHE_BYTES: u64 = 96 << 20;

/// The cache's budget during a streamed setup (`--setup-cache-size`): on the mainnet rung's
/// first 100 parts the cache held 63 MiB of the 96 by part 100 for a setup that only adds, and a
/// budget of 32 MiB lowered the peak RSS by as much, at the same CPU time on the 10x rung
/// (docs/benchmarks.md, *Mainnet rung: setup memory*).
const SETUP_CACHE_BYTES: u64 = 32 << 20;

/// Where the replay goes.
enum Target {
    Memory,
    Store { path: PathBuf, created: bool, _temp: Option<tempfile::TempDir> },
}

/// Runs `larch replay`.
pub fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    // The generated trace lives in a temporary directory that must outlive the replay.
    let mut _trace_dir = None;
    let rung = args.scale.unwrap_or(Rung::X1);
    let open = |path: &Path| -> anyhow::Result<Job> {
        // Read and decoded on a thread of its own: the replay thread only applies operations.
        Ok(Job::Trace(Box::new(larch_trace::format::prefetch(open_trace(path)?)?)))
    };
    let streamed = args.trace.is_none() && (args.generate || rung != Rung::X1);
    if args.read_ahead_ops.is_some() && streamed {
        bail!(
            "--read-ahead-ops needs a trace file: a streamed replay's generator draws each operation after the last one's reads"
        );
    }
    if args.record_regular.is_some() && args.blocks == Some(0) {
        bail!("--record-regular with --blocks 0: no regular block to record");
    }
    if args.record_regular.is_some() && !streamed {
        bail!(
            "--record-regular records a streamed replay (--generate, or --scale 10x|mainnet); this replay reads a trace"
        );
    }
    if let (true, Some(path)) = (args.onto_store, &args.store)
        && !path.is_dir()
    {
        bail!("--onto-store: {} is not a store directory", path.display());
    }
    if args.setup_cache_size.is_some() && !streamed {
        bail!(
            "--setup-cache-size applies to a streamed setup (--generate, or --scale 10x|mainnet); this replay reads a trace"
        );
    }
    let (job, trace_name, blocks_limit, expected_blocks) = match &args.trace {
        Some(path) => (open(path)?, path.display().to_string(), args.blocks, args.blocks),
        None if args.generate || rung != Rung::X1 => {
            let mut params = rung.params(args.seed, args.blocks.unwrap_or(3000));
            params.setup_part_ops = args.setup_part_ops.unwrap_or(params.setup_part_ops);
            params.setup_part_items = args.setup_part_items.unwrap_or(params.setup_part_items);
            params.validate()?;
            eprintln!(
                "streaming the {rung} Tezos-like trace (seed {}, setup in about {} block(s), then {} regular blocks) into the store",
                params.seed,
                params.setup_parts_estimate(),
                params.blocks
            );
            let expected = params.blocks + 1 + params.setup_parts_estimate();
            let name = format!("{} {rung}, seed {}", larch_bench::stats::STREAMED_TRACE, params.seed);
            (
                Job::Generate { params, setup_cache: None, record: args.record_regular.clone() },
                name,
                None,
                Some(expected),
            )
        }
        None => {
            let dir = tempfile::Builder::new().prefix("larch-trace-").tempdir().context("temporary dir")?;
            let path = dir.path().join("tezos-like.trace");
            let params =
                GenParams { blocks: args.blocks.unwrap_or(3000), seed: args.seed, ..GenParams::default() };
            eprintln!(
                "generating the Tezos-like trace ({} regular blocks, seed {}) into {}",
                params.blocks,
                params.seed,
                path.display()
            );
            crate::interrupt::remove_on_interrupt(dir.path());
            let blocks = generate_in_child(&params, &path)?;
            let job = open(&path)?;
            _trace_dir = Some(dir);
            (job, path.display().to_string(), None, Some(blocks))
        }
    };
    let target = prepare_target(&args)?;
    if let Target::Store { path, created: true, .. } = &target {
        crate::interrupt::remove_on_interrupt(path);
    }
    let meta = RunMeta {
        trace: trace_name,
        store: match &target {
            Target::Memory => "memory".to_string(),
            Target::Store { path, .. } => format!(
                "pack:{} (sync {}{})",
                path.display(),
                args.sync,
                if args.no_pipeline {
                    String::new()
                } else {
                    format!(", pipeline depth {}", args.pipeline_depth)
                }
            ),
        },
    };
    let gc = args.gc_every.zip(args.gc_keep).map(|(every, keep)| GcSchedule {
        every,
        keep,
        when_busy: args.gc_when_busy.into(),
    });
    let read_ahead = args.read_ahead_ops.map(|ops| ReadAhead {
        ops: usize::try_from(ops).unwrap_or(usize::MAX),
        threads: usize::try_from(args.read_ahead_threads).unwrap_or(1),
    });
    let options = ReplayOptions {
        check_hashes: !args.no_check,
        max_blocks: blocks_limit,
        gc,
        read_ahead,
        store_commits: args.onto_store,
    };
    let stats_path = args.stats.clone().or_else(|| args.report.as_ref().map(|dir| dir.join("stats.jsonl")));
    if let Some(dir) = &args.report {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Archive mode: the lower layer (opened once the store directory exists).
    let archive = match (args.archive_every.zip(args.archive_keep), &target) {
        (Some((every, keep)), Target::Store { path, .. }) => {
            if crate::inspect::lower_raw().is_none() {
                bail!("--archive-every needs --lower DIR or --lower s3://BUCKET/PREFIX: the lower layer");
            }
            std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
            Some((ArchiveSchedule { every, keep }, crate::lower::open(path, true)?))
        }
        _ => None,
    };
    let mut archived: Option<ArchiveSummary> = None;
    let outcome = match &target {
        Target::Memory => {
            let mut repo = MemoryRepo::new();
            run_replay(&mut repo, job, &options, &meta, stats_path.as_deref(), expected_blocks)
                .map(|replayed| (replayed, None))
        }
        Target::Store { path, .. } => {
            let store_options = RepoOptions {
                sync: args.sync,
                cache_bytes: args.cache_size.unwrap_or(if args.no_pipeline {
                    larch_store::DEFAULT_CACHE_BYTES
                } else {
                    PIPELINE_CACHE_BYTES
                }),
                // Onto a store: one that exists (an empty directory stays empty).
                create: !args.onto_store,
                mmap: args.mmap,
                mmap_budget: args.mmap_budget,
                verify_on_load: args.verify_reads,
                chunk_bytes: args.chunk_size,
                open_files: args.open_files,
                ..RepoOptions::default()
            };
            let mut repo = match &archive {
                Some((_, lower)) => lower.open_writer(path, store_options),
                None => Repo::open_with(path, store_options),
            }
            .with_context(|| format!("opening store {}", path.display()))?;
            match (repo.commit_count() > 0, args.onto_store) {
                (true, false) => bail!(
                    "store {} already holds commits: replay needs a fresh store (or --onto-store, to go on from them)",
                    path.display()
                ),
                (false, true) => {
                    bail!("--onto-store: store {} holds no commits to go on from", path.display())
                }
                _ => {}
            }
            let job = match job {
                Job::Generate { params, record, .. } => {
                    let bytes = args.setup_cache_size.unwrap_or(SETUP_CACHE_BYTES);
                    Job::Generate { params, setup_cache: Some((repo.cache_budget(), bytes)), record }
                }
                job => job,
            };
            let (outcome, repo) = if !args.no_pipeline {
                let mut pipelined = PipelinedRepo::with_depth(repo, usize::from(args.pipeline_depth))
                    .with_context(|| format!("starting the commit thread of {}", path.display()))?;
                let outcome = replay_archiving(
                    &mut pipelined,
                    archive.as_ref(),
                    &mut archived,
                    job,
                    &options,
                    &meta,
                    stats_path.as_deref(),
                    expected_blocks,
                );
                // The replay's own error (e.g. the commit thread's, returned by the next call) comes
                // first; the commit thread's last word only if the replay had none.
                match pipelined.into_inner() {
                    Ok(repo) => (outcome, Some(repo)),
                    Err(e) => {
                        let finishing = || format!("finishing the commits into {}", path.display());
                        (outcome.and_then(|_| Err(anyhow::Error::new(e).context(finishing()))), None)
                    }
                }
            } else {
                let outcome = replay_archiving(
                    &mut repo,
                    archive.as_ref(),
                    &mut archived,
                    job,
                    &options,
                    &meta,
                    stats_path.as_deref(),
                    expected_blocks,
                );
                (outcome, Some(repo))
            };
            match repo {
                Some(repo) => {
                    let outcome = outcome.map(|replayed| (replayed, repo.head()));
                    let closed = repo.close().with_context(|| format!("closing store {}", path.display()));
                    outcome.and_then(|summary| closed.map(|()| summary))
                }
                None => outcome.map(|replayed| (replayed, None)),
            }
        }
    };
    if let (Some(summary), Some((_, lower))) = (archived.as_mut(), &archive) {
        summary.uploads = lower.finish_uploads().map(Into::into);
    }
    let (Replayed { summary, setup, last: last_commit }, store_head) = match outcome {
        Ok(outcome) => {
            if let Target::Store { path, _temp: None, .. } = &target {
                crate::interrupt::keep(path);
            }
            outcome
        }
        Err(err) => {
            if let Target::Store { path, created: true, _temp: None } = &target {
                // A store left behind by a failed replay would look like a complete one.
                if std::fs::remove_dir_all(path).is_ok() {
                    eprintln!("larch: removed the partial store {}", path.display());
                }
            }
            return Err(err);
        }
    };
    let show = |hash: Option<Hash>| hash.map_or_else(|| "none".to_owned(), |hash| hash.to_string());
    if args.json {
        let mut value = serde_json::to_value(&summary)?;
        if let Some(object) = value.as_object_mut() {
            if let Some((setup, report)) = &setup {
                object.insert("setup".into(), serde_json::to_value(setup)?);
                object.insert("setup_blocks".into(), report.setup_blocks.into());
                object.insert("setup_values".into(), report.setup_values.into());
                object.insert("setup_dirs".into(), report.setup_dirs.into());
            }
            object.insert("last_commit".into(), last_commit.map(|hash| hash.to_string()).into());
            object.insert("store_head".into(), store_head.map(|hash| hash.to_string()).into());
            if let Some(archived) = &archived {
                object.insert("archive".into(), archived.to_json());
            }
        }
        emit_line(serde_json::to_string_pretty(&value)?)?;
    } else {
        if let Some((setup, report)) = &setup {
            emit_line(setup_line(setup, report))?;
            emit_line("The regular blocks, measured from the end of the setup:")?;
        }
        emit(&summary)?;
        match &target {
            Target::Store { path, _temp: None, .. } => emit_line(format_args!(
                "Last commit {} (head of the store {}: {})",
                show(last_commit),
                path.display(),
                show(store_head)
            ))?,
            _ => emit_line(format_args!("Last commit {}", show(last_commit)))?,
        }
        if let Some(archived) = &archived {
            emit_line(archived)?;
        }
    }
    if let Some(dir) = &args.report {
        write_report(dir, &summary, stats_path.as_deref())?;
    }
    if args.fsck
        && let Target::Store { path, .. } = &target
    {
        // The check opens the store with the replay's descriptor and read-mode settings.
        let options = RepoOptions {
            create: false,
            open_files: args.open_files,
            mmap: args.mmap,
            mmap_budget: args.mmap_budget,
            ..RepoOptions::default()
        };
        let report = match &archive {
            Some((_, lower)) => lower.open_read_only(path, options),
            None => larch_store::Repo::open_read_only_options(path, options),
        }
        .with_context(|| format!("opening {}", path.display()))?
        .fsck();
        emit_line("")?;
        emit(&report)?;
        if !report.is_clean() {
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Replays `job` into `repo` ([`run_replay`]), through the archive schedule when there is one
/// (its summary into `archived`).
#[allow(clippy::too_many_arguments)]
fn replay_archiving<R: Archive>(
    repo: &mut R,
    archive: Option<&(ArchiveSchedule, crate::lower::Lower)>,
    archived: &mut Option<ArchiveSummary>,
    job: Job,
    options: &ReplayOptions,
    meta: &RunMeta,
    stats_path: Option<&Path>,
    expected_blocks: Option<u64>,
) -> anyhow::Result<Replayed> {
    let Some((schedule, lower)) = archive else {
        return run_replay(repo, job, options, meta, stats_path, expected_blocks);
    };
    let name = crate::inspect::lower_raw().map(|lower| lower.display().to_string()).unwrap_or_default();
    let mut archiving =
        Archiving::new(repo, *schedule, name, Box::new(|| lower.upload_stats().map(|u| u.backlog)));
    let outcome = run_replay(&mut archiving, job, options, meta, stats_path, expected_blocks);
    *archived = Some(archiving.summary);
    outcome
}

/// Generates the trace of `params` into `path` by running `larch trace gen` in a child process, so
/// that the generator's memory is not counted in the replay's RSS; its report goes to stderr.
/// Returns the number of blocks (commits) of the trace.
fn generate_in_child(params: &GenParams, path: &Path) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("locating the larch executable")?;
    let status = std::process::Command::new(exe)
        .args(["trace", "gen", "--format", "larch", "--out"])
        .arg(path)
        .args(["--blocks", &params.blocks.to_string(), "--seed", &params.seed.to_string()])
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .context("running `larch trace gen`")?;
    if !status.success() {
        bail!("`larch trace gen` failed ({status})");
    }
    // Genesis and the setup block come before the regular blocks.
    Ok(params.blocks + 2)
}

/// Decides where to replay, creating the store directory if needed.
fn prepare_target(args: &ReplayArgs) -> anyhow::Result<Target> {
    if args.in_memory {
        return Ok(Target::Memory);
    }
    match &args.store {
        Some(path) => {
            let created = !path.exists()
                || std::fs::read_dir(path).map(|mut entries| entries.next().is_none()).unwrap_or(false);
            Ok(Target::Store { path: path.clone(), created, _temp: None })
        }
        None => {
            let dir = tempfile::Builder::new().prefix("larch-store-").tempdir().context("temporary dir")?;
            Ok(Target::Store { path: dir.path().to_path_buf(), created: true, _temp: Some(dir) })
        }
    }
}

/// A [`ContextRepo`] that remembers the last commit it made, and gives the memory freed by the
/// process back to the OS while a GC runs ([`RELEASE_DURING_GC`]).
struct LastCommit<'a, R> {
    inner: &'a mut R,
    last: Option<Hash>,
    /// When to give freed memory back during a GC.
    release: ReleaseClock,
}

/// While a GC runs, the memory the process freed is given back to the OS at a commit at most this
/// often. The allocator keeps freed pages for a minute (`allocator.rs`: on the mainnet rung,
/// ~90 MiB of them), and a GC adds its own memory and churn to those: on the mainnet rung with a
/// GC running, the peak RSS went from 354 MiB to 404–407 MiB (VmHWM; 372 MiB with the allocator
/// giving freed pages back after 1 s, which without a GC ran 0.86–0.95× the speed).
const RELEASE_DURING_GC: std::time::Duration = std::time::Duration::from_secs(2);

/// When a replay gives the memory it freed back to the OS during a GC ([`RELEASE_DURING_GC`]).
#[derive(Debug, Default)]
struct ReleaseClock {
    /// When it last did.
    last: Option<std::time::Instant>,
}

impl ReleaseClock {
    /// Whether to give freed memory back now, after a commit (and if so, counts it as done).
    fn due(&mut self, gc_running: bool, now: std::time::Instant) -> bool {
        let due = gc_running && self.last.is_none_or(|at| now.duration_since(at) >= RELEASE_DURING_GC);
        if due {
            self.last = Some(now);
        }
        due
    }
}

impl<R: ContextRepo> LastCommit<'_, R> {
    /// After a commit: records it, and gives freed memory back if a GC runs and it is time.
    fn committed(&mut self, hash: Hash) {
        self.last = Some(hash);
        if self.release.due(self.inner.gc_running(), std::time::Instant::now()) {
            crate::allocator::release_free_memory();
        }
    }
}

impl<R: ContextRepo> ContextRepo for LastCommit<'_, R> {
    type Error = R::Error;

    fn empty_tree(&self) -> Tree {
        self.inner.empty_tree()
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree, R::Error> {
        self.inner.checkout(commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, R::Error> {
        let hash = self.inner.commit(tree, parents, info)?;
        self.committed(hash);
        Ok(hash)
    }

    fn commit_expected(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: &Hash,
    ) -> Result<Hash, R::Error> {
        let hash = self.inner.commit_expected(tree, parents, info, expected)?;
        self.committed(hash);
        Ok(hash)
    }

    fn wait_durable(&mut self) -> Result<(), R::Error> {
        self.inner.wait_durable()
    }

    fn unexpected_commit(error: &R::Error) -> Option<(Hash, Hash)> {
        R::unexpected_commit(error)
    }

    fn stats(&self) -> BackendStats {
        self.inner.stats()
    }

    fn gc_start(&mut self, commit: &Hash) -> Result<bool, R::Error> {
        self.inner.gc_start(commit)
    }

    fn gc_running(&self) -> bool {
        self.inner.gc_running()
    }

    fn gc_finish(&mut self, wait: bool) -> Result<Option<GcSummary>, R::Error> {
        let summary = self.inner.gc_finish(wait)?;
        if summary.is_some() {
            // The GC's live set, freed by its thread, would otherwise stay resident for the
            // allocator's purge delay (a minute): on the 10x rung, +130 MiB of the replay's peak
            // RSS (docs/benchmarks.md, *GC at scale*).
            crate::allocator::release_free_memory();
        }
        Ok(summary)
    }
}

/// What to replay.
enum Job {
    /// A trace file, read on a thread of its own.
    Trace(BoxedSource),
    /// A trace generated and streamed into the store as it is drawn.
    Generate {
        /// The generator's parameters.
        params: GenParams,
        /// The store's cache and its limit during the setup (`--setup-cache-size`), if any.
        setup_cache: Option<(CacheBudget, u64)>,
        /// Where to record the regular blocks' operations (`--record-regular`), if anywhere.
        record: Option<PathBuf>,
    },
}

/// What a replay produced.
struct Replayed {
    /// The summary (of the regular blocks, for a streamed trace).
    summary: RunSummary,
    /// For a streamed trace: the setup's summary and the generator's report.
    setup: Option<(RunSummary, GenReport)>,
    /// The last commit made.
    last: Option<Hash>,
}

/// One line on a streamed setup: its size, time, memory and store.
fn setup_line(setup: &RunSummary, report: &GenReport) -> String {
    let mib = |bytes: Option<u64>| {
        bytes.map_or_else(|| "?".to_string(), |b| format!("{:.0} MiB", b as f64 / 1048576.0))
    };
    format!(
        "Setup: genesis and {} setup block(s), {} context ops; {} values and {} directories after it; \
         {:.1} s wall, {} CPU; peak RSS {}; store {}",
        report.setup_blocks,
        setup.context_ops,
        report.setup_values,
        report.setup_dirs,
        setup.wall_s,
        setup.cpu_s.map_or_else(|| "?".to_string(), |cpu| format!("{cpu:.1} s")),
        mib(setup.max_rss_bytes),
        mib(setup.store_size_bytes),
    )
}

/// Replays `job` into `repo`, with a progress bar and an optional stat file.
fn run_replay<R: ContextRepo>(
    repo: &mut R,
    job: Job,
    options: &ReplayOptions,
    meta: &RunMeta,
    stats_path: Option<&Path>,
    expected_blocks: Option<u64>,
) -> anyhow::Result<Replayed> {
    let mut stats_file = match stats_path {
        Some(path) => {
            Some(BufWriter::new(File::create(path).with_context(|| format!("creating {}", path.display()))?))
        }
        None => None,
    };
    let bar = blocks_bar("replay", expected_blocks);
    let mut repo = LastCommit { inner: repo, last: None, release: ReleaseClock::default() };
    match job {
        Job::Trace(mut source) => {
            let summary = larch_bench::replay(
                &mut repo,
                &mut source,
                options,
                meta,
                stats_file.as_mut().map(|file| file as &mut dyn Write),
                &mut |_| bar.inc(1),
            );
            bar.finish_and_clear();
            let summary = summary.with_context(|| format!("replaying {}", meta.trace))?;
            if let Some(offset) = source.truncated_tail() {
                eprintln!(
                    "note: the trace ends inside a frame at offset {offset}; that frame was ignored, as Irmin does"
                );
            }
            Ok(Replayed { summary, setup: None, last: repo.last })
        }
        Job::Generate { params, setup_cache, record } => {
            let mut record =
                record.as_deref().map(|path| RegularRecording::create(path, &params)).transpose()?;
            let generator = Generator::new(params)?;
            if let Some((budget, bytes)) = &setup_cache {
                budget.limit(Some(*bytes));
            }
            // Without a terminal (a log), a line now and then instead of the bar.
            let plain = !std::io::stderr().is_terminal();
            let started = std::time::Instant::now();
            let mut progress = |kind: BlockKind, block: &larch_bench::stats::BlockStats| {
                bar.inc(1);
                if kind == BlockKind::SetupEnd {
                    // The regular blocks get the whole cache.
                    if let Some((budget, _)) = &setup_cache {
                        budget.limit(None);
                    }
                    // Before the regular blocks' measurements start (their peak RSS included).
                    crate::allocator::release_free_memory();
                }
                let due = match kind {
                    BlockKind::Genesis => false,
                    BlockKind::SetupPart => block.block.is_multiple_of(10),
                    BlockKind::SetupEnd => true,
                    BlockKind::Regular => block.block.is_multiple_of(100),
                };
                if plain && due {
                    eprintln!(
                        "{:>8.1} s  block {} ({kind:?}), RSS {} MiB (cache {} MiB)",
                        started.elapsed().as_secs_f64(),
                        block.block,
                        block.rss_bytes.unwrap_or(0) >> 20,
                        block.backend.cache_bytes.unwrap_or(0) >> 20
                    );
                }
            };
            let run = larch_bench::replay_generated(
                &mut repo,
                generator,
                options,
                meta,
                stats_file.as_mut().map(|file| file as &mut dyn Write),
                record.as_mut().map(RegularRecording::sink),
                &mut progress,
            );
            bar.finish_and_clear();
            let run = match (run, record) {
                (Ok(run), Some(record)) => {
                    let path = record.path().display().to_string();
                    record.complete()?;
                    eprintln!("recorded the regular blocks into {path}");
                    run
                }
                (Ok(run), None) => run,
                (Err(err), record) => {
                    let context = match &record {
                        Some(record) => {
                            format!("replaying {} (recording into {})", meta.trace, record.path().display())
                        }
                        None => format!("replaying {}", meta.trace),
                    };
                    if let Some(record) = record {
                        record.abandon();
                    }
                    return Err(anyhow::Error::new(err).context(context));
                }
            };
            Ok(Replayed { summary: run.regular, setup: Some((run.setup, run.report)), last: repo.last })
        }
    }
}

/// Writes `summary.txt`, `summary.json` and the charts into `dir`.
fn write_report(dir: &Path, summary: &RunSummary, stats_path: Option<&Path>) -> anyhow::Result<()> {
    let text = dir.join("summary.txt");
    std::fs::write(&text, summary.to_string()).with_context(|| format!("writing {}", text.display()))?;
    let json = dir.join("summary.json");
    std::fs::write(&json, serde_json::to_string_pretty(summary)?)
        .with_context(|| format!("writing {}", json.display()))?;
    if let Some(stats) = stats_path {
        let charts = plot_stat_files(&[(None, stats.to_path_buf())], dir).context("plotting the run")?;
        eprintln!("report: {} and {} charts in {}", text.display(), charts.len(), dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{RELEASE_DURING_GC, ReleaseClock};
    use std::time::{Duration, Instant};

    #[test]
    fn freed_memory_is_given_back_during_a_gc_only_and_at_most_every_interval() {
        let start = Instant::now();
        let mut clock = ReleaseClock::default();
        // No GC: never, however long.
        assert!(!clock.due(false, start));
        assert!(!clock.due(false, start + 10 * RELEASE_DURING_GC));
        // A GC: at its first commit, then not before the interval has passed.
        let gc = start + 10 * RELEASE_DURING_GC;
        assert!(clock.due(true, gc));
        assert!(!clock.due(true, gc + Duration::from_millis(1)));
        assert!(!clock.due(true, gc + RELEASE_DURING_GC - Duration::from_millis(1)));
        assert!(clock.due(true, gc + RELEASE_DURING_GC));
        // The GC over: never again, until the next one.
        assert!(!clock.due(false, gc + 5 * RELEASE_DURING_GC));
        assert!(clock.due(true, gc + 6 * RELEASE_DURING_GC));
    }
}
