//! The summary of a run, computed from its block statistics (streamed during a replay, or read
//! from a stat file): throughput, per-operation times, block and commit time distributions,
//! memory, store size, I/O, cache and hash-check results. Definitions are in
//! `docs/stats-format.md` ("Summary").

use crate::replay::ReadAheadCounts;
pub use crate::stats::distribution::{Distribution, FIRST_REGULAR_BLOCK};
use crate::stats::fmt;
use crate::stats::gc::{GcAccumulator, GcRunSummary};
use crate::stats::probe::IoCounters;
use crate::stats::record::{BlockStats, OpTable, StatEnd, StatFile, StatHeader};
use larch_core::BackendStats;
use larch_trace::op::OpKind;
use serde::{Deserialize, Serialize};
use std::fmt as sfmt;

/// How a streamed replay's trace name starts (`larch replay --scale`/`--generate`: the generator's
/// operations go straight to the replay, and read and hash the replay's own tree).
pub const STREAMED_TRACE: &str = "generated tezos-like/v1";

/// Count and time of one kind of operation over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpKindSummary {
    /// The kind's name (`add`, `mem_tree`, …).
    pub kind: String,
    /// Number of operations.
    pub count: u64,
    /// Their total duration, in seconds.
    pub total_s: f64,
    /// Mean duration in microseconds (`None` when there were none).
    pub mean_us: Option<f64>,
}

/// The summary of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Name of the run in comparisons (by default the store description, else the trace).
    pub label: String,
    /// The trace replayed.
    pub trace: String,
    /// The store replayed into.
    pub store: String,
    /// Host name.
    pub hostname: String,
    /// Start of the run, RFC 3339 UTC.
    pub start_utc: String,
    /// Version of larch.
    pub larch_version: String,
    /// Whether reads and commit hashes were checked.
    pub check_hashes: bool,
    /// The block limit of the run.
    pub max_blocks: Option<u64>,
    /// Whether the stat data ends with the replay's end (not cut short by an error, a crash or a
    /// comparison's common block count).
    pub complete: bool,
    /// Operations applied after the last commit (known only for complete runs).
    pub trailing_ops: u64,
    /// Blocks (commits).
    pub blocks: u64,
    /// Operations in those blocks.
    pub ops: u64,
    /// Context operations: all but checkouts and commits.
    pub context_ops: u64,
    /// `Add` operations (Tezos `Context.add`).
    pub adds: u64,
    /// Wall time, from the start to the end of the last block, in seconds.
    pub wall_s: f64,
    /// Process CPU time over the same span, in seconds.
    pub cpu_s: Option<f64>,
    /// Wall time spent inside the timed operations, in seconds.
    pub in_ops_s: f64,
    /// Wall time of the blocks spent outside the operations (replayer bookkeeping, statistics,
    /// the stat file, the progress callback), in seconds: Irmin's "unseen" time.
    pub unseen_s: f64,
    /// CPU time / wall time.
    pub cpu_usage: Option<f64>,
    /// Blocks per CPU second.
    pub blocks_per_s: Option<f64>,
    /// Blocks per wall second.
    pub blocks_per_wall_s: Option<f64>,
    /// Context operations per CPU second.
    pub context_ops_per_s: Option<f64>,
    /// Context operations per wall-clock second (with the time spent waiting for `fsync`).
    #[serde(default)]
    pub context_ops_per_wall_s: Option<f64>,
    /// Adds per CPU second (irmin-bench's "Context.set per sec").
    pub adds_per_s: Option<f64>,
    /// Count and time of every kind of operation, in [`OpKind::ALL`] order.
    pub op_kinds: Vec<OpKindSummary>,
    /// Wall time of every block.
    pub block_time: Option<Distribution>,
    /// Wall time of the regular blocks (block number ≥ [`FIRST_REGULAR_BLOCK`]).
    pub regular_block_time: Option<Distribution>,
    /// Commit durations.
    pub commit_time: Option<Distribution>,
    /// Peak RSS, in bytes.
    pub max_rss_bytes: Option<u64>,
    /// RSS after the last block, in bytes.
    pub final_rss_bytes: Option<u64>,
    /// Store size after the last block, in bytes.
    pub store_size_bytes: Option<u64>,
    /// Store growth over the run, in bytes.
    pub store_growth_bytes: Option<u64>,
    /// Store growth per block, in bytes.
    pub store_bytes_per_block: Option<f64>,
    /// Process I/O over the run (sum over blocks).
    pub io: Option<IoCounters>,
    /// Objects the store wrote during the run.
    pub objects_written: Option<u64>,
    /// Bytes of the objects the store wrote during the run.
    pub object_bytes_written: Option<u64>,
    /// `io.wchar / object_bytes_written`.
    pub write_amplification: Option<f64>,
    /// Cache hits during the run.
    pub cache_hits: Option<u64>,
    /// Cache misses during the run.
    pub cache_misses: Option<u64>,
    /// `hits / (hits + misses)`.
    pub cache_hit_ratio: Option<f64>,
    /// Read results compared with the trace.
    pub reads_checked: u64,
    /// Commit hashes compared with the trace.
    pub commits_checked: u64,
    /// Garbage collection (replays with `--gc-every` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc: Option<GcRunSummary>,
    /// What the threads reading the trace's operations ahead did (`--read-ahead-ops` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ahead: Option<ReadAheadCounts>,
}

impl RunSummary {
    /// The summary of operation kind `kind`.
    pub fn op_kind(&self, kind: OpKind) -> Option<&OpKindSummary> {
        self.op_kinds.iter().find(|entry| entry.kind == kind.name())
    }
}

/// Builds a [`RunSummary`] from block statistics, one block at a time.
#[derive(Clone, Debug)]
pub struct Summariser {
    header: StatHeader,
    op_times: OpTable,
    blocks: u64,
    ops: u64,
    block_times: Vec<(f64, u64)>,
    commit_times: Vec<(f64, u64)>,
    wall_s: f64,
    cpu_s: Option<f64>,
    unseen_s: f64,
    max_rss: Option<u64>,
    final_rss: Option<u64>,
    io: Option<IoCounters>,
    backend: BackendStats,
    reads_checked: u64,
    commits_checked: u64,
    gc: GcAccumulator,
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn delta(after: Option<u64>, before: Option<u64>) -> Option<u64> {
    after.map(|after| after.saturating_sub(before.unwrap_or(0)))
}

fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

impl Summariser {
    /// A summariser for the run described by `header`.
    pub fn new(header: &StatHeader) -> Summariser {
        Summariser {
            header: header.clone(),
            op_times: OpTable::default(),
            blocks: 0,
            ops: 0,
            block_times: Vec::new(),
            commit_times: Vec::new(),
            wall_s: 0.0,
            cpu_s: None,
            unseen_s: 0.0,
            max_rss: header.initial.max_rss_bytes,
            final_rss: header.initial.rss_bytes,
            io: None,
            backend: header.initial.backend,
            reads_checked: 0,
            commits_checked: 0,
            gc: GcAccumulator::default(),
        }
    }

    /// Number of blocks pushed so far.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Adds one block.
    pub fn push(&mut self, block: &BlockStats) {
        for kind in OpKind::ALL {
            self.op_times.get_mut(kind).add(block.op_times.get(kind));
        }
        self.blocks += 1;
        self.ops += block.ops;
        self.block_times.push((block.wall_s, block.block));
        self.commit_times.push((block.commit_s, block.block));
        self.wall_s = block.elapsed_wall_s;
        self.cpu_s = block.elapsed_cpu_s;
        self.unseen_s += (block.wall_s - block.op_times.total_seconds()).max(0.0);
        self.max_rss = max_opt(self.max_rss, block.max_rss_bytes);
        self.final_rss = block.rss_bytes.or(self.final_rss);
        if let Some(io) = &block.io {
            self.io = Some(self.io.map_or(*io, |sum| sum.plus(io)));
        }
        self.backend = block.backend;
        self.reads_checked += block.reads_checked;
        self.commits_checked += u64::from(block.commit_checked);
        self.gc.push(block);
    }

    /// The summary; `end` is the stat file's end line if the run is complete.
    pub fn finish(&self, end: Option<&StatEnd>) -> RunSummary {
        let header = &self.header;
        let initial = &header.initial.backend;
        let last = &self.backend;
        let count = |kind| self.op_times.get(kind).count;
        let context_ops =
            [OpKind::Add, OpKind::Remove, OpKind::Copy, OpKind::Find, OpKind::Mem, OpKind::MemTree]
                .into_iter()
                .map(count)
                .sum();
        let adds = count(OpKind::Add);
        let cpu = self.cpu_s.filter(|cpu| *cpu > 0.0);
        let per_cpu = |n: u64| cpu.map(|cpu| n as f64 / cpu);
        // The end line's wall time also counts the wait for the last commits' durability (a
        // pipelined store's last publish), after the last block closed.
        let wall_s = end
            .filter(|end| end.blocks == self.blocks)
            .map_or(self.wall_s, |end| end.wall_s.max(self.wall_s));
        let op_kinds = OpKind::ALL
            .into_iter()
            .map(|kind| {
                let stat = self.op_times.get(kind);
                OpKindSummary {
                    kind: kind.name().to_string(),
                    count: stat.count,
                    total_s: stat.seconds,
                    mean_us: (stat.count > 0).then(|| stat.seconds / stat.count as f64 * 1e6),
                }
            })
            .collect();
        let regular: Vec<(f64, u64)> =
            self.block_times.iter().copied().filter(|(_, block)| *block >= FIRST_REGULAR_BLOCK).collect();
        let store_growth = delta(last.store_size_bytes, initial.store_size_bytes);
        let object_bytes = delta(last.object_bytes_written, initial.object_bytes_written);
        let cache_hits = delta(last.cache_hits, initial.cache_hits);
        let cache_misses = delta(last.cache_misses, initial.cache_misses);
        let label = if header.store.is_empty() { header.trace.clone() } else { header.store.clone() };
        RunSummary {
            label,
            trace: header.trace.clone(),
            store: header.store.clone(),
            hostname: header.hostname.clone(),
            start_utc: header.start_utc.clone(),
            larch_version: header.larch_version.clone(),
            check_hashes: header.options.check_hashes,
            max_blocks: header.options.max_blocks,
            complete: end.is_some_and(|end| end.blocks == self.blocks),
            trailing_ops: end.filter(|end| end.blocks == self.blocks).map_or(0, |end| end.trailing_ops),
            blocks: self.blocks,
            ops: self.ops,
            context_ops,
            adds,
            wall_s,
            cpu_s: self.cpu_s,
            in_ops_s: self.op_times.total_seconds(),
            unseen_s: self.unseen_s,
            cpu_usage: ratio(self.cpu_s, Some(wall_s)),
            blocks_per_s: per_cpu(self.blocks),
            blocks_per_wall_s: ratio(Some(self.blocks as f64), Some(wall_s)),
            context_ops_per_s: per_cpu(context_ops),
            context_ops_per_wall_s: ratio(Some(context_ops as f64), Some(wall_s)),
            adds_per_s: per_cpu(adds),
            op_kinds,
            block_time: Distribution::of(&self.block_times),
            regular_block_time: Distribution::of(&regular),
            commit_time: Distribution::of(&self.commit_times),
            max_rss_bytes: self.max_rss,
            final_rss_bytes: self.final_rss,
            store_size_bytes: last.store_size_bytes,
            store_growth_bytes: store_growth,
            store_bytes_per_block: ratio(store_growth.map(|g| g as f64), Some(self.blocks as f64)),
            io: self.io,
            objects_written: delta(last.objects_written, initial.objects_written),
            object_bytes_written: object_bytes,
            write_amplification: ratio(self.io.map(|io| io.wchar as f64), object_bytes.map(|b| b as f64)),
            cache_hits,
            cache_misses,
            cache_hit_ratio: match (cache_hits, cache_misses) {
                (Some(h), Some(m)) if h + m > 0 => Some(h as f64 / (h + m) as f64),
                _ => None,
            },
            reads_checked: self.reads_checked,
            commits_checked: self.commits_checked,
            gc: {
                // The GC the replay's end waited for counts with the others.
                let close = end.filter(|end| end.blocks == self.blocks).and_then(|end| end.gc.as_ref());
                match (close, self.block_times.last()) {
                    (Some(close), Some(&(_, last_block))) => {
                        let mut gc = self.gc.clone();
                        gc.push_close(close, last_block);
                        gc.finish()
                    }
                    _ => self.gc.finish(),
                }
            },
            read_ahead: end.and_then(|end| end.read_ahead),
        }
    }
}

/// Summarises a stat file, keeping only its first `max_blocks` blocks if given (a cut run is not
/// `complete`).
pub fn summarise(file: &StatFile, max_blocks: Option<u64>) -> RunSummary {
    let mut summariser = Summariser::new(&file.header);
    let limit = max_blocks.unwrap_or(u64::MAX);
    for block in file.blocks.iter().take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        summariser.push(block);
    }
    summariser.finish(file.end.as_ref())
}

/// Reads the stat file at `path` and summarises it.
pub fn summarise_stat_path(path: &std::path::Path) -> Result<RunSummary, crate::stats::StatsError> {
    Ok(summarise(&crate::stats::read_stat_path(path)?, None))
}

fn opt<T>(value: Option<T>, show: impl FnOnce(T) -> String) -> String {
    value.map_or_else(|| "n/a".to_string(), show)
}

fn distribution_row(f: &mut sfmt::Formatter<'_>, name: &str, d: &Option<Distribution>) -> sfmt::Result {
    match d {
        None => writeln!(f, "  {name:<16} {:>8}", "-"),
        Some(d) => writeln!(
            f,
            "  {name:<16} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  (block {})",
            fmt::count(d.count),
            fmt::duration(d.mean),
            fmt::duration(d.sd),
            fmt::duration(d.p50),
            fmt::duration(d.p90),
            fmt::duration(d.p99),
            fmt::duration(d.max),
            d.max_block
        ),
    }
}

impl sfmt::Display for RunSummary {
    fn fmt(&self, f: &mut sfmt::Formatter<'_>) -> sfmt::Result {
        writeln!(f, "Replay of {} into {}", self.trace, self.store)?;
        writeln!(f, "  host {}, started {}, larch {}", self.hostname, self.start_utc, self.larch_version)?;
        let extent = if self.complete { "complete" } else { "incomplete" };
        let checks = if self.check_hashes {
            // A streamed replay's generator reads and hashes the replay's own tree (but in
            // abandoned contexts): those checks hold by construction (docs/workload.md §9).
            let own =
                if self.trace.starts_with(STREAMED_TRACE) { " (streamed: the replay's own)" } else { "" };
            format!(
                "checked {} reads and {} commits, all ok{own}",
                fmt::count(self.reads_checked),
                fmt::count(self.commits_checked)
            )
        } else {
            "hash and read checks off (--no-check)".to_string()
        };
        writeln!(f, "  {} blocks ({extent}); {checks}", fmt::count(self.blocks))?;
        writeln!(f)?;
        writeln!(f, "Throughput")?;
        let trailing = if self.trailing_ops > 0 {
            format!(", {} after the last commit", self.trailing_ops)
        } else {
            String::new()
        };
        writeln!(
            f,
            "  {:<16} {:>12}  ({} context ops{trailing})",
            "operations",
            fmt::count(self.ops),
            fmt::count(self.context_ops)
        )?;
        writeln!(
            f,
            "  {:<16} {:>12}  ({} in operations, {} outside them)",
            "wall time",
            fmt::duration(self.wall_s),
            fmt::duration(self.in_ops_s),
            fmt::duration(self.unseen_s)
        )?;
        writeln!(
            f,
            "  {:<16} {:>12}  ({} CPU)",
            "CPU time",
            opt(self.cpu_s, fmt::duration),
            opt(self.cpu_usage, fmt::percent)
        )?;
        writeln!(
            f,
            "  {:<16} {:>12}  ({} per wall second)",
            "blocks/s",
            opt(self.blocks_per_s, fmt::number),
            opt(self.blocks_per_wall_s, fmt::number)
        )?;
        writeln!(
            f,
            "  {:<16} {:>12}  ({} per wall second)",
            "context ops/s",
            opt(self.context_ops_per_s, fmt::number),
            opt(self.context_ops_per_wall_s, fmt::number)
        )?;
        writeln!(f, "  {:<16} {:>12}", "Context.add/s", opt(self.adds_per_s, fmt::number))?;
        writeln!(f)?;
        writeln!(f, "  {:<16} {:>12} {:>10} {:>10}", "Operation", "count", "total", "mean")?;
        for kind in &self.op_kinds {
            writeln!(
                f,
                "  {:<16} {:>12} {:>10} {:>10}",
                kind.kind,
                fmt::count(kind.count),
                fmt::duration(kind.total_s),
                opt(kind.mean_us, |us| fmt::duration(us / 1e6))
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  {:<16} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "Time per", "blocks", "mean", "sd", "p50", "p90", "p99", "max"
        )?;
        distribution_row(f, "block (all)", &self.block_time)?;
        distribution_row(f, "block (regular)", &self.regular_block_time)?;
        distribution_row(f, "commit", &self.commit_time)?;
        writeln!(f)?;
        writeln!(f, "Resources")?;
        writeln!(
            f,
            "  {:<16} {:>12}  (final {})",
            "max RSS",
            opt(self.max_rss_bytes, |b| fmt::bytes(b as f64)),
            opt(self.final_rss_bytes, |b| fmt::bytes(b as f64))
        )?;
        const UNREPORTED: &str = "n/a (not reported by the store)";
        match self.store_size_bytes {
            Some(size) => writeln!(
                f,
                "  {:<16} {:>12}  (grew {}, {} per block)",
                "store size",
                fmt::bytes(size as f64),
                opt(self.store_growth_bytes, |b| fmt::bytes(b as f64)),
                opt(self.store_bytes_per_block, fmt::bytes)
            )?,
            None => writeln!(f, "  {:<16} {UNREPORTED}", "store size")?,
        }
        match (self.objects_written, self.object_bytes_written) {
            (None, None) => writeln!(f, "  {:<16} {UNREPORTED}", "new objects")?,
            (objects, bytes) => writeln!(
                f,
                "  {:<16} {:>12}  ({}; write amplification {})",
                "new objects",
                opt(objects, fmt::count),
                opt(bytes, |b| fmt::bytes(b as f64)),
                opt(self.write_amplification, |r| format!("{r:.2}x"))
            )?,
        }
        match &self.io {
            Some(io) => {
                writeln!(
                    f,
                    "  {:<16} {:>12}  ({} to disk, {} calls)",
                    "written",
                    fmt::bytes(io.wchar as f64),
                    fmt::bytes(io.write_bytes as f64),
                    fmt::count(io.syscw)
                )?;
                writeln!(
                    f,
                    "  {:<16} {:>12}  ({} from disk, {} calls)",
                    "read",
                    fmt::bytes(io.rchar as f64),
                    fmt::bytes(io.read_bytes as f64),
                    fmt::count(io.syscr)
                )?;
            }
            None => writeln!(f, "  {:<16} {:>12}", "I/O", "n/a")?,
        }
        match self.cache_hit_ratio {
            Some(ratio) => writeln!(
                f,
                "  {:<16} {:>12}  ({} hits, {} misses)",
                "cache hit ratio",
                fmt::percent(ratio),
                opt(self.cache_hits, fmt::count),
                opt(self.cache_misses, fmt::count)
            )?,
            None => writeln!(f, "  {:<16} {UNREPORTED}", "cache hit ratio")?,
        }
        writeln!(f)?;
        if let Some(gc) = &self.gc {
            write!(f, "{gc}")?;
            writeln!(f)?;
        }
        writeln!(
            f,
            "Per-second rates are over CPU time (as irmin-bench), wall-clock rates beside them; regular blocks exclude blocks 0 and 1."
        )
    }
}
