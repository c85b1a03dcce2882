//! Flat-key benchmark: larch (Tezos context hashes, `larch-store`) against NOMT, side by side.
//!
//! `n` seeded random 32-byte keys with 32-byte values are inserted `--batch` keys per commit, each
//! commit durable, then `--reads` random keys (half present, half absent) are read from the last
//! commit and checked. Each engine runs in its own child process (so peak RSS and CPU time are its
//! own), alternating over `--rounds`; the parent prints the figures and the larch/NOMT ratios.
//! See README.md.

mod larch_run;
mod measure;
mod nomt_run;
mod report;
mod workload;

use anyhow::{Context, Result, bail};
use clap::Parser;
use larch_run::{LarchConfig, Shape, TreeMode};
use larch_store::SyncPolicy;
use measure::RunResult;
use nomt_run::NomtConfig;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use workload::Workload;

// The allocator of larch's CLI (`larch replay`), for both engines.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (index 15 of `mi_option_e`; `libmimalloc-sys` names no
/// constant for it, and larch's CLI checks the index by its default value).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's purge delay to 60 s, as larch's CLI does (`crates/larch-cli/src/
/// allocator.rs`: freed pages given back after mimalloc's default 1 s were faulted in again,
/// zeroed, by the next commits; here 6.7% of the inserting thread), unless the environment sets
/// `MIMALLOC_PURGE_DELAY`; and turns transparent huge pages off for the process, as larch's CLI
/// does too (on the shared VMs a huge page handed back to the host is slow to fault in again: the
/// first run of a sequence took 30% more CPU time with them, docs/benchmarks.md at c117370,
/// "Issue 11, seventeenth round"), unless the environment sets `MIMALLOC_ALLOW_THP`. Both engines
/// run with both settings.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` stores an integer into mimalloc's option table (any thread, any
        // time); the index is a member of `mi_option_e`.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 60_000) }
    }
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: `PR_SET_THP_DISABLE` sets a flag of the calling process (kept by the children
        // it starts); with these arguments prctl reads and writes no memory of ours.
        let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
}

/// The prefix of the line a child prints its result on.
const RESULT_PREFIX: &str = "FLATKEYS-RESULT ";

/// Command-line arguments.
#[derive(Parser, Debug, Clone)]
#[command(about = "Flat-key benchmark: larch against NOMT, durable commits of 32-byte keys")]
struct Args {
    /// Keys inserted.
    #[arg(long, default_value_t = 1_000_000)]
    keys: usize,
    /// Keys per durable commit.
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// Random reads from the last commit (half present, half absent keys).
    #[arg(long, default_value_t = 100_000)]
    reads: usize,
    /// Rounds; each round runs every variant once, in reverse order every other round.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Directory under which each run creates (and removes) its store; default: a temporary one.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the keys, values and probes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Engines to run: `larch`, `nomt`.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["larch".to_string(), "nomt".to_string()])]
    engines: Vec<String>,
    /// larch: path shapes to measure (each a run per round).
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = vec![Shape::Fanout])]
    shapes: Vec<Shape>,
    /// larch: start each batch from a checkout of the previous commit, or keep the tree in memory.
    #[arg(long, value_enum, default_value_t = TreeMode::Checkout)]
    larch_tree: TreeMode,
    /// larch with `--larch-tree pipeline`: the most commits in flight on the commit thread (4
    /// measured the same as 1 here, where the inserting thread is the slower one).
    #[arg(long, default_value_t = 1)]
    larch_pipeline_depth: usize,
    /// larch: when commits sync (`commit`: every commit durable, as NOMT's; `never`: to measure
    /// the syncs' share only).
    #[arg(long, default_value_t = SyncPolicy::Commit)]
    larch_sync: SyncPolicy,
    /// larch: decoded-object cache, MiB.
    #[arg(long, default_value_t = larch_store::DEFAULT_CACHE_BYTES >> 20)]
    larch_cache_mib: u64,
    /// larch: read the pack through a memory map.
    #[arg(long)]
    larch_mmap: bool,
    /// NOMT: Merkle-update worker threads.
    #[arg(long, default_value_t = 1)]
    nomt_commit_concurrency: usize,
    /// NOMT: io_uring instances.
    #[arg(long, default_value_t = 3)]
    nomt_io_workers: usize,
    /// NOMT: hash-table buckets (4 KiB pages); default: 64,000 (NOMT's default) or one per 100 keys, the larger (1M keys occupy ~4,200).
    #[arg(long)]
    nomt_buckets: Option<u32>,
    /// NOMT: page cache and leaf cache, MiB each.
    #[arg(long, default_value_t = 256)]
    nomt_cache_mib: usize,
    /// NOMT: enable its background warm-up of the written keys' Merkle paths.
    #[arg(long)]
    nomt_warm_up: bool,
    /// NOMT: do not preallocate the hash-table file (its disk usage is then what it wrote).
    #[arg(long)]
    nomt_sparse: bool,
    /// Keep the stores after the runs.
    #[arg(long)]
    keep: bool,
    /// Also write every run's result as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Internal: run one engine variant in this process and print its result.
    #[arg(long, hide = true)]
    child: Option<String>,
    /// Internal: the round of a child run.
    #[arg(long, hide = true, default_value_t = 0)]
    round: u32,
}

impl Args {
    /// The engine variants of a round, in their first-round order.
    fn variants(&self) -> Result<Vec<String>> {
        let mut variants = Vec::new();
        for engine in &self.engines {
            match engine.as_str() {
                "larch" => variants.extend(self.shapes.iter().map(|s| format!("larch/{}", s.name()))),
                "nomt" => variants.push("nomt".to_string()),
                other => bail!("unknown engine {other:?}: expected larch or nomt"),
            }
        }
        Ok(variants)
    }

    fn nomt_config(&self) -> NomtConfig {
        let auto = (self.keys as u64 / 100).clamp(64_000, u64::from(u32::MAX)) as u32;
        NomtConfig {
            commit_concurrency: self.nomt_commit_concurrency,
            io_workers: self.nomt_io_workers,
            buckets: self.nomt_buckets.unwrap_or(auto),
            cache_mib: self.nomt_cache_mib,
            warm_up: self.nomt_warm_up,
            preallocate: !self.nomt_sparse,
        }
    }
}

fn run_child(args: &Args, variant: &str, base: &Path) -> Result<()> {
    let work = Workload::generate(args.seed, args.keys, args.reads);
    let dir = base.join(format!("{}-r{}", variant.replace('/', "-"), args.round));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let result = match variant.split_once('/') {
        Some(("larch", shape)) => {
            let shape = match shape {
                "fanout" => Shape::Fanout,
                "flat" => Shape::Flat,
                other => bail!("unknown shape {other}"),
            };
            let config = LarchConfig {
                shape,
                tree_mode: args.larch_tree,
                pipeline_depth: args.larch_pipeline_depth,
                sync: args.larch_sync,
                cache_bytes: args.larch_cache_mib << 20,
                mmap: args.larch_mmap,
            };
            larch_run::run(&work, args.batch, &dir, &config, args.round)
        }
        None if variant == "nomt" => nomt_run::run(&work, args.batch, &dir, &args.nomt_config(), args.round),
        _ => bail!("unknown variant {variant}"),
    };
    if !args.keep {
        std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    println!("{RESULT_PREFIX}{}", serde_json::to_string(&result?)?);
    Ok(())
}

/// Runs `variant` in a child process and returns its result.
fn spawn(args: &Args, variant: &str, round: u32, base: &Path) -> Result<RunResult> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command
        .args(std::env::args_os().skip(1))
        .arg("--child")
        .arg(variant)
        .arg("--round")
        .arg(round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if args.dir.is_none() {
        command.arg("--dir").arg(base);
    }
    let output = command.output().context("spawn child")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("{variant} round {round} failed ({})", output.status);
    }
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT_PREFIX))
        .with_context(|| format!("{variant} round {round}: no result line"))?;
    Ok(serde_json::from_str(line)?)
}

fn main() -> Result<()> {
    tune_allocator();
    let args = Args::parse();
    let temp;
    let base = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new().prefix("flatkeys-").tempdir()?;
            temp.path().to_path_buf()
        }
    };
    if let Some(variant) = &args.child {
        return run_child(&args, variant, &base);
    }
    let variants = args.variants()?;
    report::header(&args, &base, &variants, nomt_run::io_uring_status());
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for round in 0..args.rounds {
        let mut order = variants.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for variant in &order {
            match spawn(&args, variant, round, &base) {
                Ok(result) => {
                    report::run_line(&result);
                    results.push(result);
                }
                Err(error) => {
                    eprintln!("error: {error:#}");
                    failures.push(format!("{error:#}"));
                }
            }
        }
    }
    report::summary(&results, &variants);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)?;
    }
    if !failures.is_empty() {
        bail!("{} run(s) failed: {}", failures.len(), failures.join("; "));
    }
    Ok(())
}
