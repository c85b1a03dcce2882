//! The stat file: JSON lines — one header, one line per block, and an end line when the replay
//! finished. Field meanings are documented in `docs/stats-format.md`.

use crate::replay::ReadAheadCounts;
use crate::stats::probe::IoCounters;
use larch_core::BackendStats;
use larch_core::GcSummary;
use larch_trace::op::OpKind;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Name written in the `format` field of the header.
pub const STATS_FORMAT: &str = "larch-stats";
/// Version of the stat file format.
pub const STATS_VERSION: u32 = 1;

/// Count and total time of one kind of operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStat {
    /// Number of operations.
    pub count: u64,
    /// Their total duration, in seconds.
    pub seconds: f64,
}

impl OpStat {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &OpStat) {
        self.count += other.count;
        self.seconds += other.seconds;
    }
}

/// One [`OpStat`] per [`OpKind`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpTable {
    /// Checkouts.
    pub checkout: OpStat,
    /// Adds.
    pub add: OpStat,
    /// Removes.
    pub remove: OpStat,
    /// Copies.
    pub copy: OpStat,
    /// Finds.
    pub find: OpStat,
    /// Mems.
    pub mem: OpStat,
    /// Mem_trees.
    pub mem_tree: OpStat,
    /// Commits.
    pub commit: OpStat,
}

impl OpTable {
    /// The entry of `kind`.
    pub fn get(&self, kind: OpKind) -> &OpStat {
        match kind {
            OpKind::Checkout => &self.checkout,
            OpKind::Add => &self.add,
            OpKind::Remove => &self.remove,
            OpKind::Copy => &self.copy,
            OpKind::Find => &self.find,
            OpKind::Mem => &self.mem,
            OpKind::MemTree => &self.mem_tree,
            OpKind::Commit => &self.commit,
        }
    }

    /// The entry of `kind`, mutably.
    pub fn get_mut(&mut self, kind: OpKind) -> &mut OpStat {
        match kind {
            OpKind::Checkout => &mut self.checkout,
            OpKind::Add => &mut self.add,
            OpKind::Remove => &mut self.remove,
            OpKind::Copy => &mut self.copy,
            OpKind::Find => &mut self.find,
            OpKind::Mem => &mut self.mem,
            OpKind::MemTree => &mut self.mem_tree,
            OpKind::Commit => &mut self.commit,
        }
    }

    /// Total number of operations.
    pub fn total_count(&self) -> u64 {
        OpKind::ALL.iter().map(|kind| self.get(*kind).count).sum()
    }

    /// Total duration of all operations, in seconds.
    pub fn total_seconds(&self) -> f64 {
        OpKind::ALL.iter().map(|kind| self.get(*kind).seconds).sum()
    }
}

/// The statistics of one block (the operations up to and including a commit).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockStats {
    /// Block number, from 0.
    pub block: u64,
    /// Index in the trace of the block's first operation.
    pub first_op: u64,
    /// Number of operations, the commit included.
    pub ops: u64,
    /// Wall time from the end of the previous block (or the start of the replay) to the end of
    /// this block's commit, in seconds.
    pub wall_s: f64,
    /// Process CPU time over the same span, in seconds (`None` where unavailable).
    pub cpu_s: Option<f64>,
    /// Wall time since the replay started, at the end of this block.
    pub elapsed_wall_s: f64,
    /// Process CPU time since the replay started, at the end of this block.
    pub elapsed_cpu_s: Option<f64>,
    /// Count and time of each kind of operation in the block.
    pub op_times: OpTable,
    /// Duration of the commit, in seconds (also in `op_times.commit`).
    pub commit_s: f64,
    /// Resident set size after the commit, in bytes.
    pub rss_bytes: Option<u64>,
    /// Peak resident set size of the process so far, in bytes.
    pub max_rss_bytes: Option<u64>,
    /// I/O of the process during this block (difference of `/proc/self/io`).
    pub io: Option<IoCounters>,
    /// Page faults of the process during this block, minor and major (`getrusage`): e.g. first
    /// touches of memory new to the process (zeroed by the kernel) or of pages of a mapped file
    /// (`None` where unavailable; absent from stat files of earlier builds).
    #[serde(default)]
    pub page_faults: Option<u64>,
    /// The store's counters after the commit (cumulative).
    pub backend: BackendStats,
    /// Read results compared with the trace in this block.
    pub reads_checked: u64,
    /// Whether the commit hash was compared with the trace.
    pub commit_checked: bool,
    /// The commit hash the replay produced (base58, `Co…`).
    pub commit: String,
    /// Contexts held by the replayer after the commit.
    pub live_contexts: u64,
    /// Recorded-to-real commit mappings held by the replayer after the commit.
    pub live_commits: u64,
    /// Garbage collection during this block (replays with a GC schedule only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc: Option<BlockGc>,
}

/// What garbage collection did during one block of a replay with `--gc-every`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockGc {
    /// Whether a GC was running when the block ended.
    pub running: bool,
    /// Whether a GC started at the start of this block.
    pub started: bool,
    /// Seconds this block waited for a GC still running when the next was due.
    pub waited_s: f64,
    /// Whether a GC due at the start of this block was deferred (the previous one still ran).
    pub deferred: bool,
    /// Due GCs dropped at the start of this block: skipped while another ran, or a deferred one
    /// superseded by a newer due GC before it could start.
    pub skipped: u64,
    /// GCs that finished (switched) during this block.
    pub finished: Vec<GcSummary>,
}

/// What the replay was run with, as recorded in the header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderOptions {
    /// Whether reads and commit hashes were checked.
    pub check_hashes: bool,
    /// The block limit, if any.
    pub max_blocks: Option<u64>,
}

/// Resources at the start of the replay: the reference point of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InitialSample {
    /// Resident set size, in bytes.
    pub rss_bytes: Option<u64>,
    /// Peak resident set size so far, in bytes.
    pub max_rss_bytes: Option<u64>,
    /// The store's counters before the first operation.
    pub backend: BackendStats,
}

/// The first line of a stat file: run metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatHeader {
    /// Always [`STATS_FORMAT`].
    pub format: String,
    /// [`STATS_VERSION`] of the writer.
    pub version: u32,
    /// The trace replayed (as given by the caller, usually its path).
    pub trace: String,
    /// The store replayed into (as given by the caller, e.g. `memory` or `pack:/tmp/store`).
    pub store: String,
    /// Options of the replay.
    pub options: HeaderOptions,
    /// Host name of the machine.
    pub hostname: String,
    /// Start of the replay, Unix seconds.
    pub start_unix_s: f64,
    /// Start of the replay, RFC 3339 UTC.
    pub start_utc: String,
    /// Version of larch that wrote the file.
    pub larch_version: String,
    /// Resources at the start.
    pub initial: InitialSample,
}

/// The last line of a complete stat file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatEnd {
    /// Blocks replayed.
    pub blocks: u64,
    /// Operations applied, trailing ones included.
    pub ops: u64,
    /// Operations after the last commit (an incomplete block: applied, not in any block line).
    pub trailing_ops: u64,
    /// Wall time of the whole replay, in seconds.
    pub wall_s: f64,
    /// Garbage collection after the last block (replays with a GC schedule only), as a block's
    /// `gc`: what the GC hooks did after it (a GC started or waited for then) and the GC still
    /// running at the end, which the end waits for (in `finished` and `waited_s`, not in
    /// `wall_s`); a deferred GC that never started counts in `skipped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc: Option<BlockGc>,
    /// What the threads reading the trace's operations ahead did (`--read-ahead-ops` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ahead: Option<ReadAheadCounts>,
}

/// One line of a stat file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StatLine {
    /// The first line.
    Header(StatHeader),
    /// One line per block.
    Block(BlockStats),
    /// The last line, present when the replay finished.
    End(StatEnd),
}

/// Why a stat file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatsError {
    /// Reading or writing failed.
    #[error("stat file I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not valid JSON of a stat line.
    #[error("stat file line {line}: {source}")]
    Json {
        /// Line number, from 1.
        line: u64,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The file does not start with a header, or has a second one.
    #[error("stat file line {line}: {message}")]
    Structure {
        /// Line number, from 1.
        line: u64,
        /// What is wrong.
        message: &'static str,
    },
    /// The header names another format or a newer version.
    #[error("not a larch stat file (format {format:?}, version {version})")]
    Format {
        /// The header's format name.
        format: String,
        /// The header's version.
        version: u32,
    },
    /// A summary file has more blocks than the runs it is compared with, and cannot be cut.
    #[error("{path}: a summary of {blocks} blocks cannot be cut to the {common} blocks common to all runs")]
    CannotCut {
        /// The summary file.
        path: String,
        /// Its blocks.
        blocks: u64,
        /// Blocks common to all runs.
        common: u64,
    },
    /// A file is neither a stat file nor a summary.
    #[error("{path}: neither a larch stat file nor a summary (JSON: {source})")]
    NotARun {
        /// The file.
        path: String,
        /// Why it does not parse as a summary.
        source: serde_json::Error,
    },
}

/// Writes one line to a stat file with a single `write_all` (so that an unbuffered file costs one
/// system call per line); returns the number of bytes written.
pub fn write_line(out: &mut dyn Write, line: &StatLine) -> std::io::Result<u64> {
    let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    out.write_all(&bytes)?;
    Ok(bytes.len() as u64)
}

/// A whole stat file, read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatFile {
    /// The header.
    pub header: StatHeader,
    /// The block lines, in order.
    pub blocks: Vec<BlockStats>,
    /// The end line, if the replay finished.
    pub end: Option<StatEnd>,
}

/// Reads a stat file: header first, then block lines and possibly an end line. Blank lines are
/// skipped.
pub fn read_stat_file(input: impl BufRead) -> Result<StatFile, StatsError> {
    let mut header = None;
    let mut blocks = Vec::new();
    let mut end = None;
    for (number, line) in input.lines().enumerate() {
        let line_no = number as u64 + 1;
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: StatLine =
            serde_json::from_str(&line).map_err(|source| StatsError::Json { line: line_no, source })?;
        match parsed {
            StatLine::Header(h) => {
                if header.is_some() {
                    return Err(StatsError::Structure { line: line_no, message: "second header" });
                }
                if h.format != STATS_FORMAT || h.version > STATS_VERSION {
                    return Err(StatsError::Format { format: h.format, version: h.version });
                }
                header = Some(h);
            }
            StatLine::Block(block) if header.is_some() => blocks.push(block),
            StatLine::End(e) if header.is_some() => end = Some(e),
            StatLine::Block(_) | StatLine::End(_) => {
                return Err(StatsError::Structure { line: line_no, message: "line before the header" });
            }
        }
    }
    let header = header.ok_or(StatsError::Structure { line: 1, message: "no header" })?;
    Ok(StatFile { header, blocks, end })
}

/// Reads the stat file at `path`.
pub fn read_stat_path(path: &std::path::Path) -> Result<StatFile, StatsError> {
    let file = std::fs::File::open(path)?;
    read_stat_file(std::io::BufReader::new(file))
}
