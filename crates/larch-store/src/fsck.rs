//! The integrity checker: walks every commit and every object reachable from it, recomputes every
//! hash, checks every offset and record, and reports all problems with statistics.

use crate::codec::{self, EntryCounts, RecordKind};
use crate::error::{FileKind, Result, StoreError};
use crate::patch;
use crate::repo::Repo;
use larch_core::{ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, schema};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

/// One problem found by [`Repo::fsck`].
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
}

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

/// Checks the store at `path` (opened read-only).
pub fn fsck(path: impl AsRef<Path>) -> Result<FsckReport> {
    Ok(Repo::open_read_only(path)?.fsck())
}

enum Decoded {
    Full(NodeBody),
    Patch(patch::Patch),
}

#[derive(Clone, Copy)]
enum Expect {
    Directory,
    Inode(u8),
}

struct Checker<'a> {
    repo: &'a Repo,
    report: FsckReport,
    /// Offsets visited, with a 64-bit prefix of the hash they were reached with (the full hash
    /// would double the memory of a check of millions of objects).
    visited: HashMap<u64, u64, std::hash::BuildHasherDefault<crate::writer::AddressHasher>>,
    reachable_bytes: u64,
}

fn problem_of(error: StoreError, hash: Option<Hash>, parent: Option<u64>, fallback: u64) -> Problem {
    let (file, offset) = match &error {
        StoreError::Corrupt { file, offset, .. } | StoreError::Io { file, offset, .. } => (*file, *offset),
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

    /// Returns false when already visited (after checking the hash agrees).
    fn first_visit(&mut self, offset: u64, hash: Hash, parent: u64) -> bool {
        let prefix = hash.as_bytes().first_chunk::<8>().map_or(0, |bytes| u64::from_le_bytes(*bytes));
        match self.visited.get(&offset) {
            Some(seen) if *seen != prefix => {
                let what = "referenced with two different hashes".to_string();
                self.problem(offset, Some(hash), Some(parent), what);
                false
            }
            Some(_) => false,
            None => {
                self.visited.insert(offset, prefix);
                true
            }
        }
    }

    fn contents(&mut self, offset: u64, hash: Hash, parent: u64) {
        if !self.first_visit(offset, hash, parent) {
            return;
        }
        let read = self.repo.reader().with_record(offset, |kind, body| {
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

    fn node(&mut self, offset: u64, hash: Hash, parent: u64, expect: Expect, depth: u32) {
        if !self.first_visit(offset, hash, parent) {
            return;
        }
        let mut counts = EntryCounts::default();
        let read = self.repo.reader().with_record(offset, |kind, body| {
            Ok((
                kind,
                match kind {
                    RecordKind::PatchEntries | RecordKind::PatchTree => {
                        patch::decode(kind, body, offset, &mut counts).map(Decoded::Patch)
                    }
                    _ => codec::decode_node_body(kind, body, offset, &mut counts).map(Decoded::Full),
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
                // The base is checked as an object of its own, then the patch is applied to it.
                let (base_hash, base_offset) = patch.base();
                self.node(base_offset, base_hash, offset, expect, depth);
                let applied = self
                    .repo
                    .reader()
                    .node_chained(base_offset, &base_hash, patch.chain() - 1)
                    .and_then(|(base, _)| patch::apply(base.body(), patch, offset));
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
        let shape_ok = match (expect, &body) {
            (Expect::Directory, NodeBody::Flat(_)) => true,
            (Expect::Directory, NodeBody::Tree(tree)) => tree.depth == 0,
            (Expect::Inode(depth), NodeBody::Values(_)) => depth > 0,
            (Expect::Inode(depth), NodeBody::Tree(tree)) => tree.depth == depth,
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
        if matches!(expect, Expect::Directory) {
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
        let node = Node::new(body);
        let actual = node.hash();
        if actual != hash {
            self.problem(offset, Some(hash), Some(parent), format!("node hash is {actual}"));
        }
        match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                for (_, entry) in entries {
                    match entry {
                        Entry::Node(NodeRef::Stored { hash: child_hash, key }) => {
                            self.node(*key, *child_hash, offset, Expect::Directory, depth + 1)
                        }
                        Entry::Contents(ContentsRef::Stored { hash: child_hash, key }) => {
                            self.contents(*key, *child_hash, offset)
                        }
                        _ => {}
                    }
                }
            }
            NodeBody::Tree(tree) => {
                for (_, child) in &tree.children {
                    if let NodeRef::Stored { hash: child_hash, key } = child {
                        self.node(*key, *child_hash, offset, Expect::Inode(tree.depth + 1), depth);
                    }
                }
            }
        }
    }

    fn commit(&mut self, hash: Hash, offset: u64) {
        let read = self.repo.reader().with_record(offset, |kind, body| match kind {
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
            if self.repo.commit_offset_of(parent) != Some(*parent_offset) {
                self.problem(
                    *parent_offset,
                    Some(*parent),
                    Some(offset),
                    "parent commit not in the index at this offset".into(),
                );
            }
        }
        self.node(data.tree_offset, data.tree_hash, offset, Expect::Directory, 1);
    }
}

impl Repo {
    /// Checks the whole store (as of this handle's published state): every commit, every reachable
    /// object, every hash and offset. Never stops at the first problem.
    pub fn fsck(&self) -> FsckReport {
        let mut checker = Checker {
            repo: self,
            report: FsckReport::default(),
            visited: HashMap::default(),
            reachable_bytes: 0,
        };
        let mut commits: Vec<(Hash, u64)> = self.commits().map(|(hash, offset)| (*hash, *offset)).collect();
        commits.sort_unstable_by_key(|(_, offset)| *offset);
        checker.report.stats.commits = commits.len() as u64;
        for (hash, offset) in commits {
            checker.commit(hash, offset);
        }
        for (name, (hash, offset)) in &self.control_state().branches {
            if self.commit_offset_of(hash) != Some(*offset) {
                checker.report.problems.push(Problem {
                    file: FileKind::Control,
                    offset: 0,
                    hash: Some(*hash),
                    parent: None,
                    what: format!("branch {name:?} points to a commit not in the index at offset {offset}"),
                });
            }
        }
        let pack_bytes = self.control_state().pack_end;
        checker.report.stats.pack_bytes = pack_bytes;
        checker.report.stats.unreachable_bytes =
            pack_bytes.saturating_sub(codec::PACK_HEADER_LEN + checker.reachable_bytes);
        checker.report
    }
}
