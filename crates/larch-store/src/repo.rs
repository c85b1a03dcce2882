//! The persistent repository: open (writer or read-only), commit, checkout, branches, log, reload.
//! The commit protocol and its crash argument are described in `docs/store.md`.

use crate::commit::writer::{Encoder, WriteCounts};
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, CommitData, RecordKind};
use crate::format::control::ControlState;
use crate::format::index;
use crate::io::storage::{Storage, StoreFiles};
use crate::options::{CommitDetails, RepoOptions, StoreStats};
use crate::pack::reader::{PackReader, PackSource};
use larch_core::{CommitInfo, Entry, Hash, NodeRef, ObjectSource, Tree, schema};
use std::collections::HashMap;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The append buffer is kept between commits up to this capacity.
const KEEP_BUFFER_BYTES: usize = 16 << 20;

/// A commit primes the cache with at most this fraction of its budget of the records it wrote
/// (1.2 MiB of the default 152 MiB): the last written, i.e. the upper levels of the tree, which the
/// next block's checkout walks first. A regular block's records fit (~900 records, well under
/// 1 MiB decoded); a huge commit (a setup block) used to keep a whole cache's worth of decoded
/// copies next to its in-memory tree until its end, then flood the cache with them. Bounding it
/// lowered the default trace's peak RSS by 50 MiB (128 MiB cache: 258 → 207 MiB; 160 MiB cache,
/// 1 MiB primed against 8 MiB: 258 → 246 MiB, same ops/s). Smaller budgets (256 KiB, none) make
/// commits cheaper (−20%) but cost as much again in misses on the full trace.
pub(crate) const PRIME_FRACTION: u64 = 128;

/// The priming fraction of a pipelined writer ([`crate::PipelinedRepo`]): 1/1024 of the budget
/// (128 KiB of the replay's 128 MiB). Its commit thread shares the second core with the trace
/// reader and the cache's dropping thread and had become the busier core: priming less moves work
/// to the replay thread (misses 1.73M → 2.48M) and made the default replay 3-5% faster
/// (docs/benchmarks.md at c117370, "Issue 11, sixth round").
pub(crate) const PIPELINED_PRIME_FRACTION: u64 = 1024;

/// The branch commits move by default.
pub const DEFAULT_BRANCH: &str = "main";

/// A larch store: one writer or a read-only handle.
#[derive(Debug)]
pub struct Repo {
    pub(crate) path: Option<PathBuf>,
    pub(crate) files: StoreFiles,
    pub(crate) source: Arc<PackSource>,
    /// The state this handle stands on: published, or (under `every N`/`never`) staged.
    pub(crate) state: ControlState,
    pub(crate) commits: HashMap<Hash, u64>,
    /// Offset of the last commit record in index order.
    pub(crate) last_commit: Option<u64>,
    /// The control slot holding the last published state.
    pub(crate) slot: usize,
    /// The largest generation seen in the control file or published.
    pub(crate) max_generation: u64,
    /// The pack length known durable.
    pub(crate) synced_pack_end: u64,
    /// Whether the last confirmation record written is durable (synced after it was written).
    pub(crate) confirm_synced: bool,
    pub(crate) writable: bool,
    pub(crate) options: RepoOptions,
    pub(crate) poisoned: bool,
    pub(crate) unsynced_commits: u32,
    pub(crate) buffer: Vec<u8>,
    /// The encoder's tables, kept between commits as `buffer` is.
    pub(crate) encoder_tables: Option<crate::commit::writer::EncoderTables>,
    pub(crate) stats: StoreStats,
    pub(crate) last_write: WriteCounts,
    /// The running garbage collection, until it switches (`gc.rs`).
    pub(crate) gc: Option<Box<crate::gc::run::GcRun>>,
    /// What GC left: the oldest kept commit, files to unlink, the last report.
    pub(crate) gc_after: crate::gc::run::GcAfter,
    /// The thread publishing commits under `SyncPolicy::Pipelined`, once started.
    pub(crate) publisher: Option<crate::switch::publisher::Publisher>,
    /// The fraction of the cache budget a commit primes the cache with, at most
    /// ([`PRIME_FRACTION`], [`PIPELINED_PRIME_FRACTION`]).
    pub(crate) prime_fraction: u64,
    /// The writer's lock: the store directory, `flock`ed.
    pub(crate) _lock: Option<File>,
    /// The identities of the keys of this handle's bulk writers (`repo/bulk.rs`), and whether
    /// each published its records: a key of one that did not is refused by the next.
    pub(crate) bulk_sessions: HashMap<larch_core::StoreId, bool>,
}

impl Repo {
    /// The directory of the store, when on disk.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether this handle may commit.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The object source of this store's trees.
    pub fn source(&self) -> Arc<dyn ObjectSource> {
        self.source.clone() as Arc<dyn ObjectSource>
    }

    /// An empty tree whose grafts and lazy loads use this store (the genesis context).
    pub fn empty_tree(&self) -> Tree {
        Tree::empty_with_source(self.source())
    }

    /// Number of commits.
    pub fn commit_count(&self) -> usize {
        self.commits.len()
    }

    /// Whether `hash` is a commit of this store (as of the last reload).
    pub fn contains(&self, hash: &Hash) -> bool {
        self.commits.contains_key(hash)
    }

    /// Every commit of the store (as of the last reload), in the order they were written: a
    /// commit's parents in the store come before it.
    pub fn commits(&self) -> Vec<Hash> {
        let mut commits: Vec<(Hash, u64)> =
            self.commits.iter().map(|(hash, offset)| (*hash, *offset)).collect();
        commits.sort_unstable_by_key(|(_, offset)| *offset);
        commits.into_iter().map(|(hash, _)| hash).collect()
    }

    /// Every commit hash with its record offset in the pack, in no particular order (tests and
    /// measurements of the GC's bounds, which are pack offsets).
    #[cfg(feature = "fault-injection")]
    pub fn commit_offsets(&self) -> impl Iterator<Item = (&Hash, &u64)> {
        self.commits.iter()
    }

    fn commit_offset(&self, hash: &Hash) -> Result<u64> {
        match self.commits.get(hash) {
            Some(offset) => Ok(*offset),
            None => Err(self.missing_commit(hash)),
        }
    }

    /// The record of commit `hash` and its offset, checked to be that commit's: a reader whose
    /// store was rewound and regrown since it loaded its commit map may find another commit there
    /// ([`StoreError::Rewound`]; corruption for a writer, whose map is its own).
    fn commit_record(&self, hash: &Hash) -> Result<(u64, CommitData)> {
        let offset = self.commit_offset(hash)?;
        // A reader's layout followed a writer's GC (a read found a file it retired): the commits
        // below the new oldest kept record are collected, even while this map still names them.
        let layout = self.source.reader.layout();
        if !self.writable && offset < layout.keep_from() {
            return Err(self.collected_since_reload(hash, layout.gc_generation()));
        }
        let data = match self.source.reader.commit(offset) {
            // A reader's map names commits a writer's GC collected since its last reload.
            Err(StoreError::CollectedObject { gc_generation, .. }) if !self.writable => {
                return Err(self.collected_since_reload(hash, gc_generation));
            }
            other => other?,
        };
        let found = data.hash();
        if found != *hash {
            let reason = format!("commit {hash} was at offset {offset}, which now holds commit {found}");
            return Err(if self.writable {
                StoreError::corrupt(FileKind::Pack, offset, reason)
            } else {
                StoreError::Rewound { path: self.path.clone().unwrap_or_default(), reason }
            });
        }
        Ok((offset, data))
    }

    /// What commit `hash` records.
    pub fn commit_details(&self, hash: &Hash) -> Result<CommitDetails> {
        let (offset, data) = self.commit_record(hash)?;
        Ok(CommitDetails {
            hash: *hash,
            offset,
            tree_hash: data.tree_hash,
            parents: data.parent_hashes(),
            absent_parents: data.absent_parents(),
            info: data.info,
        })
    }

    /// The tree of commit `hash`, loaded lazily through the cache.
    pub fn checkout(&self, hash: &Hash) -> Result<Tree> {
        // The commit's hash checked against its record: never another commit's tree.
        let (_, data) = self.commit_record(hash)?;
        // A new tree: the reading ahead counts its misses from zero.
        self.source.prefetch().new_tree();
        let root = Entry::Node(NodeRef::Stored {
            hash: data.tree_hash,
            key: self.source.reader.key(data.tree_offset),
        });
        Ok(Tree::from_entry(root, self.source()))
    }

    /// Commits `tree` with `parents` and `info`, moving the branch `main` to it; returns the commit
    /// hash.
    pub fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash> {
        self.commit_on(Some(DEFAULT_BRANCH), tree, parents, info)
    }

    /// Commits `tree`, moving `branch` (if any) to the new commit in the same atomic publish.
    pub fn commit_on(
        &mut self,
        branch: Option<&str>,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
    ) -> Result<Hash> {
        self.commit_inner(branch, tree, parents, info, false)
    }

    /// Commits `tree` whose parents may be *absent* from this store (a commit imported from a
    /// snapshot or another store without its history), moving the branch `main` to it. Each parent
    /// in the store is linked as by [`Repo::commit`]; each other one is recorded by its hash only
    /// (`docs/format.md` §3.6). The commit hash is the same as with the parents present. `fsck`
    /// reports such parents as absent (not as corruption), [`Repo::history`] stops at them.
    pub fn commit_with_absent_parents(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
    ) -> Result<Hash> {
        self.commit_inner(Some(DEFAULT_BRANCH), tree, parents, info, true)
    }

    /// [`Repo::commit_with_absent_parents`] moving `branch` (if any) instead of `main`.
    pub fn commit_on_with_absent_parents(
        &mut self,
        branch: Option<&str>,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
    ) -> Result<Hash> {
        self.commit_inner(branch, tree, parents, info, true)
    }

    fn commit_inner(
        &mut self,
        branch: Option<&str>,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        allow_absent: bool,
    ) -> Result<Hash> {
        if let Some(name) = branch {
            check_branch_name(name)?;
        }
        let parent_offsets = self.check_commit(tree, parents, allow_absent)?;
        let Entry::Node(root) = tree.root() else {
            return Err(StoreError::RootIsContents);
        };
        let tree_hash = crate::commit::hashing::tree_hash(tree);
        let hash = schema::commit_hash(&tree_hash, parents, &info);
        if let Some(offset) = self.commits.get(&hash).copied() {
            if let Some(name) = branch
                && self.state.branches.get(name) != Some(&(hash, offset))
            {
                let mut state = self.state.clone();
                state.branches.insert(name.to_string(), (hash, offset));
                self.publish(state, 0, 0)?;
            }
            // Committed again: the tree's nodes get the keys of the stored ones, so that a tree
            // carried on from it refers to them by key, as to a written commit's. Only memory
            // depends on it: a record that cannot be read leaves the rest of the tree in memory,
            // and the reads that need that record report it.
            if let Ok((_, stored)) = self.commit_record(&hash)
                && stored.tree_hash == tree_hash
            {
                let _ = crate::commit::existing::key_as_stored(root, stored.tree_offset, &self.source.reader);
            }
            return Ok(hash);
        }
        self.roll_if_full()?;
        let base = self.state.pack_end;
        let store = self.source.reader.store();
        // Rewritten nodes may be written as patches of their versions in the first parent's tree.
        let reader = self.options.patches.then_some(&self.source.reader);
        let root_base = match (reader, parent_offsets.first()) {
            (Some(reader), Some((_, Some(offset)))) => {
                reader.commit(*offset).ok().map(|parent| (parent.tree_hash, parent.tree_offset))
            }
            _ => None,
        };
        let mut buffer = std::mem::take(&mut self.buffer);
        let layout = self.source.reader.layout().clone();
        let result = (|| {
            let prime_budget = self.source.reader.cache_capacity() / self.prime_fraction.max(1);
            let mut encoder = Encoder::new(
                &mut buffer,
                (base, store),
                Some(&*layout as &dyn Storage),
                &**tree.source(),
                reader,
                prime_budget,
                self.encoder_tables.take().unwrap_or_else(crate::commit::writer::EncoderTables::new),
            );
            // Pointers into collected space are refused; while a GC runs, pointers below its
            // commit are its late roots.
            let mapped_from = layout.first_chunk_start();
            let late_below = match (&self.gc, &self.gc_after.next_slice) {
                (Some(run), _) => run.late_below(),
                // Between two slices: the next one checks them against the mark it takes over.
                (None, Some(next)) => next.keep_from,
                (None, None) => 0,
            };
            encoder.guard_gc(&layout, mapped_from, late_below);
            let (root_hash, root_offset) = encoder.node(root, root_base)?;
            let commit =
                CommitData { tree_hash: root_hash, tree_offset: root_offset, parents: parent_offsets, info };
            let commit_offset = encoder
                .record(RecordKind::Commit, |out, offset| codec::encode_commit(out, offset, &commit))?;
            Ok::<_, StoreError>((
                commit_offset,
                encoder.flushed,
                encoder.tables,
                encoder.records,
                encoder.counts,
                encoder.late_roots,
            ))
        })();
        let (commit_offset, flushed, mut tables, records, counts, late_roots) = match result {
            Ok(done) => done,
            Err(e) => {
                self.buffer = buffer;
                return Err(e);
            }
        };
        let written = self.append(flushed, &buffer, &hash, commit_offset);
        let pack_len = flushed + buffer.len() as u64;
        // Keep the buffer for the next commit, unless a huge one (a setup block) grew it.
        if buffer.capacity() <= KEEP_BUFFER_BYTES {
            self.buffer = buffer;
        }
        let index_len = written?;
        if let Some(run) = self.gc.as_mut() {
            run.add_late_roots(late_roots);
        } else if let Some(next) = self.gc_after.next_slice.as_mut() {
            next.late_roots.extend(late_roots);
        }
        let mut state = self.state.clone();
        if let Some(name) = branch {
            state.branches.insert(name.to_string(), (hash, commit_offset));
        }
        self.publish(state, pack_len, index_len)?;
        self.commits.insert(hash, commit_offset);
        self.last_commit = Some(commit_offset);
        for (node, offset, chain) in tables.marks.drain(..) {
            let key = self.source.reader.key(offset);
            node.set_stored_key(key);
            if let Some(chain) = chain {
                node.note_record_chain(key, chain);
            }
        }
        self.encoder_tables = tables.recycled();
        for record in records.finish(store) {
            self.source.reader.prime(record.offset, record.node, record.chain, record.weight);
        }
        self.stats.bytes_written += pack_len + index_len;
        self.stats.objects_written += counts.objects();
        self.stats.commits_written += 1;
        self.last_write = counts;
        Ok(hash)
    }

    /// The checks of a commit before anything is hashed or written: a writable handle, a
    /// directory at the root, at most `MAX_PARENTS` parents, each in the store (or, with
    /// `allow_absent`, recorded as absent). Returns the parents with their record offsets.
    pub(crate) fn check_commit(
        &self,
        tree: &Tree,
        parents: &[Hash],
        allow_absent: bool,
    ) -> Result<Vec<(Hash, Option<u64>)>> {
        self.check_writable()?;
        check_commit_shape(tree, parents)?;
        parents
            .iter()
            .map(|parent| match self.commits.get(parent).copied() {
                Some(offset) => Ok((*parent, Some(offset))),
                None if allow_absent => Ok((*parent, None)),
                None => match self.missing_commit(parent) {
                    collected @ StoreError::Collected { .. } => Err(collected),
                    _ => Err(StoreError::UnknownParent(*parent)),
                },
            })
            .collect()
    }

    /// At the start of a commit: rolls to a new chunk when the head chunk holds at least
    /// `chunk_bytes` (or is a format-2 `pack`, never written by format 3). The new chunk starts at
    /// the pack's end; it is synced, with the directory, by the next publish.
    fn roll_if_full(&mut self) -> Result<()> {
        let layout = self.source.reader.layout().clone();
        let (_, head_start) = layout.head();
        let held = self.state.pack_end.saturating_sub(head_start);
        if layout.head_is_legacy() || held >= self.options.chunk_bytes.max(1) {
            // The switch in flight syncs the chunks written so far: it finishes before a roll.
            self.settle_publish()?;
            layout.roll(self.state.pack_end)?;
            self.stats.chunk_rolls += 1;
        }
        Ok(())
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if !self.writable {
            return Err(StoreError::ReadOnly);
        }
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }

    /// Writes the new records (the last of them: `flushed` bytes were written already) and the
    /// index entry past the published ends; returns the index bytes written. Nothing is published
    /// yet, so a failure leaves the store as it was.
    fn append(&self, flushed: u64, records: &[u8], hash: &Hash, commit_offset: u64) -> Result<u64> {
        let pack_end = self.state.pack_end + flushed;
        self.source
            .reader
            .layout()
            .write_at(pack_end, records)
            .map_err(|e| StoreError::io(FileKind::Pack, pack_end, "write", e))?;
        let mut entry = Vec::with_capacity(index::ENTRY_LEN);
        index::encode_entry(&mut entry, hash, commit_offset);
        let index_end = self.state.index_end;
        self.files
            .index
            .write_at(index_end, &entry)
            .map_err(|e| StoreError::io(FileKind::Index, index_end, "write", e))?;
        Ok(entry.len() as u64)
    }

    /// Branches and the commits they point to, sorted by name.
    pub fn branches(&self) -> Vec<(String, Hash)> {
        self.state.branches.iter().map(|(name, (hash, _))| (name.clone(), *hash)).collect()
    }

    /// The commit branch `name` points to.
    pub fn branch(&self, name: &str) -> Option<Hash> {
        self.state.branches.get(name).map(|(hash, _)| *hash)
    }

    /// The commit of the default branch `main`.
    pub fn head(&self) -> Option<Hash> {
        self.branch(DEFAULT_BRANCH)
    }

    /// Points branch `name` at commit `hash` (publishing at once).
    pub fn set_branch(&mut self, name: &str, hash: &Hash) -> Result<()> {
        self.check_writable()?;
        check_branch_name(name)?;
        let offset = self.commit_offset(hash)?;
        let mut state = self.state.clone();
        state.branches.insert(name.to_string(), (*hash, offset));
        self.publish(state, 0, 0)
    }

    /// Removes branch `name`.
    pub fn remove_branch(&mut self, name: &str) -> Result<()> {
        self.check_writable()?;
        let mut state = self.state.clone();
        if state.branches.remove(name).is_none() {
            return Err(StoreError::UnknownBranch(name.to_string()));
        }
        self.publish(state, 0, 0)
    }

    /// The ancestors of `hash` in this store, itself first, each once, in depth-first order of
    /// parents. It stops at absent parents and at parents garbage collection removed (see
    /// [`Repo::history`], which names them).
    pub fn log(&self, hash: &Hash) -> Result<Vec<Hash>> {
        Ok(self.history(hash)?.commits)
    }

    /// The ancestors of `hash` in this store, as [`Repo::log`], and the absent parents where the
    /// walk stopped (commits recorded as parents but not in this store).
    pub fn history(&self, hash: &Hash) -> Result<History> {
        let mut seen = std::collections::HashSet::new();
        let mut out = History::default();
        let mut stack = vec![*hash];
        while let Some(next) = stack.pop() {
            if !seen.insert(next) {
                continue;
            }
            let (_, data) = self.commit_record(&next)?;
            out.commits.push(next);
            for (parent, offset) in data.parents.iter().rev() {
                match offset {
                    Some(offset) if *offset < self.state.keep_from => {
                        if !out.collected_parents.contains(&(next, *parent)) {
                            out.collected_parents.push((next, *parent));
                        }
                    }
                    Some(_) => stack.push(*parent),
                    None => {
                        if !out.absent_parents.contains(&(next, *parent)) {
                            out.absent_parents.push((next, *parent));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The counters of this handle.
    pub fn stats(&self) -> StoreStats {
        let counters = &self.source.reader.counters;
        let load =
            |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
        let (cache_bytes, cache_entries) = self.source.reader.cache_usage();
        StoreStats {
            cache_hits: load(&counters.hits),
            cache_misses: load(&counters.misses),
            cache_bytes,
            cache_entries: cache_entries as u64,
            records_read: load(&counters.records_read),
            nodes_read_ahead: load(&self.source.prefetch().nodes_read),
            bytes_read: load(&counters.bytes_read),
            pack_bytes: self.state.pack_end,
            index_bytes: self.state.index_end,
            commit_count: self.commits.len() as u64,
            chunk_files: self.source.reader.layout().chunk_count() as u64,
            chunk_files_open: self.source.reader.layout().pool().entries() as u64,
            chunk_file_opens: self.source.reader.layout().pool().opens(),
            layout_refreshes: self.source.reader.layout().refreshes(),
            disk_lookups: self.source.reader.layout().disk_lookups(),
            mapped_bytes: self.source.reader.layout().map_budget().map_or(0, |budget| budget.charged()),
            map_releases: self.source.reader.layout().map_budget().map_or(0, |budget| budget.releases()),
            ..self.stats
        }
    }

    /// The pack's chunk files: name, global start and global end (the head's: the published end).
    pub fn chunk_files(&self) -> Vec<(String, u64, u64)> {
        self.source.reader.layout().chunk_files(self.state.pack_end)
    }

    /// What the last commit wrote, by kind.
    pub fn last_write(&self) -> WriteCounts {
        self.last_write
    }

    /// For a bulk writer (`bulk.rs`): the published pack end, where its records start, and the pack.
    pub(crate) fn bulk_start(&mut self) -> Result<(u64, Arc<dyn Storage>)> {
        self.check_writable()?;
        // The bulk writer does not report late roots: a running GC finishes and switches first
        // (its report or error stays for `gc_finish`).
        if self.gc_running() {
            self.gc_join();
            let state = self.state.clone();
            self.publish(state, 0, 0)?;
        }
        self.roll_if_full()?;
        Ok((self.state.pack_end, self.source.reader.layout().clone() as Arc<dyn Storage>))
    }

    /// For a bulk writer: appends the last `tail` bytes of its records (after `flushed` bytes
    /// already written past the published end) and the commit's index entry, then publishes the
    /// commit, moving `branch`, exactly as steps 4–6 of a commit.
    pub(crate) fn bulk_finish(
        &mut self,
        branch: Option<&str>,
        flushed: u64,
        tail: &[u8],
        hash: Hash,
        commit_offset: u64,
        counts: WriteCounts,
    ) -> Result<()> {
        self.check_writable()?;
        if let Some(name) = branch {
            check_branch_name(name)?;
        }
        let index_len = self.append(flushed, tail, &hash, commit_offset)?;
        let pack_len = flushed + tail.len() as u64;
        let mut state = self.state.clone();
        if let Some(name) = branch {
            state.branches.insert(name.to_string(), (hash, commit_offset));
        }
        self.publish(state, pack_len, index_len)?;
        self.commits.insert(hash, commit_offset);
        self.last_commit = Some(commit_offset);
        self.stats.bytes_written += pack_len + index_len;
        self.stats.objects_written += counts.objects();
        self.stats.commits_written += 1;
        self.last_write = counts;
        Ok(())
    }

    pub(crate) fn commit_offset_of(&self, hash: &Hash) -> Option<u64> {
        self.commits.get(hash).copied()
    }

    pub(crate) fn reader(&self) -> &PackReader {
        &self.source.reader
    }

    pub(crate) fn control_state(&self) -> &ControlState {
        &self.state
    }
}

/// The result of [`Repo::history`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The commits reached, the starting one first, each once, in depth-first order of parents.
    pub commits: Vec<Hash>,
    /// Where the walk stopped: (commit, its parent absent from the store), in walk order.
    pub absent_parents: Vec<(Hash, Hash)>,
    /// Where the walk stopped at garbage collection: (commit, its parent that GC removed), in
    /// walk order.
    pub collected_parents: Vec<(Hash, Hash)>,
}

fn check_branch_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(StoreError::InvalidBranchName(name.to_string()));
    }
    Ok(())
}

/// Checks what a commit's arguments must be whatever the store holds: a directory as the root,
/// at most [`codec::MAX_PARENTS`] parents.
pub(crate) fn check_commit_shape(tree: &Tree, parents: &[Hash]) -> Result<()> {
    if !matches!(tree.root(), Entry::Node(_)) {
        return Err(StoreError::RootIsContents);
    }
    if parents.len() > codec::MAX_PARENTS {
        return Err(StoreError::TooLarge(format!(
            "{} parents (at most {} are allowed)",
            parents.len(),
            codec::MAX_PARENTS
        )));
    }
    Ok(())
}

mod archive;
pub(crate) mod bulk;
pub(crate) mod cache_budget;
pub(crate) mod check;
mod context_repo;
mod gc;
pub(crate) mod open;
pub(crate) mod pipeline;
mod publish;

#[cfg(test)]
mod existing_tests;
#[cfg(test)]
mod inode_reads_tests;
#[cfg(test)]
mod offer_tests;
#[cfg(test)]
mod prefetch_tests;
#[cfg(test)]
mod writer_tests;
