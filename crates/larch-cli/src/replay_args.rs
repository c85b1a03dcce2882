//! The arguments of `larch replay` (`cmd_replay.rs` runs it).

use crate::size::parse_size;
use clap::Args;
use larch_bench::{GcWhenBusy, Rung};
use larch_store::SyncPolicy;
use std::path::PathBuf;

/// Arguments of `larch replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace to replay (larch or Irmin `IrmRepBT` format). Without it, the default Tezos-like
    /// trace is generated into a temporary directory first.
    pub(crate) trace: Option<PathBuf>,
    /// Store directory to create and replay into (it must not hold commits yet, unless
    /// `--onto-store`). Without it, a temporary store is used and deleted at the end.
    #[arg(long, conflicts_with = "in_memory")]
    pub(crate) store: Option<PathBuf>,
    /// Replay into the in-memory repository instead of a store on disk.
    #[arg(long)]
    pub(crate) in_memory: bool,
    /// With a trace: stop after N blocks. Without: generate N regular blocks (default 3000).
    #[arg(long, value_name = "N")]
    pub(crate) blocks: Option<u64>,
    /// Seed of the generated trace (without a trace only).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Without a trace: the rung of the scale ladder to generate, `1x` (the default context),
    /// `10x` or `mainnet` (docs/workload.md). The rungs above 1x are streamed (`--generate`).
    #[arg(long, conflicts_with = "trace")]
    pub(crate) scale: Option<Rung>,
    /// Without a trace: stream the generator's operations into the store as they are drawn,
    /// with no trace file, the generator going on from the store's (lazily loaded) trees; the
    /// setup and the regular blocks are measured apart (`--stats` gets the regular blocks).
    #[arg(long, conflicts_with = "trace")]
    pub(crate) generate: bool,
    /// With a generated trace: commit the setup in parts of about N operations (0: in one
    /// block; default: the rung's, 0 at 1x and 262,144 above).
    #[arg(long, value_name = "N", conflicts_with = "trace")]
    pub(crate) setup_part_ops: Option<u64>,
    /// With a generated trace in setup parts: commit a part also once it holds N items (accounts,
    /// contracts, big map entries: each a directory; 0: no bound; default: the rung's, 81,920
    /// above 1x). What a part holds in memory until its commit grows with them.
    #[arg(long, value_name = "N", conflicts_with = "trace")]
    pub(crate) setup_part_items: Option<u64>,
    /// With a streamed trace (`--generate`, the rungs above 1x): also write the regular blocks'
    /// operations to FILE, a larch trace. `larch replay FILE --store DIR --onto-store` replays
    /// them onto the store of the same streamed replay made with `--blocks 0` (the setup alone),
    /// and can read them ahead (`--read-ahead-ops`), which a streamed replay cannot.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    pub(crate) record_regular: Option<PathBuf>,
    /// With a trace and `--store`: replay onto a store that already holds commits, the trace going
    /// on from them. A checkout or parent of a commit the trace has not made is the store's
    /// commit of that hash (checked out once to prove the store holds it): a `--record-regular`
    /// trace onto its setup's store.
    #[arg(long, requires = "trace", requires = "store")]
    pub(crate) onto_store: bool,
    /// Byte budget of the store's cache of decoded objects (e.g. `256M`). Default: 152M, or 96M
    /// with the pipeline (its commit thread's heap and the trees carried in memory take the
    /// rest of the memory budget). Sizes: `256M` and `256MiB` are binary
    /// (K = 1024), `256MB` is decimal (K = 1000).
    #[arg(long, value_parser = parse_size)]
    pub(crate) cache_size: Option<u64>,
    /// With a streamed trace (`--generate`, the rungs above 1x) into a store: the cache's budget
    /// during the setup, at most `--cache-size` (default 32M). A setup part reads little of
    /// what the cache holds (it adds fresh keys); the regular blocks get the whole `--cache-size`.
    #[arg(long, value_parser = parse_size, conflicts_with = "trace")]
    pub(crate) setup_cache_size: Option<u64>,
    /// When commits are made durable and visible to readers: `commit` (two fsyncs per commit), `pipelined` (the same syncs on a publisher thread while the next block runs: a commit is durable when the next one returns), `every N`, or `never` (only at the end).
    #[arg(long, default_value = "commit")]
    pub(crate) sync: SyncPolicy,
    /// Commit on the calling thread only. By default a store replay pipelines its commits: each
    /// block's tree is hashed on the replay's thread, then encoded, written, synced and published
    /// by a commit thread while the next blocks run (from the committed tree, in memory); a
    /// commit is written and durable (under `--sync commit`) once `--pipeline-depth` commits
    /// (itself included) have returned after it, and the replay ends once the last one is
    /// (docs/store.md, *Pipelined commits*).
    #[arg(long)]
    pub(crate) no_pipeline: bool,
    /// With the pipeline: the most commits in flight on the commit thread (1 to 16). Deeper lets
    /// the replay run ahead of a commit thread that is slower for a few blocks, each commit in
    /// flight holding its tree in memory; 1 waits for each commit before handing over the next.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub(crate) pipeline_depth: u8,
    /// The pack rolls to a new chunk file once its head chunk holds this many bytes (e.g. `16M`,
    /// that is 16 MiB; `16MB` is 16,000,000 bytes).
    #[arg(long, value_parser = parse_size, default_value = "16M")]
    pub(crate) chunk_size: u64,
    /// The most sealed chunk files the store keeps open at once (docs/store.md *Descriptors*);
    /// others are opened again when a read needs them.
    #[arg(long, value_name = "N", default_value_t = larch_store::DEFAULT_OPEN_FILES, value_parser = crate::cmd_serve::parse_open_files)]
    pub(crate) open_files: usize,
    /// Read the pack through memory maps instead of positioned reads (docs/store.md, *Reads and
    /// the cache*).
    #[arg(long)]
    pub(crate) mmap: bool,
    /// With `--mmap`: the bytes of mapped pages that reads may keep resident in the process
    /// (charged by the 2 MiB block); past it, the least recently read maps release their pages.
    #[arg(long, value_parser = parse_size, default_value = "64M", requires = "mmap")]
    pub(crate) mmap_budget: u64,
    /// Verify the full hash of every object read back from the store (a BLAKE2b per record
    /// read): tampering with the pack is then reported on read, not only by fsck.
    #[arg(long)]
    pub(crate) verify_reads: bool,
    /// Write per-block statistics to this file (JSON lines, docs/stats-format.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) stats: Option<PathBuf>,
    /// Write a report into this directory: the summary (text and JSON), the stat file if `--stats`
    /// is not given, and SVG charts.
    #[arg(long, value_name = "DIR")]
    pub(crate) report: Option<PathBuf>,
    /// Do not compare read results and commit hashes with the trace.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Check the store's integrity after the replay (`larch fsck`).
    #[arg(long)]
    pub(crate) fsck: bool,
    /// Collect garbage every N blocks during the replay (irmin-bench's `--gc-every`), keeping the
    /// last `--gc-keep` blocks; the GC runs on its own thread beside the replay.
    #[arg(long, value_name = "N", requires = "gc_keep", conflicts_with = "in_memory", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) gc_every: Option<u64>,
    /// With `--gc-every`: each GC keeps the commit of the block M behind the newest one and every
    /// later commit (irmin-bench's `--gc-distance-in-the-past`).
    #[arg(long, value_name = "M", requires = "gc_every", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) gc_keep: Option<u64>,
    /// With `--gc-every`: what a due GC does while the previous one still runs. `defer` (the
    /// default) starts it on the same commit once the previous has finished (the replay never
    /// waits, the store grows meanwhile); `wait` waits for the previous one, then starts it (the
    /// block pays the wait; the store stops growing once GCs begin); `skip` does not start it
    /// (irmin-bench's behaviour).
    #[arg(long, value_name = "POLICY", requires = "gc_every", default_value = "defer")]
    pub(crate) gc_when_busy: WhenBusyArg,
    /// Walk the paths of the next N operations on other threads, ahead of the replay, so that the
    /// nodes they reach are in the cache when it applies them and several disk reads are in
    /// flight at once (a context larger than the memory; docs/store.md, *Reading a trace
    /// ahead*). Trace files (or the default 1x trace) only, not a streamed trace (`--generate`,
    /// `--scale 10x|mainnet`: see `--record-regular`), and not `--in-memory`. 1,024 to 16,384
    /// ran alike (docs/benchmarks.md). Default: off.
    #[arg(long, value_name = "N", conflicts_with_all = ["generate", "in_memory"], value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) read_ahead_ops: Option<u64>,
    /// With `--read-ahead-ops`: the threads walking the paths (each has at most one disk read in
    /// flight). On the mainnet rung in a 2 GiB memory group 16 ran 1.26× as fast as 8 (median of
    /// 4 pairs, 0.96–1.62×); 32, with 8,192 operations ahead, no faster than 8 and with more
    /// memory (docs/benchmarks.md).
    #[arg(long, value_name = "K", requires = "read_ahead_ops", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(crate) read_ahead_threads: u64,
    /// Archive mode, with the global `--lower DIR|s3://BUCKET/PREFIX`: every N commits, move the
    /// sealed chunks below the commit `--archive-keep` blocks behind the newest to the lower
    /// layer (as `larch archive` does); the summary reports the moves and, with object storage,
    /// the uploads (the replay waits for them at its end, at most `--upload-wait`).
    #[arg(long, value_name = "N", requires = "archive_keep", conflicts_with = "in_memory", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) archive_every: Option<u64>,
    /// With `--archive-every`: keep in the store directory the chunks of the last M blocks.
    #[arg(long, value_name = "M", requires = "archive_every")]
    pub(crate) archive_keep: Option<u64>,
}

/// `--gc-when-busy`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum WhenBusyArg {
    /// Start it once the running GC has finished.
    Defer,
    /// Wait for the running GC, then start it.
    Wait,
    /// Do not start it.
    Skip,
}

impl From<WhenBusyArg> for GcWhenBusy {
    fn from(arg: WhenBusyArg) -> GcWhenBusy {
        match arg {
            WhenBusyArg::Defer => GcWhenBusy::Defer,
            WhenBusyArg::Wait => GcWhenBusy::Wait,
            WhenBusyArg::Skip => GcWhenBusy::Skip,
        }
    }
}
