//! `trace info`: streams a trace (either format) and summarises it: operation counts, blocks,
//! value sizes, header metadata, the final commit hash, and the largest directories of the last
//! committed tree (found by applying the operations to in-memory trees).

use crate::format::{OpSource, TraceError, TraceFormat, open_trace};
use crate::op::{ContextId, Op, OpKind, Scoped};
use larch_core::{Hash, Kind, Tree};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::path::Path;

/// Upper bounds (inclusive) of the value-size buckets of `docs/workload.md` §4, plus a bucket
/// for empty values in front and one for larger values at the end.
pub const VALUE_SIZE_BOUNDS: [u64; 12] = [0, 1, 3, 7, 15, 31, 64, 128, 256, 512, 4096, 256 << 10];

/// Labels of the value-size buckets, one per bound and one for the overflow bucket.
pub const VALUE_SIZE_LABELS: [&str; 13] = [
    "0", "1", "2-3", "4-7", "8-15", "16-31", "32-64", "65-128", "129-256", "257-512", "513B-4K", "4K-256K",
    ">256K",
];

/// Options of [`trace_info_with`].
#[derive(Clone, Debug)]
pub struct InfoOptions {
    /// How many of the largest directories to report (0: do not apply the operations at all).
    pub largest_dirs: usize,
    /// How many recent commits to keep in memory for checkouts.
    pub recent_commits: usize,
}

impl Default for InfoOptions {
    fn default() -> InfoOptions {
        InfoOptions { largest_dirs: 10, recent_commits: 8 }
    }
}

/// A directory and its number of entries.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirSize {
    /// Entries (contents and sub-directories).
    pub entries: u64,
    /// Its path, steps joined by `/` (lossy UTF-8); empty for the root.
    pub path: String,
}

/// The summary of a trace.
#[derive(Clone, Debug)]
pub struct TraceInfo {
    /// The format.
    pub format: TraceFormat,
    /// Header metadata (larch traces).
    pub metadata: Vec<(String, String)>,
    /// Bytes read.
    pub bytes: u64,
    /// Operations, in total.
    pub ops: u64,
    /// Operations per kind, in the order of [`OpKind::ALL`].
    pub op_counts: [u64; 8],
    /// Blocks (= commits).
    pub blocks: u64,
    /// Reads (`find`, `mem`, `mem_tree`) whose recorded result is "not found".
    pub read_misses: u64,
    /// Number of added values per bucket of [`VALUE_SIZE_LABELS`].
    pub value_sizes: [u64; 13],
    /// Sum of the sizes of added values.
    pub value_bytes: u64,
    /// Largest added value.
    pub value_max: u64,
    /// Hash of the last commit.
    pub final_commit: Option<Hash>,
    /// Where an Irmin trace's incomplete last frame starts, if any.
    pub truncated_tail: Option<u64>,
    /// Most contexts alive at once while applying the operations.
    pub max_live_contexts: usize,
    /// Reads whose result, applied to the in-memory trees, differs from the recorded one.
    pub read_mismatches: u64,
    /// The largest directories of the last committed tree, largest first.
    pub largest_dirs: Vec<DirSize>,
    /// Why the operations could not all be applied (then `largest_dirs` may be empty or stale).
    pub apply_note: Option<String>,
}

impl TraceInfo {
    /// The count of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        OpKind::ALL.iter().position(|k| *k == kind).and_then(|i| self.op_counts.get(i)).copied().unwrap_or(0)
    }
}

/// The bucket of a value of `size` bytes.
pub fn value_size_bucket(size: u64) -> usize {
    VALUE_SIZE_BOUNDS.iter().position(|bound| size <= *bound).unwrap_or(VALUE_SIZE_BOUNDS.len())
}

/// Applies operations to in-memory trees: one per live context, and the last few commits.
struct Applier {
    contexts: HashMap<ContextId, Tree>,
    recent: VecDeque<(Hash, Tree)>,
    keep_recent: usize,
    last_commit: Option<Tree>,
    max_live: usize,
    mismatches: u64,
}

impl Applier {
    fn new(keep_recent: usize) -> Applier {
        let mut contexts = HashMap::new();
        contexts.insert(0, Tree::empty());
        Applier {
            contexts,
            recent: VecDeque::new(),
            keep_recent: keep_recent.max(1),
            last_commit: None,
            max_live: 1,
            mismatches: 0,
        }
    }

    fn input(&mut self, scoped: &Scoped<ContextId>) -> Result<Tree, String> {
        let id = scoped.value();
        let tree =
            if scoped.is_forget() { self.contexts.remove(&id) } else { self.contexts.get(&id).cloned() };
        tree.ok_or_else(|| format!("context {id} is not alive"))
    }

    fn output(&mut self, scoped: &Scoped<ContextId>, tree: Tree) {
        if !scoped.is_forget() {
            self.contexts.insert(scoped.value(), tree);
            self.max_live = self.max_live.max(self.contexts.len());
        }
    }

    fn apply(&mut self, op: &Op, row: u64) -> Result<Result<(), String>, TraceError> {
        let tree_err = |source| TraceError::Tree { row, source };
        match op {
            Op::Checkout { commit, out } => {
                let Some((_, tree)) = self.recent.iter().find(|(hash, _)| *hash == commit.value()) else {
                    return Ok(Err(format!(
                        "checkout of {} (not among the last commits kept)",
                        commit.value()
                    )));
                };
                let tree = tree.clone();
                self.output(out, tree);
            }
            Op::Add { path, value, input, out } => {
                let mut tree = match self.input(input) {
                    Ok(tree) => tree,
                    Err(reason) => return Ok(Err(reason)),
                };
                tree.add(&path.steps(), value.clone()).map_err(tree_err)?;
                self.output(out, tree);
            }
            Op::Remove { path, input, out } => {
                let mut tree = match self.input(input) {
                    Ok(tree) => tree,
                    Err(reason) => return Ok(Err(reason)),
                };
                tree.remove(&path.steps()).map_err(tree_err)?;
                self.output(out, tree);
            }
            Op::Copy { from, to, input, out } => {
                let mut tree = match self.input(input) {
                    Ok(tree) => tree,
                    Err(reason) => return Ok(Err(reason)),
                };
                if !tree.copy(&from.steps(), &to.steps()).map_err(tree_err)? {
                    return Ok(Err("copy from a missing path".to_owned()));
                }
                self.output(out, tree);
            }
            Op::Find { path, found, input }
            | Op::Mem { path, found, input }
            | Op::MemTree { path, found, input } => {
                let tree = match self.input(input) {
                    Ok(tree) => tree,
                    Err(reason) => return Ok(Err(reason)),
                };
                let actual = match op {
                    Op::MemTree { .. } => tree.mem_tree(&path.steps()),
                    _ => tree.mem(&path.steps()),
                }
                .map_err(tree_err)?;
                self.mismatches += u64::from(actual != *found);
            }
            Op::Commit { hash, input, .. } => {
                let tree = match self.input(input) {
                    Ok(tree) => tree,
                    Err(reason) => return Ok(Err(reason)),
                };
                self.recent.retain(|(recent, _)| *recent != hash.value());
                self.recent.push_back((hash.value(), tree.clone()));
                while self.recent.len() > self.keep_recent {
                    self.recent.pop_front();
                }
                self.last_commit = Some(tree);
            }
        }
        Ok(Ok(()))
    }
}

/// Paths of directories are shown up to about this many bytes, then end with [`ELIDED`].
const MAX_SHOWN_PATH: usize = 1024;
/// The end of a path shown elided.
const ELIDED: &str = "/…";

/// The `limit` largest directories of `tree`, largest first (ties by path). Paths longer than
/// about 1 KiB are shown elided (ending in `/…`).
pub fn largest_directories(tree: &Tree, limit: usize) -> Result<Vec<DirSize>, larch_core::TreeError> {
    let mut heap: BinaryHeap<std::cmp::Reverse<DirSize>> = BinaryHeap::new();
    let mut stack: Vec<(String, Tree)> = vec![(String::new(), tree.clone())];
    let none: &[&[u8]] = &[];
    while let Some((path, dir)) = stack.pop() {
        if dir.kind() != Kind::Node {
            continue;
        }
        let entries = dir.list(none, 0, None)?;
        let size = DirSize { entries: entries.len() as u64, path: path.clone() };
        if limit > 0 {
            heap.push(std::cmp::Reverse(size));
            if heap.len() > limit {
                heap.pop();
            }
        }
        for (name, sub) in entries {
            if sub.kind() == Kind::Node {
                let child = if path.len() >= MAX_SHOWN_PATH {
                    // Deep below a long path: the shown path stops (else a deep chain of
                    // directories would cost time and memory quadratic in its depth).
                    if path.ends_with(ELIDED) { path.clone() } else { format!("{path}{ELIDED}") }
                } else {
                    let step = String::from_utf8_lossy(name.as_bytes());
                    if path.is_empty() { step.into_owned() } else { format!("{path}/{step}") }
                };
                stack.push((child, sub));
            }
        }
    }
    let mut dirs: Vec<DirSize> = heap.into_iter().map(|std::cmp::Reverse(size)| size).collect();
    dirs.sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.path.cmp(&b.path)));
    Ok(dirs)
}

/// Summarises the trace read by `source`.
pub fn trace_info_with(source: &mut dyn OpSource, options: &InfoOptions) -> Result<TraceInfo, TraceError> {
    let mut info = TraceInfo {
        format: source.format(),
        metadata: source.metadata().to_vec(),
        bytes: 0,
        ops: 0,
        op_counts: [0; 8],
        blocks: 0,
        read_misses: 0,
        value_sizes: [0; 13],
        value_bytes: 0,
        value_max: 0,
        final_commit: None,
        truncated_tail: None,
        max_live_contexts: 0,
        read_mismatches: 0,
        largest_dirs: Vec::new(),
        apply_note: None,
    };
    let mut applier = (options.largest_dirs > 0).then(|| Applier::new(options.recent_commits));
    for op in &mut *source {
        let op = op?;
        let row = info.ops;
        info.ops += 1;
        let kind = op.kind();
        if let Some(slot) =
            OpKind::ALL.iter().position(|k| *k == kind).and_then(|i| info.op_counts.get_mut(i))
        {
            *slot += 1;
        }
        match &op {
            Op::Add { value, .. } => {
                let size = value.len() as u64;
                if let Some(slot) = info.value_sizes.get_mut(value_size_bucket(size)) {
                    *slot += 1;
                }
                info.value_bytes += size;
                info.value_max = info.value_max.max(size);
            }
            Op::Find { found, .. } | Op::Mem { found, .. } | Op::MemTree { found, .. } => {
                info.read_misses += u64::from(!found);
            }
            Op::Commit { hash, .. } => {
                info.blocks += 1;
                info.final_commit = Some(hash.value());
            }
            _ => {}
        }
        if let Some(active) = applier.as_mut()
            && let Err(reason) = active.apply(&op, row)?
        {
            info.apply_note = Some(format!("row {row}: {reason}; stopped applying operations"));
            info.max_live_contexts = active.max_live;
            info.read_mismatches = active.mismatches;
            applier = None;
        }
    }
    info.bytes = source.offset();
    info.truncated_tail = source.truncated_tail();
    if let Some(active) = applier {
        info.max_live_contexts = active.max_live;
        info.read_mismatches = active.mismatches;
        if let Some(tree) = &active.last_commit {
            info.largest_dirs = largest_directories(tree, options.largest_dirs)
                .map_err(|source| TraceError::Tree { row: info.ops, source })?;
        }
    }
    Ok(info)
}

/// Summarises the trace file at `path` (either format) with the default options.
pub fn trace_info(path: &Path) -> Result<TraceInfo, TraceError> {
    let mut source = open_trace(path)?;
    trace_info_with(&mut *source, &InfoOptions::default()).map_err(|err| err.in_file(path))
}

impl fmt::Display for TraceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "format:      {} ({} bytes)", self.format, self.bytes)?;
        for (key, value) in &self.metadata {
            writeln!(f, "  {key}: {value}")?;
        }
        writeln!(f, "operations:  {} in {} blocks", self.ops, self.blocks)?;
        for (kind, count) in OpKind::ALL.iter().zip(self.op_counts) {
            let share = if self.ops == 0 { 0.0 } else { 100.0 * count as f64 / self.ops as f64 };
            writeln!(f, "  {:<9} {count:>12} {share:6.2}%", kind.name())?;
        }
        writeln!(f, "read misses: {} (recorded as not found)", self.read_misses)?;
        let adds = self.count(OpKind::Add);
        writeln!(f, "value sizes: {} bytes added, largest {} bytes", self.value_bytes, self.value_max)?;
        for (label, count) in VALUE_SIZE_LABELS.iter().zip(self.value_sizes) {
            let share = if adds == 0 { 0.0 } else { 100.0 * count as f64 / adds as f64 };
            writeln!(f, "  {label:<9} {count:>12} {share:6.2}%")?;
        }
        match &self.final_commit {
            Some(hash) => writeln!(f, "final commit: {hash}")?,
            None => writeln!(f, "final commit: none")?,
        }
        if let Some(offset) = self.truncated_tail {
            writeln!(f, "truncated tail: incomplete last frame at offset {offset} (ignored, as Irmin does)")?;
        }
        writeln!(f, "live contexts: at most {}", self.max_live_contexts)?;
        if self.read_mismatches > 0 {
            writeln!(
                f,
                "read mismatches: {} (recorded result differs from the applied trees)",
                self.read_mismatches
            )?;
        }
        if let Some(note) = &self.apply_note {
            writeln!(f, "directories: unavailable ({note})")?;
        } else if !self.largest_dirs.is_empty() {
            writeln!(f, "largest directories of the last commit:")?;
            for dir in &self.largest_dirs {
                let path = if dir.path.is_empty() { "/" } else { &dir.path };
                writeln!(f, "  {:>10}  {path}", dir.entries)?;
            }
        }
        Ok(())
    }
}
