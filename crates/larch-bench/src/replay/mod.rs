//! The replayer: applies a trace's operations to a [`ContextRepo`] exactly as Irmin's
//! `trace_replay.ml` does, checks every read result and commit hash against the trace, and
//! measures every block.
//!
//! Semantics (spec §2.3–2.4): the context table starts with context 0 bound to the store's empty
//! tree; every output context is inserted (and dropped at once if tagged `Forget`), every input
//! tagged `Forget` is dropped after use; a checkout maps the recorded commit hash to the hash this
//! replay produced for it; a commit maps its parents the same way, commits with author `Tezos`, and
//! records recorded → real (replace semantics); with [`ReplayOptions::store_commits`], a recorded
//! hash the trace has not committed is the repository's commit of that hash (a trace that goes on
//! from a store's commits). A block is the operations up to and including a commit; blocks are
//! numbered from 0 and operations from 0 over the whole trace.

mod error;
mod exec;
mod generated;
mod read_ahead;

pub use error::{OpLocation, ReplayError, display_path};
pub use generated::{GeneratedRun, replay_generated};
pub use read_ahead::{ReadAhead, ReadAheadCounts};

use crate::stats::probe::{IoCounters, ProcessSample, format_utc, hostname};
use crate::stats::record::BlockGc;
use crate::stats::record::{
    BlockStats, HeaderOptions, InitialSample, OpTable, STATS_FORMAT, STATS_VERSION, StatEnd, StatHeader,
    StatLine, write_line,
};
use crate::stats::summary::{RunSummary, Summariser};
use larch_core::ContextRepo;
use larch_core::{Hash, Tree};
use larch_trace::op::{ContextId, Op, OpKind};
use read_ahead::Ahead;
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// How to replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Compare read results and commit hashes with the trace (default `true`; `--no-check` turns
    /// both off).
    pub check_hashes: bool,
    /// Stop after this many blocks (all when `None`).
    pub max_blocks: Option<u64>,
    /// Garbage collections during the replay (`--gc-every`, `--gc-keep`), if any.
    pub gc: Option<GcSchedule>,
    /// Walk the paths of the operations ahead of the one applied on other threads
    /// (`--read-ahead-ops`; [`replay`] only, not a streamed replay), if set.
    pub read_ahead: Option<ReadAhead>,
    /// The trace goes on from commits the repository already holds (`--onto-store`): a checkout
    /// or a parent whose recorded hash the trace has not committed is the repository's commit of
    /// that hash (a Tezos trace's recorded hashes are the real ones), as in a trace of a streamed
    /// replay's regular blocks ([`replay_generated`]'s `record`) replayed onto its setup's store.
    /// Off by default: such a hash is then an [`ReplayError::UnknownCommit`].
    pub store_commits: bool,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            check_hashes: true,
            max_blocks: None,
            gc: None,
            read_ahead: None,
            store_commits: false,
        }
    }
}

/// When a replay collects garbage, as irmin-bench's `--gc-every` and `--gc-distance-in-the-past`:
/// after block `b` with `b % every == 0` and `b > keep`, a GC is due that keeps the commit of
/// block `b - keep` and every later one. What happens when the previous GC is still running then
/// is `when_busy`'s choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcSchedule {
    /// Blocks between two GCs (at least 1).
    pub every: u64,
    /// Blocks kept behind the newest one (at least 1).
    pub keep: u64,
    /// What a due GC does while the previous one still runs.
    pub when_busy: GcWhenBusy,
}

/// What a replay does with a GC that is due while the previous one still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GcWhenBusy {
    /// Wait for the running GC to finish, then start it: the block pays the wait (seconds when a
    /// GC overruns its interval), and the store stops growing once GCs begin (the writer cannot
    /// outrun its GCs).
    Wait,
    /// Start it after the first block that ends with the running GC finished, on the commit it
    /// was due on (a later due GC replaces a deferred one, which then counts as never started):
    /// the replay never waits, but when GCs take longer than their interval they fall behind and
    /// the store grows meanwhile (docs/benchmarks.md at c117370, "Sixth round"). The default: a
    /// GC that overruns its interval by a little (a loaded machine, a large burst in its window)
    /// costs no block a wait.
    #[default]
    Defer,
    /// Do not start it (irmin-bench's behaviour: Irmin's `Gc.start_exn` starts no GC while one
    /// runs, and the replay logs "GC skipped").
    Skip,
}

/// Descriptions of the run for the stat file's header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunMeta {
    /// The trace replayed, usually its path.
    pub trace: String,
    /// The store replayed into, e.g. `memory` or `pack:/tmp/store`.
    pub store: String,
}

/// Per-block measurements in progress.
struct BlockMeter {
    start_wall: Instant,
    start_cpu: Option<f64>,
    block_wall: Instant,
    block_cpu: Option<f64>,
    block_io: Option<IoCounters>,
    block_faults: Option<u64>,
    first_op: u64,
    ops: u64,
    counts: [u64; 8],
    nanos: [u128; 8],
    reads_checked: u64,
}

fn kind_slot(kind: OpKind) -> usize {
    OpKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

impl BlockMeter {
    fn new(sample: &ProcessSample) -> BlockMeter {
        let now = Instant::now();
        BlockMeter {
            start_wall: now,
            start_cpu: sample.cpu_s,
            block_wall: now,
            block_cpu: sample.cpu_s,
            block_io: sample.io,
            block_faults: sample.page_faults,
            first_op: 0,
            ops: 0,
            counts: [0; 8],
            nanos: [0; 8],
            reads_checked: 0,
        }
    }

    fn op_table(&self) -> OpTable {
        let mut table = OpTable::default();
        for (slot, kind) in OpKind::ALL.iter().enumerate() {
            let entry = table.get_mut(*kind);
            entry.count = self.counts[slot];
            entry.seconds = self.nanos[slot] as f64 / 1e9;
        }
        table
    }

    /// Closes the block at `now` and starts the next one after operation `next_op`.
    fn reset(&mut self, now: Instant, sample: &ProcessSample, next_op: u64) {
        self.block_wall = now;
        self.block_cpu = sample.cpu_s;
        self.block_io = sample.io;
        self.block_faults = sample.page_faults;
        self.first_op = next_op;
        self.ops = 0;
        self.counts = [0; 8];
        self.nanos = [0; 8];
        self.reads_checked = 0;
    }
}

/// Replays operations one at a time into a repository.
pub struct Replayer<'r, R: ContextRepo> {
    repo: &'r mut R,
    options: ReplayOptions,
    contexts: HashMap<ContextId, Tree>,
    commits: HashMap<Hash, Hash>,
    op_index: u64,
    blocks: u64,
    reads_checked: u64,
    commits_checked: u64,
    meter: BlockMeter,
    initial: InitialSample,
    start_unix_s: f64,
    excluded_wchar: u64,
    /// The commits of the last `keep + 1` blocks, oldest first (only with a GC schedule).
    recent_commits: VecDeque<Hash>,
    /// What the GC hooks did since the last block closed: carried into the next block's stats.
    gc_pending: BlockGc,
    /// A GC that was due while another ran, deferred ([`GcWhenBusy::Defer`]): its commit.
    gc_deferred: Option<Hash>,
    /// Where the last commit made with an expected hash is in the trace (block, op index): a
    /// store that checks the hash beside the replay reports a difference at a later call.
    last_expected_commit: Option<(u64, u64)>,
    /// The hash of the last commit this replay made.
    last_commit: Option<Hash>,
}

/// The replay's error for `source`, a store error: the hash mismatch of the commit at `at` (block
/// and op index) when the store reports one it checked beside the replay
/// ([`ContextRepo::unexpected_commit`]), else `otherwise(source)`.
pub(crate) fn store_error<R: ContextRepo>(
    at: Option<(u64, u64)>,
    source: R::Error,
    otherwise: impl FnOnce(Box<dyn std::error::Error + Send + Sync + 'static>) -> ReplayError,
) -> ReplayError {
    match (R::unexpected_commit(&source), at) {
        (Some((expected, actual)), Some((block, op_index))) => {
            let at =
                Box::new(OpLocation { block, op_index, kind: OpKind::Commit, description: "commit".into() });
            ReplayError::HashMismatch { at, expected, actual }
        }
        _ => otherwise(Box::new(source)),
    }
}

impl<'r, R: ContextRepo> Replayer<'r, R> {
    /// A replayer at the start of a trace: context 0 is the store's empty tree.
    pub fn new(repo: &'r mut R, options: ReplayOptions) -> Replayer<'r, R> {
        let mut contexts = HashMap::new();
        contexts.insert(0, repo.empty_tree());
        let sample = ProcessSample::now();
        let initial = InitialSample {
            rss_bytes: sample.rss_bytes,
            max_rss_bytes: sample.max_rss_bytes,
            backend: repo.stats(),
        };
        let start_unix_s =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        Replayer {
            repo,
            options,
            contexts,
            commits: HashMap::new(),
            op_index: 0,
            blocks: 0,
            reads_checked: 0,
            commits_checked: 0,
            meter: BlockMeter::new(&sample),
            initial,
            start_unix_s,
            excluded_wchar: 0,
            recent_commits: VecDeque::new(),
            gc_pending: BlockGc::default(),
            gc_deferred: None,
            last_expected_commit: None,
            last_commit: None,
        }
    }

    /// The stat file header describing this replay.
    pub fn header(&self, meta: &RunMeta) -> StatHeader {
        StatHeader {
            format: STATS_FORMAT.to_string(),
            version: STATS_VERSION,
            trace: meta.trace.clone(),
            store: meta.store.clone(),
            options: HeaderOptions {
                check_hashes: self.options.check_hashes,
                max_blocks: self.options.max_blocks,
            },
            hostname: hostname(),
            start_unix_s: self.start_unix_s,
            start_utc: format_utc(self.start_unix_s),
            larch_version: env!("CARGO_PKG_VERSION").to_string(),
            initial: self.initial.clone(),
        }
    }

    /// Applies one operation. Returns the block's statistics when `op` was a commit (it ends a
    /// block). Does not enforce `max_blocks`: [`Replayer::is_done`] tells when to stop. After an
    /// error the tables may be half updated: the replay cannot go on.
    pub fn apply(&mut self, op: Op) -> Result<Option<BlockStats>, ReplayError> {
        let kind = op.kind();
        // quanta's clock reads the CPU's time-stamp counter (calibrated against the monotonic
        // clock at start, which it falls back to where the counter is not invariant): a pair of
        // reads costs ~18 ns on the benchmark VM, std's `Instant` ~45 ns (3% of the replay thread).
        let started = quanta::Instant::now();
        let result = self.exec(op);
        let elapsed = started.elapsed();
        let slot = kind_slot(kind);
        self.meter.counts[slot] += 1;
        self.meter.nanos[slot] += elapsed.as_nanos();
        self.meter.ops += 1;
        self.op_index += 1;
        match result? {
            Some(commit) => {
                self.last_commit = Some(commit);
                let stats = self.close_block(commit, elapsed.as_secs_f64());
                self.collect_garbage(commit)?;
                Ok(Some(stats))
            }
            None => Ok(None),
        }
    }

    /// The GC schedule's work after a block: finish a GC whose worker is done, then start the next
    /// one when due (or a deferred one once the previous has finished; [`GcWhenBusy`]). Runs after
    /// the block's stats were taken, so its time counts in the next block, whose stats report what
    /// it did.
    fn collect_garbage(&mut self, commit: Hash) -> Result<(), ReplayError> {
        let Some(GcSchedule { every, keep, when_busy }) = self.options.gc else { return Ok(()) };
        let commit_at = self.last_expected_commit;
        let block = self.blocks;
        let gc_error = |source: R::Error| {
            store_error::<R>(commit_at, source, |source| ReplayError::Gc { block, source })
        };
        self.recent_commits.push_back(commit);
        while self.recent_commits.len() as u64 > keep + 1 {
            self.recent_commits.pop_front();
        }
        if let Some(done) = self.repo.gc_finish(false).map_err(gc_error)? {
            self.gc_pending.finished.push(done);
        }
        let block = self.blocks - 1;
        let due = every != 0 && block.is_multiple_of(every) && block > keep;
        let target = match (due, self.recent_commits.front().copied()) {
            (true, Some(target)) => target,
            _ => {
                // Nothing due: start a deferred GC once the previous one has finished.
                if !self.repo.gc_running()
                    && let Some(target) = self.gc_deferred.take()
                {
                    self.gc_pending.started |= self.repo.gc_start(&target).map_err(gc_error)?;
                }
                return Ok(());
            }
        };
        if self.repo.gc_running() {
            match when_busy {
                GcWhenBusy::Wait => {
                    let waited = Instant::now();
                    let done = self.repo.gc_finish(true).map_err(gc_error)?;
                    self.gc_pending.waited_s += waited.elapsed().as_secs_f64();
                    self.gc_pending.finished.extend(done);
                }
                GcWhenBusy::Defer => {
                    self.gc_pending.deferred = true;
                    if self.gc_deferred.replace(target).is_some() {
                        self.gc_pending.skipped += 1;
                    }
                    return Ok(());
                }
                GcWhenBusy::Skip => {
                    self.gc_pending.skipped += 1;
                    return Ok(());
                }
            }
        }
        // A due GC supersedes a deferred one (its commit is newer).
        if self.gc_deferred.take().is_some() {
            self.gc_pending.skipped += 1;
        }
        self.gc_pending.started |= self.repo.gc_start(&target).map_err(gc_error)?;
        Ok(())
    }

    /// The hash of the last commit this replay made.
    pub fn last_commit(&self) -> Option<Hash> {
        self.last_commit
    }

    /// The tree of commit `real` (a hash this replay produced), as the repository checks it out:
    /// for a store, loaded lazily. Not an operation of the trace: it is not timed or counted.
    pub fn checkout_tree(&mut self, real: &Hash) -> Result<Tree, ReplayError> {
        let (block, op_index) = (self.blocks, self.op_index);
        let commit_at = self.last_expected_commit;
        self.repo.checkout(real).map_err(|source| {
            store_error::<R>(commit_at, source, |source| ReplayError::Store {
                at: Box::new(OpLocation {
                    block,
                    op_index,
                    kind: OpKind::Checkout,
                    description: format!("checkout {real} for the generator"),
                }),
                source,
            })
        })
    }

    /// Starts a new phase of the measurements (the regular blocks after a streamed setup): the
    /// run's clocks, its initial sample (memory, store counters) and the process's peak RSS
    /// start again from now; block numbers go on. Returns the phase's stat file header.
    pub fn restart_measurements(&mut self, meta: &RunMeta) -> StatHeader {
        crate::stats::probe::reset_peak_rss();
        let sample = ProcessSample::now();
        self.initial = InitialSample {
            rss_bytes: sample.rss_bytes,
            max_rss_bytes: sample.max_rss_bytes,
            backend: self.repo.stats(),
        };
        self.start_unix_s =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let first_op = self.meter.first_op;
        let (ops, counts, nanos, reads) =
            (self.meter.ops, self.meter.counts, self.meter.nanos, self.meter.reads_checked);
        self.meter = BlockMeter::new(&sample);
        // Operations of the open block (none between blocks) stay in it.
        self.meter.first_op = first_op;
        self.meter.ops = ops;
        self.meter.counts = counts;
        self.meter.nanos = nanos;
        self.meter.reads_checked = reads;
        self.header(meta)
    }

    /// Whether `max_blocks` blocks have been replayed.
    pub fn is_done(&self) -> bool {
        self.options.max_blocks.is_some_and(|max| self.blocks >= max)
    }

    /// Index of the next operation in the trace (= operations applied so far).
    pub fn op_index(&self) -> u64 {
        self.op_index
    }

    /// Blocks completed so far.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Read results compared with the trace so far.
    pub fn reads_checked(&self) -> u64 {
        self.reads_checked
    }

    /// Commit hashes compared with the trace so far.
    pub fn commits_checked(&self) -> u64 {
        self.commits_checked
    }

    /// The tree of context `id` if it is held: a clone sharing its nodes, so that while it is
    /// held the replay's edits copy the nodes they change instead of changing them in place, and
    /// their old versions stay alive (the read-ahead walkers hold one until the next checkout).
    pub fn context_tree(&self, id: ContextId) -> Option<Tree> {
        self.contexts.get(&id).cloned()
    }

    /// Number of contexts currently held.
    pub fn live_contexts(&self) -> usize {
        self.contexts.len()
    }

    /// The hash this replay produced for the recorded commit `recorded`, if still held.
    pub fn real_commit(&self, recorded: &Hash) -> Option<Hash> {
        self.commits.get(recorded).copied()
    }

    /// The repository replayed into.
    pub fn repo(&self) -> &R {
        self.repo
    }

    /// Tells the replayer that `bytes` were written for its own output (the stat file), so that
    /// they are not counted in the current block's `io.wchar`.
    pub fn exclude_output_bytes(&mut self, bytes: u64) {
        self.excluded_wchar += bytes;
    }

    /// Waits until every commit of the replay is durable (the store's
    /// [`ContextRepo::wait_durable`]): the end of a replay, so that its wall time includes the
    /// last publish of a pipelined store.
    pub fn wait_durable(&mut self) -> Result<(), ReplayError> {
        let commit_at = self.last_expected_commit;
        let block = self.blocks;
        self.repo.wait_durable().map_err(|source| {
            store_error::<R>(commit_at, source, |source| ReplayError::Durability { block, source })
        })
    }

    /// The end line of the stat file, describing the replay so far.
    pub fn end(&self) -> StatEnd {
        StatEnd {
            blocks: self.blocks,
            ops: self.op_index,
            trailing_ops: self.meter.ops,
            wall_s: self.meter.start_wall.elapsed().as_secs_f64(),
            gc: None,
            read_ahead: None,
        }
    }

    /// The end of a replay with a GC schedule (`None` without one): waits for the GC still
    /// running at the last block (the store's close would wait for it anyway) and returns what
    /// the GC hooks did since the last block, with that GC's report and the time waited (a
    /// deferred GC that never started counts as skipped). Call it once, after the last block.
    pub fn finish_gc(&mut self) -> Result<Option<BlockGc>, ReplayError> {
        if self.options.gc.is_none() {
            return Ok(None);
        }
        let commit_at = self.last_expected_commit;
        let block = self.blocks;
        let mut gc = std::mem::take(&mut self.gc_pending);
        if self.gc_deferred.take().is_some() {
            gc.skipped += 1;
        }
        let waited = Instant::now();
        let done = self.repo.gc_finish(true).map_err(|source| {
            store_error::<R>(commit_at, source, |source| ReplayError::Gc { block, source })
        })?;
        gc.waited_s += waited.elapsed().as_secs_f64();
        gc.finished.extend(done);
        gc.running = self.repo.gc_running();
        Ok(Some(gc))
    }

    fn close_block(&mut self, commit: Hash, commit_s: f64) -> BlockStats {
        let sample = ProcessSample::now();
        let now = Instant::now();
        let backend = self.repo.stats();
        let diff = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a - b).max(0.0));
        let io = match (sample.io, self.meter.block_io) {
            (Some(after), Some(before)) => {
                let mut io = after.since(&before);
                subtract_own_output(&mut io, &mut self.excluded_wchar);
                Some(io)
            }
            _ => {
                self.excluded_wchar = 0;
                None
            }
        };
        let stats = BlockStats {
            block: self.blocks,
            first_op: self.meter.first_op,
            ops: self.meter.ops,
            wall_s: now.duration_since(self.meter.block_wall).as_secs_f64(),
            cpu_s: diff(sample.cpu_s, self.meter.block_cpu),
            elapsed_wall_s: now.duration_since(self.meter.start_wall).as_secs_f64(),
            elapsed_cpu_s: diff(sample.cpu_s, self.meter.start_cpu),
            op_times: self.meter.op_table(),
            commit_s,
            rss_bytes: sample.rss_bytes,
            max_rss_bytes: sample.max_rss_bytes,
            io,
            page_faults: sample
                .page_faults
                .zip(self.meter.block_faults)
                .map(|(after, before)| after.saturating_sub(before)),
            backend,
            reads_checked: self.meter.reads_checked,
            commit_checked: self.options.check_hashes,
            commit: commit.to_base58(),
            live_contexts: self.contexts.len() as u64,
            live_commits: self.commits.len() as u64,
            gc: self.options.gc.map(|_| {
                let mut gc = std::mem::take(&mut self.gc_pending);
                gc.running = self.repo.gc_running();
                gc
            }),
        };
        self.blocks += 1;
        self.meter.reset(now, &sample, self.op_index);
        stats
    }
}

/// Subtracts the replayer's own output (`pending` bytes) from `io.wchar`. A buffered stat writer
/// flushes later than its lines are written: what cannot be subtracted from this block is carried
/// to the next ones, so that the sums stay right.
fn subtract_own_output(io: &mut IoCounters, pending: &mut u64) {
    let excluded = io.wchar.min(*pending);
    io.wchar -= excluded;
    *pending -= excluded;
}

/// Replays `ops` into `repo`: the simple entry point of `larch replay`.
///
/// Writes the stat file (header, one line per block, end line) to `stats_out` if given, calls
/// `progress` after every block, stops after `options.max_blocks` blocks, and returns the run's
/// summary. On error, the lines written so far stay in `stats_out` (no end line).
pub fn replay<R, I, E>(
    repo: &mut R,
    ops: I,
    options: &ReplayOptions,
    meta: &RunMeta,
    mut stats_out: Option<&mut dyn Write>,
    progress: &mut dyn FnMut(&BlockStats),
) -> Result<RunSummary, ReplayError>
where
    R: ContextRepo,
    I: IntoIterator<Item = Result<Op, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut replayer = Replayer::new(repo, options.clone());
    let header = replayer.header(meta);
    let mut summariser = Summariser::new(&header);
    let result = (|| {
        if let Some(out) = stats_out.as_deref_mut() {
            let bytes = write_line(out, &StatLine::Header(header)).map_err(ReplayError::StatsOutput)?;
            replayer.exclude_output_bytes(bytes);
        }
        let mut ops = Ahead::new(ops.into_iter(), options.read_ahead);
        while !replayer.is_done() {
            let Some(item) = ops.next() else { break };
            let op = item.map_err(|source| ReplayError::Trace {
                op_index: replayer.op_index(),
                source: Box::new(source),
            })?;
            let checkout = match &op {
                Op::Checkout { out, .. } if ops.reads_ahead() => Some(out.value()),
                _ => None,
            };
            let applied = replayer.apply(op);
            if let Some(tree) = checkout.and_then(|id| replayer.context_tree(id)) {
                ops.set_tree(tree);
            }
            if let Some(block) = applied? {
                if let Some(out) = stats_out.as_deref_mut() {
                    let bytes =
                        write_line(out, &StatLine::Block(block.clone())).map_err(ReplayError::StatsOutput)?;
                    replayer.exclude_output_bytes(bytes);
                }
                summariser.push(&block);
                progress(&block);
            }
        }
        let read_ahead = ops.finish();
        replayer.wait_durable()?;
        let mut end = replayer.end();
        end.gc = replayer.finish_gc()?;
        end.read_ahead = read_ahead;
        if let Some(out) = stats_out.as_deref_mut() {
            write_line(out, &StatLine::End(end.clone())).map_err(ReplayError::StatsOutput)?;
        }
        Ok(end)
    })();
    let flushed = stats_out.map_or(Ok(()), |out| out.flush());
    let end = result?;
    flushed.map_err(ReplayError::StatsOutput)?;
    Ok(summariser.finish(Some(&end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_output_is_subtracted_across_blocks() {
        let mut pending = 0;
        let mut wchar_sum = 0;
        // Lines of 900 bytes each block; the writer flushes 8 KiB every ninth block; the store
        // writes 100 bytes per block.
        let mut buffered = 0;
        for block in 0..90 {
            pending += 900;
            buffered += 900;
            let mut io = IoCounters { wchar: 100, ..IoCounters::default() };
            if block % 9 == 8 {
                io.wchar += buffered;
                buffered = 0;
            }
            subtract_own_output(&mut io, &mut pending);
            wchar_sum += io.wchar;
        }
        assert_eq!((wchar_sum, pending), (90 * 100, 0));
    }
}
