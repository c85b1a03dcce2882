//! The integrity checker: checks every commit and every object reachable from it in one sweep of
//! the pack from its end down, recomputes every hash, checks every offset and record, and reports
//! all problems with statistics.

use super::frontier::{Frontier, Reached};
use crate::error::{FileKind, StoreError};
use crate::format::codec::{self, EntryCounts, RecordKind};
use crate::format::control::ControlState;
use crate::format::index::{self, ENTRY_LEN, INDEX_HEADER_LEN};
use crate::format::patch;
use crate::io::storage::Storage;
use crate::pack::reader::PackReader;
use larch_core::{ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, schema};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// One problem found by [`crate::Repo::fsck`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file holding the damaged data.
    pub file: FileKind,
    /// Offset of the damaged record (or field) in that file.
    pub offset: u64,
    /// The hash the object was expected to have, when known.
    pub hash: Option<Hash>,
    /// Offset of the record that refers to it, when any.
    pub parent: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} @ {}: {}", self.file, self.offset, self.what)?;
        if let Some(hash) = &self.hash {
            write!(f, " (hash {hash})")?;
        }
        if let Some(parent) = self.parent {
            write!(f, " (referenced from pack @ {parent})")?;
        }
        Ok(())
    }
}

/// Counts and bytes of one record kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindStats {
    /// Records.
    pub count: u64,
    /// Bytes, framing included.
    pub bytes: u64,
}

/// Statistics of the reachable part of a store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckStats {
    /// Commits in the index.
    pub commits: u64,
    /// Reachable records by kind.
    pub by_kind: BTreeMap<RecordKind, KindStats>,
    /// Contents stored inline (counted once per record holding them).
    pub inline_contents: u64,
    /// Bytes of inline contents.
    pub inline_bytes: u64,
    /// Names stored hex-packed.
    pub hex_names: u64,
    /// The largest directories: (entries, pack offset), largest first (at most 10).
    pub largest_directories: Vec<(u64, u64)>,
    /// The deepest directory nesting (the root is depth 1).
    pub max_depth: u32,
    /// Published pack length.
    pub pack_bytes: u64,
    /// Bytes of the pack no commit reaches (garbage, e.g. abandoned branches).
    pub unreachable_bytes: u64,
    /// The pack's chunk files: name, global start, global end (`docs/format.md` §3).
    pub chunk_files: Vec<(String, u64, u64)>,
    /// The GC segments: name, global range start and end, bytes of records kept.
    pub segment_files: Vec<(String, u64, u64, u64)>,
    /// The most records reached and not yet checked at one time: the check sweeps the pack
    /// from its end down and remembers nothing else per record; at most
    /// [`FsckOptions::max_pending`] of them (about 100 bytes each) wait in memory, the others
    /// in a temporary file.
    pub peak_pending: u64,
    /// References to records that waited in the temporary file (0: all fitted in memory).
    pub spilled_pending: u64,
}

/// Default of [`FsckOptions::max_pending`]: 1 M records reached and not checked yet in memory
/// (about 100 MiB).
pub const DEFAULT_FSCK_PENDING: usize = 1 << 20;

/// How [`crate::Repo::fsck_with`] bounds its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsckOptions {
    /// The most records reached and not checked yet that wait in memory ([`DEFAULT_FSCK_PENDING`]);
    /// past it, half of them (those the sweep reaches last) go to a temporary file.
    pub max_pending: usize,
    /// Where that temporary file is made ([`std::env::temp_dir`] by default); it has no name and
    /// is gone when the check ends.
    pub spill_dir: std::path::PathBuf,
}

impl Default for FsckOptions {
    fn default() -> FsckOptions {
        FsckOptions { max_pending: DEFAULT_FSCK_PENDING, spill_dir: std::env::temp_dir() }
    }
}

/// How far a running [`crate::Repo::fsck_with_progress`] is, for a progress bar: the check
/// sweeps the pack from its end down, so the bytes it has passed grow to the pack's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsckProgress {
    /// Bytes of the pack from its end down to the record the sweep checks next.
    pub swept_bytes: u64,
    /// The published pack's length (`swept_bytes` reaches it when the check ends).
    pub pack_bytes: u64,
}

/// The sweep reports its progress each time it has passed this share of the pack (1/512), and at
/// least [`PROGRESS_MIN_STEP`] bytes: a few hundred calls for any store.
const PROGRESS_STEPS: u64 = 512;

/// The smallest step between two progress reports.
const PROGRESS_MIN_STEP: u64 = 256 << 10;

/// A parent recorded as absent from the store (by hash only: the commit was imported without its
/// history). Not a problem: the store never held that commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbsentParent {
    /// The commit that names the parent.
    pub commit: Hash,
    /// Offset of that commit's record in the pack.
    pub offset: u64,
    /// The absent parent's hash.
    pub parent: Hash,
}

/// The result of an integrity check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Every problem found.
    pub problems: Vec<Problem>,
    /// Parents recorded as absent (not problems), in commit offset order.
    pub absent_parents: Vec<AbsentParent>,
    /// Parents that garbage collection removed (not problems), in commit offset order.
    pub collected_parents: Vec<AbsentParent>,
    /// What was walked.
    pub stats: FsckStats,
}

impl FsckReport {
    /// Whether no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for FsckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stats = &self.stats;
        writeln!(f, "commits: {}", stats.commits)?;
        writeln!(f, "pack: {} bytes ({} unreachable)", stats.pack_bytes, stats.unreachable_bytes)?;
        if let (Some(first), Some(last)) = (stats.chunk_files.first(), stats.chunk_files.last()) {
            writeln!(f, "chunks: {} files ({} to {})", stats.chunk_files.len(), first.0, last.0)?;
        }
        for (name, start, end, kept) in &stats.segment_files {
            writeln!(f, "segment {name}: range [{start}, {end}), {kept} bytes of records kept")?;
        }
        if !self.collected_parents.is_empty() {
            writeln!(
                f,
                "collected parents: {} (commits whose parent GC removed)",
                self.collected_parents.len()
            )?;
        }
        for (kind, kind_stats) in &stats.by_kind {
            let mean = kind_stats.bytes.checked_div(kind_stats.count).unwrap_or(0);
            writeln!(
                f,
                "  {:<13} {:>10} records {:>13} bytes ({} bytes/record)",
                kind.name(),
                kind_stats.count,
                kind_stats.bytes,
                mean
            )?;
        }
        writeln!(f, "inline contents: {} ({} bytes)", stats.inline_contents, stats.inline_bytes)?;
        writeln!(f, "hex-packed names: {}", stats.hex_names)?;
        writeln!(f, "max directory depth: {}", stats.max_depth)?;
        writeln!(
            f,
            "records waiting at most: {} ({} spilled to a temporary file)",
            stats.peak_pending, stats.spilled_pending
        )?;
        let largest: Vec<String> =
            stats.largest_directories.iter().map(|(len, offset)| format!("{len} @ {offset}")).collect();
        writeln!(f, "largest directories: {}", largest.join(", "))?;
        for absent in &self.absent_parents {
            writeln!(
                f,
                "absent parent: commit {} (pack @ {}) has parent {}, not in this store (imported history)",
                absent.commit, absent.offset, absent.parent
            )?;
        }
        if self.is_clean() {
            writeln!(f, "no problems found")
        } else {
            writeln!(f, "{} problem(s):", self.problems.len())?;
            for problem in &self.problems {
                writeln!(f, "  {problem}")?;
            }
            Ok(())
        }
    }
}

enum Decoded {
    Full(NodeBody),
    Patch(patch::Patch),
}

/// How a record is reached: the kind of object its referrer expects (`role`: 0 contents, 1 a
/// directory, 2 + d an inode of depth d).
const CONTENTS: u8 = 0;
const DIRECTORY: u8 = 1;

fn inode_role(depth: u8) -> u8 {
    depth.saturating_add(2)
}

/// The check, as one sweep of the pack from its end down: every pointer of a record points below
/// it (`docs/format.md` §3.3, `back` ≥ 1), so when the sweep reaches an offset, every reference
/// to that record has been seen. The records reached and not yet checked wait in `pending`,
/// where the references to one record meet (and are compared); nothing is remembered of a
/// record once it is checked. The memory is that frontier (bounded by [`FsckOptions`], the rest
/// spilled to a temporary file), not the store: no set of visited records, no decoded directory
/// kept beyond the reader's bounded cache.
struct Checker<'a> {
    reader: &'a PackReader,
    /// The commit index: hash to record offset.
    commits: &'a HashMap<Hash, u64>,
    report: FsckReport,
    /// Records reached and not checked yet, by offset (the sweep takes the highest first).
    pending: Frontier,
    reachable_bytes: u64,
    /// The oldest kept record of a collected store (0: never collected).
    keep_from: u64,
    /// The frontier's temporary file failed: the sweep stops.
    stopped: bool,
    /// Told how far the sweep is ([`FsckProgress`]).
    progress: &'a mut dyn FnMut(FsckProgress),
    /// The published pack's length.
    pack_bytes: u64,
    /// The sweep reports its progress again once it is below this offset.
    report_below: u64,
}

/// Another reference `other` to a record reached as `seen`: the same hash and kind, or what is
/// wrong, with the reference it is said of. The reference from the highest record stands for the
/// record (the first one the sweep made, spilled or not: the report does not depend on the
/// frontier's bound); its children are followed if any reference follows them.
fn meet(seen: &mut Reached, mut other: Reached) -> Option<(&'static str, Reached)> {
    if other.parent > seen.parent {
        std::mem::swap(seen, &mut other);
    }
    if seen.hash != other.hash {
        Some(("referenced with two different hashes", other))
    } else if seen.role != other.role {
        Some(("referenced as two different kinds of object", other))
    } else {
        seen.full |= other.full;
        seen.depth = seen.depth.max(other.depth);
        None
    }
}

fn problem_of(error: StoreError, hash: Option<Hash>, parent: Option<u64>, fallback: u64) -> Problem {
    let (file, offset) = match &error {
        StoreError::Corrupt { file, offset, .. } | StoreError::Io { file, offset, .. } => (*file, *offset),
        StoreError::MissingFile { file, .. } => (*file, 0),
        _ => (FileKind::Pack, fallback),
    };
    Problem { file, offset, hash, parent, what: error.to_string() }
}

impl Checker<'_> {
    fn problem(&mut self, offset: u64, hash: Option<Hash>, parent: Option<u64>, what: String) {
        self.report.problems.push(Problem { file: FileKind::Pack, offset, hash, parent, what });
    }

    fn count(&mut self, kind: RecordKind, bytes: u64) {
        let entry = self.report.stats.by_kind.entry(kind).or_default();
        entry.count += 1;
        entry.bytes += bytes;
        self.reachable_bytes += bytes;
    }

    /// Records a reference from the record at `parent` to the one at `offset`: a new pending
    /// record, or one more reference to a pending one (checked to name the same hash and kind).
    fn reach(&mut self, offset: u64, reached: Reached) {
        let parent = reached.parent;
        if offset >= parent {
            // The codec never decodes such a pointer; followed, it would stall the sweep.
            let what = format!("a pointer to offset {offset}, not below its record");
            return self.problem(parent, Some(reached.hash), None, what);
        }
        if let Some(seen) = self.pending.get_mut(offset) {
            if let Some((what, other)) = meet(seen, reached) {
                self.problem(offset, Some(other.hash), Some(other.parent), what.to_string());
            }
            return;
        }
        if let Err(e) = self.pending.push(offset, reached) {
            self.spill_failed(e);
        }
    }

    /// The temporary file of the frontier failed: reported as a problem of the check itself
    /// (not damage of the store), which stops.
    fn spill_failed(&mut self, error: std::io::Error) {
        let what = format!(
            "the check's temporary file failed ({error}): not damage of the store, the check stopped"
        );
        self.problem(0, None, None, what);
        self.stopped = true;
    }

    /// Reports the progress of a sweep about to check the record at `offset`, if it has passed a
    /// step since the last report.
    fn report_progress(&mut self, offset: u64) {
        if offset < self.report_below {
            let step = (self.pack_bytes / PROGRESS_STEPS).max(PROGRESS_MIN_STEP);
            self.report_below = offset.saturating_sub(step);
            let swept_bytes = self.pack_bytes.saturating_sub(offset);
            (self.progress)(FsckProgress { swept_bytes, pack_bytes: self.pack_bytes });
        }
    }

    /// Checks the records reachable from the commits, highest offset first (see [`Checker`]).
    fn sweep(&mut self, mut commits: Vec<(Hash, u64)>) {
        loop {
            if self.stopped {
                return;
            }
            let next_commit = commits.last().map(|(_, offset)| *offset);
            let next_record = self.pending.next_offset();
            if let Some(next) = next_commit.max(next_record) {
                self.report_progress(next);
            }
            match (next_commit, next_record) {
                (None, None) => return,
                (Some(commit), record) if record.is_none_or(|record| commit >= record) => {
                    if let Some((hash, offset)) = commits.pop() {
                        self.commit(hash, offset);
                    }
                }
                _ => match self.pending.pop() {
                    Err(e) => self.spill_failed(e),
                    Ok(None) => {}
                    Ok(Some((offset, mut reached, others))) => {
                        // The references to this record that waited apart (spilled) meet now.
                        for other in others {
                            if let Some((what, other)) = meet(&mut reached, other) {
                                self.problem(offset, Some(other.hash), Some(other.parent), what.to_string());
                            }
                        }
                        if reached.role == CONTENTS {
                            self.contents(offset, reached.hash, reached.parent);
                        } else {
                            self.node(offset, reached);
                        }
                    }
                },
            }
        }
    }

    fn contents(&mut self, offset: u64, hash: Hash, parent: u64) {
        let read = self.reader.with_record(offset, |kind, body| {
            Ok((kind, (kind == RecordKind::Contents).then(|| schema::contents_hash(body))))
        });
        match read {
            Err(e) => self.report.problems.push(problem_of(e, Some(hash), Some(parent), offset)),
            Ok(((kind, actual), total)) => {
                self.count(kind, total);
                match actual {
                    None => self.problem(
                        offset,
                        Some(hash),
                        Some(parent),
                        format!("a {} record, not contents", kind.name()),
                    ),
                    Some(actual) if actual != hash => {
                        self.problem(offset, Some(hash), Some(parent), format!("contents hash is {actual}"))
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// Checks the directory or inode record at `offset`, and reaches its children (and the base
    /// of a patch).
    fn node(&mut self, offset: u64, reached: Reached) {
        let Reached { hash, parent, depth, role, full } = reached;
        let mut counts = EntryCounts::default();
        let store = self.reader.store();
        let read = self.reader.with_record(offset, |kind, body| {
            Ok((
                kind,
                match kind {
                    RecordKind::PatchEntries | RecordKind::PatchTree => {
                        patch::decode(kind, body, offset, &mut counts, store).map(Decoded::Patch)
                    }
                    _ => codec::decode_node_body(kind, body, offset, &mut counts, store).map(Decoded::Full),
                },
            ))
        });
        let (kind, decoded, total) = match read {
            Ok(((kind, Ok(decoded)), total)) => (kind, decoded, total),
            Ok(((_, Err(e)), _)) | Err(e) => {
                self.report.problems.push(problem_of(e, Some(hash), Some(parent), offset));
                return;
            }
        };
        self.count(kind, total);
        let body = match decoded {
            Decoded::Full(body) => body,
            Decoded::Patch(patch) => {
                // The base is checked as an object of its own (its full hash against the one this
                // patch names), then the patch is applied to it.
                let (base_hash, base_offset) = patch.base();
                let base_full = base_offset >= self.keep_from;
                let base = Reached { hash: base_hash, parent: offset, depth, role, full: base_full };
                self.reach(base_offset, base);
                let chain = patch.chain();
                let applied = self.reader.node_chained(base_offset, &base_hash, chain - 1).and_then(
                    |(base, base_chain)| {
                        // As the reader requires: the base is exactly one patch shorter.
                        if base_chain != chain - 1 {
                            return Err(StoreError::corrupt(
                                FileKind::Pack,
                                offset,
                                format!("a patch of chain {chain} over a base of chain {base_chain}"),
                            ));
                        }
                        patch::apply(base.body(), patch, offset)
                    },
                );
                match applied {
                    Ok(body) => body,
                    Err(e) => {
                        self.report.problems.push(problem_of(e, Some(hash), Some(parent), offset));
                        return;
                    }
                }
            }
        };
        self.report.stats.inline_contents += counts.inline;
        self.report.stats.inline_bytes += counts.inline_bytes;
        self.report.stats.hex_names += counts.hex_names;
        let shape_ok = match (role, &body) {
            (DIRECTORY, NodeBody::Flat(_)) => true,
            (DIRECTORY, NodeBody::Tree(tree)) => tree.depth == 0,
            (DIRECTORY, NodeBody::Values(_)) => false,
            (_, NodeBody::Values(_)) => role > inode_role(0),
            (_, NodeBody::Tree(tree)) => inode_role(tree.depth) == role,
            _ => false,
        };
        if !shape_ok {
            self.problem(
                offset,
                Some(hash),
                Some(parent),
                format!("a {} record is misplaced here", kind.name()),
            );
        }
        if role == DIRECTORY {
            self.report.stats.max_depth = self.report.stats.max_depth.max(depth);
            let entries = match &body {
                NodeBody::Flat(entries) => entries.len() as u64,
                NodeBody::Tree(tree) => tree.length,
                NodeBody::Values(entries) => entries.len() as u64,
            };
            let largest = &mut self.report.stats.largest_directories;
            largest.push((entries, offset));
            largest.sort_unstable_by(|a, b| b.cmp(a));
            largest.truncate(10);
        }
        if !full {
            // A base only: decoded, hashed below, its children not followed.
            let actual = Node::new(body).hash();
            if actual != hash {
                self.problem(offset, Some(hash), Some(parent), format!("node hash is {actual}"));
            }
            return;
        }
        if let NodeBody::Tree(tree) = &body {
            // The length an inode claims is the sum of its children's (read here through the
            // cache; each child is checked as an object of its own later).
            let mut sum = Some(0u64);
            for (_, child) in &tree.children {
                if let NodeRef::Stored { hash: child_hash, key } = child {
                    let length = self.reader.node(key.offset(), child_hash).ok().map(|child| child.length());
                    sum = sum.zip(length).map(|(sum, length)| sum.saturating_add(length));
                }
            }
            if let Some(sum) = sum.filter(|sum| *sum != tree.length) {
                self.problem(
                    offset,
                    Some(hash),
                    Some(parent),
                    format!("an inode of length {} whose children hold {sum} entries", tree.length),
                );
            }
        }
        let node = Node::new(body);
        let actual = node.hash();
        if actual != hash {
            self.problem(offset, Some(hash), Some(parent), format!("node hash is {actual}"));
        }
        match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                for (_, entry) in entries {
                    let (child, child_hash, role, depth) = match entry {
                        Entry::Node(NodeRef::Stored { hash, key }) => {
                            (key.offset(), *hash, DIRECTORY, depth.saturating_add(1))
                        }
                        Entry::Contents(ContentsRef::Stored { hash, key }) => {
                            (key.offset(), *hash, CONTENTS, 0)
                        }
                        _ => continue,
                    };
                    self.reach(child, Reached { hash: child_hash, parent: offset, depth, role, full: true });
                }
            }
            NodeBody::Tree(tree) => {
                let role = inode_role(tree.depth.saturating_add(1));
                for (_, child) in &tree.children {
                    if let NodeRef::Stored { hash: child_hash, key } = child {
                        let reached = Reached { hash: *child_hash, parent: offset, depth, role, full: true };
                        self.reach(key.offset(), reached);
                    }
                }
            }
        }
    }

    fn commit(&mut self, hash: Hash, offset: u64) {
        let read = self.reader.with_record(offset, |kind, body| match kind {
            RecordKind::Commit => codec::decode_commit(body, offset),
            other => Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("a {} record, not a commit", other.name()),
            )),
        });
        let (data, total) = match read {
            Ok(read) => read,
            Err(e) => {
                self.report.problems.push(problem_of(e, Some(hash), None, offset));
                return;
            }
        };
        self.count(RecordKind::Commit, total);
        let actual = data.hash();
        if actual != hash {
            self.problem(offset, Some(hash), None, format!("commit record hashes to {actual}"));
        }
        for (parent, parent_offset) in &data.parents {
            let Some(parent_offset) = parent_offset else {
                self.report.absent_parents.push(AbsentParent { commit: hash, offset, parent: *parent });
                continue;
            };
            if *parent_offset < self.keep_from {
                self.report.collected_parents.push(AbsentParent { commit: hash, offset, parent: *parent });
                continue;
            }
            if self.commits.get(parent).copied() != Some(*parent_offset) {
                self.problem(
                    *parent_offset,
                    Some(*parent),
                    Some(offset),
                    "parent commit not in the index at this offset".into(),
                );
            }
        }
        let tree = Reached { hash: data.tree_hash, parent: offset, depth: 1, role: DIRECTORY, full: true };
        self.reach(data.tree_offset, tree);
    }
}

/// Checks the whole store as of `state`: every commit of `index` (hash to record offset), every
/// reachable object through `reader`, every hash and offset. Never stops at the first problem.
/// Its memory is bounded by the reader's cache and the records reached and not checked yet
/// (at most [`FsckOptions::max_pending`] in memory, the rest in a temporary file; reported as
/// [`FsckStats::peak_pending`]), not by the store's size.
pub(crate) fn check(
    reader: &PackReader,
    state: &ControlState,
    index: &HashMap<Hash, u64>,
    index_file: &dyn Storage,
    options: &FsckOptions,
    progress: &mut dyn FnMut(FsckProgress),
) -> FsckReport {
    let mut checker = Checker {
        reader,
        commits: index,
        report: FsckReport::default(),
        pending: Frontier::new(options.max_pending, options.spill_dir.clone()),
        reachable_bytes: 0,
        keep_from: state.keep_from,
        stopped: false,
        progress,
        pack_bytes: state.pack_end,
        report_below: u64::MAX,
    };
    let mut commits: Vec<(Hash, u64)> = index.iter().map(|(hash, offset)| (*hash, *offset)).collect();
    commits.sort_unstable_by_key(|(_, offset)| *offset);
    checker.report.stats.commits = commits.len() as u64;
    checker.sweep(commits);
    (checker.progress)(FsckProgress { swept_bytes: state.pack_end, pack_bytes: state.pack_end });
    checker.report.stats.peak_pending = checker.pending.peak;
    checker.report.stats.spilled_pending = checker.pending.spilled_total;
    // The sweep reports problems from the end of the pack down; the report lists them by offset,
    // as a walk from the oldest commit did (problems of one record keep their order).
    checker.report.problems.sort_by_key(|problem| problem.offset);
    checker.report.absent_parents.sort_by_key(|absent| absent.offset);
    checker.report.collected_parents.sort_by_key(|absent| absent.offset);
    for (name, (hash, offset)) in &state.branches {
        if index.get(hash).copied() != Some(*offset) {
            checker.report.problems.push(Problem {
                file: FileKind::Control,
                offset: 0,
                hash: Some(*hash),
                parent: None,
                what: format!("branch {name:?} points to a commit not in the index at offset {offset}"),
            });
        }
    }
    let pack_bytes = state.pack_end;
    checker.report.stats.pack_bytes = pack_bytes;
    let layout = reader.layout();
    for (name, what) in layout.check_files(pack_bytes) {
        checker.report.problems.push(Problem {
            file: FileKind::Pack,
            offset: 0,
            hash: None,
            parent: None,
            what: format!("file {name}: {what}"),
        });
    }
    checker.report.stats.chunk_files = layout.chunk_files(pack_bytes);
    checker.report.stats.segment_files = layout.segment_files();
    checker.report.stats.unreachable_bytes =
        layout.stored_bytes(pack_bytes).saturating_sub(checker.reachable_bytes);
    check_collected_entries(index_file, state, index, &mut checker.report);
    checker.report
}

/// Bytes of the commit index read at a time by [`check_collected_entries`]: whole entries.
const INDEX_PIECE: usize = ENTRY_LEN * 24_000;

/// Checks the entries a GC kept in the commit index only to answer "collected" for the hashes of
/// collected commits (before `state.index_keep_from`, not loaded by an open): each entry's
/// checksum, its offset below the oldest kept record (`state.keep_from`) and above the entry
/// before it, and no hash that is also a kept commit's.
fn check_collected_entries(
    index_file: &dyn Storage,
    state: &ControlState,
    index: &HashMap<Hash, u64>,
    report: &mut FsckReport,
) {
    let problem = |report: &mut FsckReport, offset: u64, hash: Option<Hash>, what: String| {
        report.problems.push(Problem { file: FileKind::Index, offset, hash, parent: None, what });
    };
    let end = state.index_keep_from;
    if end <= INDEX_HEADER_LEN {
        return;
    }
    if !(end - INDEX_HEADER_LEN).is_multiple_of(ENTRY_LEN as u64) {
        let what = format!("the kept entries start at {end}, not at an entry boundary");
        return problem(report, end, None, what);
    }
    let mut previous: Option<u64> = None;
    let mut at = INDEX_HEADER_LEN;
    let mut bytes = Vec::new();
    while at < end {
        let take = usize::try_from(end - at).unwrap_or(INDEX_PIECE).min(INDEX_PIECE);
        bytes.resize(take, 0);
        if let Err(e) = index_file.read_at(at, &mut bytes) {
            return problem(report, at, None, format!("reading the collected commits' entries: {e}"));
        }
        for (i, entry) in bytes.chunks_exact(ENTRY_LEN).enumerate() {
            let entry_at = at + (i * ENTRY_LEN) as u64;
            let (hash, offset) =
                match index::decode_entries(entry, entry_at).map(|entries| entries.first().copied()) {
                    Ok(Some(decoded)) => decoded,
                    Ok(None) => continue,
                    Err(e) => {
                        problem(report, entry_at, None, format!("a collected commit's entry: {e}"));
                        continue;
                    }
                };
            if offset >= state.keep_from {
                let what = format!(
                    "a collected commit's entry names offset {offset}, at or above the oldest kept record {}",
                    state.keep_from
                );
                problem(report, entry_at, Some(hash), what);
            }
            if previous.is_some_and(|before| offset <= before) {
                let what = format!(
                    "a collected commit's entry names offset {offset}, not above the entry before it"
                );
                problem(report, entry_at, Some(hash), what);
            }
            if index.contains_key(&hash) {
                problem(
                    report,
                    entry_at,
                    Some(hash),
                    "a collected commit's entry names a kept commit".into(),
                );
            }
            previous = Some(offset);
        }
        at += take as u64;
    }
}
