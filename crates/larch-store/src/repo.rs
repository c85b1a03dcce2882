//! The persistent repository: open (writer or read-only), commit, checkout, branches, log, reload.
//! The commit protocol and its crash argument are described in `docs/store.md`.

use crate::codec::{self, CommitData, PACK_HEADER_LEN, PACK_MAGIC, RecordKind};
use crate::control::ControlState;
use crate::error::{FileKind, Result, StoreError};
use crate::index;
use crate::options::{CommitDetails, RepoOptions, StoreStats, SyncPolicy};
use crate::pack::{DEFAULT_CACHE_BYTES, PackReader, PackSource};
use crate::storage::{ControlFile, FileStorage, Storage, StoreFiles};
use crate::writer::{Encoder, WriteCounts};
use larch_core::{CommitInfo, Entry, Hash, NodeRef, ObjectSource, Tree, schema};
use std::collections::HashMap;

/// Commit index entries read at once when opening or reloading (64 Ki entries: 2.8 MiB).
const INDEX_CHUNK_ENTRIES: u64 = 1 << 16;
use std::fs::File;
use std::io::ErrorKind;
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
const PRIME_FRACTION: u64 = 128;

/// The branch commits move by default.
pub const DEFAULT_BRANCH: &str = "main";

/// A larch store: one writer or a read-only handle.
#[derive(Debug)]
pub struct Repo {
    path: Option<PathBuf>,
    files: StoreFiles,
    source: Arc<PackSource>,
    state: ControlState,
    commits: HashMap<Hash, u64>,
    writable: bool,
    options: RepoOptions,
    poisoned: bool,
    unsynced_commits: u32,
    buffer: Vec<u8>,
    stats: StoreStats,
    last_write: WriteCounts,
    _lock: Option<File>,
}

fn not_found(error: &std::io::Error) -> bool {
    error.kind() == ErrorKind::NotFound
}

impl Repo {
    /// Opens (creating if absent) the store at `path` for writing, with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Repo> {
        Repo::open_with(path, RepoOptions::default())
    }

    /// Opens the store at `path` for writing with `options`. Fails with [`StoreError::Locked`] when
    /// another handle (of any process) writes it.
    pub fn open_with(path: impl AsRef<Path>, options: RepoOptions) -> Result<Repo> {
        let path = path.as_ref();
        if path.exists() && !path.is_dir() {
            return Err(StoreError::NotAStore { path: path.into(), reason: "not a directory".into() });
        }
        if !path.exists() {
            if !options.create {
                return Err(StoreError::NotAStore { path: path.into(), reason: "no such directory".into() });
            }
            std::fs::create_dir_all(path)
                .map_err(|e| StoreError::io(FileKind::Control, 0, "create directory", e))?;
        }
        let lock = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path.join(FileKind::Lock.file_name()))
            .map_err(|e| StoreError::io(FileKind::Lock, 0, "open", e))?;
        match fs4::fs_std::FileExt::try_lock_exclusive(&lock) {
            Ok(true) => {}
            Ok(false) => return Err(StoreError::Locked { path: path.into() }),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                return Err(StoreError::Locked { path: path.into() });
            }
            Err(e) => return Err(StoreError::io(FileKind::Lock, 0, "lock", e)),
        }
        let control_path = path.join(FileKind::Control.file_name());
        if !control_path.exists() && !options.create {
            return Err(StoreError::NotAStore { path: path.into(), reason: "no control file".into() });
        }
        // Only a new store creates its files: a damaged store is reported, never "repaired" here.
        let files = Self::disk_files(path, true, !control_path.exists(), options.mmap)?;
        let mut repo = Repo::open_files(files, true, options, Some(path))?;
        repo._lock = Some(lock);
        Ok(repo)
    }

    /// Opens the store at `path` read-only: it sees the last published state and [`Repo::reload`]s
    /// to see newer commits. Any number of readers may coexist with one writer.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Repo> {
        Repo::open_read_only_with(path, DEFAULT_CACHE_BYTES)
    }

    /// [`Repo::open_read_only`] with a cache of `cache_bytes`.
    pub fn open_read_only_with(path: impl AsRef<Path>, cache_bytes: u64) -> Result<Repo> {
        let options = RepoOptions { create: false, cache_bytes, ..RepoOptions::default() };
        Repo::open_read_only_options(path, options)
    }

    /// [`Repo::open_read_only`] with `options` (the cache size and the read mode are used).
    pub fn open_read_only_options(path: impl AsRef<Path>, options: RepoOptions) -> Result<Repo> {
        let path = path.as_ref();
        if !path.join(FileKind::Control.file_name()).is_file() {
            return Err(StoreError::NotAStore { path: path.into(), reason: "no control file".into() });
        }
        let files = Self::disk_files(path, false, false, options.mmap)?;
        let options = RepoOptions { create: false, ..options };
        Repo::open_files(files, false, options, Some(path))
    }

    fn disk_files(path: &Path, writable: bool, create: bool, mmap: bool) -> Result<StoreFiles> {
        let open = |kind: FileKind| -> Result<Arc<dyn Storage>> {
            let file_path = path.join(kind.file_name());
            let opened = if mmap && kind == FileKind::Pack {
                FileStorage::open_mapped(&file_path, writable, create)
            } else {
                FileStorage::open(&file_path, writable, create)
            };
            match opened {
                Ok(file) => Ok(Arc::new(file)),
                Err(e) if not_found(&e) => {
                    Err(StoreError::NotAStore { path: path.into(), reason: format!("missing file {kind}") })
                }
                Err(e) => Err(StoreError::io(kind, 0, "open", e)),
            }
        };
        Ok(StoreFiles {
            control: Arc::new(ControlFile::new(&path.join(FileKind::Control.file_name()), writable)),
            pack: open(FileKind::Pack)?,
            index: open(FileKind::Index)?,
        })
    }

    /// Opens a store held by `files` (any [`Storage`]: memory, fault injection). A writer creates
    /// the store when `files` are empty and `options.create` is set. No lock is taken.
    pub fn open_files(
        files: StoreFiles,
        writable: bool,
        options: RepoOptions,
        path: Option<&Path>,
    ) -> Result<Repo> {
        let display_path = path.map_or_else(|| PathBuf::from("<storage>"), Path::to_path_buf);
        let control_bytes = match files.control.read_all() {
            Ok(bytes) => bytes,
            Err(e) if not_found(&e) => Vec::new(),
            Err(e) => return Err(StoreError::io(FileKind::Control, 0, "read", e)),
        };
        let state = if control_bytes.is_empty() && writable && options.create {
            Self::initialize(&files)?
        } else {
            ControlState::decode(&control_bytes)?.ok_or_else(|| StoreError::NotAStore {
                path: display_path.clone(),
                reason: "the control file has no larch magic".into(),
            })?
        };
        Self::check_header(&*files.pack, FileKind::Pack, state.pack_end)?;
        Self::check_header(&*files.index, FileKind::Index, state.index_end)?;
        let mut commits = HashMap::new();
        Self::read_index(&files, PACK_HEADER_LEN, state.index_end, &mut commits)?;
        let reader = PackReader::new(files.pack.clone(), state.pack_end, options.cache_bytes)
            .verifying(options.verify_on_load);
        let stats = StoreStats::default();
        Ok(Repo {
            path: path.map(Path::to_path_buf),
            files,
            source: Arc::new(PackSource { reader }),
            state,
            commits,
            writable,
            options,
            poisoned: false,
            unsynced_commits: 0,
            buffer: Vec::new(),
            stats,
            last_write: WriteCounts::default(),
            _lock: None,
        })
    }

    fn initialize(files: &StoreFiles) -> Result<ControlState> {
        files
            .pack
            .write_at(0, &codec::pack_header())
            .map_err(|e| StoreError::io(FileKind::Pack, 0, "write", e))?;
        files
            .index
            .write_at(0, &index::header())
            .map_err(|e| StoreError::io(FileKind::Index, 0, "write", e))?;
        files.pack.sync().map_err(|e| StoreError::io(FileKind::Pack, 0, "sync", e))?;
        files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
        let state = ControlState {
            generation: 1,
            pack_end: PACK_HEADER_LEN,
            index_end: index::INDEX_HEADER_LEN,
            branches: Default::default(),
        };
        files
            .control
            .replace(&state.encode(), true)
            .map_err(|e| StoreError::io(FileKind::Control, 0, "replace", e))?;
        Ok(state)
    }

    fn check_header(storage: &dyn Storage, kind: FileKind, published: u64) -> Result<()> {
        let len = storage.len().map_err(|e| StoreError::io(kind, 0, "stat", e))?;
        if len < published {
            return Err(StoreError::corrupt(
                kind,
                len,
                format!("file ends before its published length {published}"),
            ));
        }
        let mut header = [0u8; 16];
        storage.read_at(0, &mut header).map_err(|e| StoreError::io(kind, 0, "read", e))?;
        match kind {
            FileKind::Pack => {
                if header.get(..8) != Some(PACK_MAGIC.as_slice()) {
                    return Err(StoreError::corrupt(kind, 0, "bad magic"));
                }
                let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
                if version != codec::FORMAT_VERSION {
                    return Err(StoreError::UnknownVersion {
                        file: kind,
                        found: version,
                        supported: codec::FORMAT_VERSION,
                    });
                }
                if header.get(12..16) != Some([0u8; 4].as_slice()) {
                    return Err(StoreError::corrupt(kind, 12, "reserved header bytes are not zero"));
                }
                Ok(())
            }
            _ => index::check_header(&header),
        }
    }

    fn read_index(files: &StoreFiles, from: u64, to: u64, commits: &mut HashMap<Hash, u64>) -> Result<()> {
        if to < from {
            return Err(StoreError::corrupt(FileKind::Index, to, "published index shrank"));
        }
        if (to - from) % index::ENTRY_LEN as u64 != 0 {
            return Err(StoreError::corrupt(
                FileKind::Index,
                from,
                "length is not a whole number of entries",
            ));
        }
        let mut entries = (to - from) / index::ENTRY_LEN as u64;
        if entries > INDEX_CHUNK_ENTRIES {
            // More commits than a chunk: they must fit the pack, each commit record taking at
            // least `MIN_COMMIT_RECORD` bytes of it (checked before reading or allocating).
            let pack_len = files.pack.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?;
            let most = pack_len / codec::MIN_COMMIT_RECORD;
            if entries > most {
                return Err(StoreError::corrupt(
                    FileKind::Index,
                    from,
                    format!(
                        "{entries} commits published, but a pack of {pack_len} bytes holds at most {most}"
                    ),
                ));
            }
        }
        // Streamed in chunks: the memory used is the map of the entries read, never a buffer of
        // the whole claimed length, and the first bad entry stops the read.
        let mut bytes = Vec::new();
        let mut at = from;
        while entries > 0 {
            let chunk = entries.min(INDEX_CHUNK_ENTRIES);
            let len = usize::try_from(chunk).map_err(|_| StoreError::corrupt(FileKind::Index, at, "huge"))?
                * index::ENTRY_LEN;
            bytes.resize(len, 0);
            files
                .index
                .read_at(at, &mut bytes)
                .map_err(|e| StoreError::io(FileKind::Index, at, "read", e))?;
            let decoded = index::decode_entries(&bytes, at)?;
            commits.reserve(decoded.len());
            commits.extend(decoded);
            at += len as u64;
            entries -= chunk;
        }
        Ok(())
    }

    /// Sees the commits published since this handle opened or last reloaded. Returns whether
    /// anything changed. A writer's handle is always up to date.
    pub fn reload(&mut self) -> Result<bool> {
        let bytes =
            self.files.control.read_all().map_err(|e| StoreError::io(FileKind::Control, 0, "read", e))?;
        let state = ControlState::decode(&bytes)?.ok_or_else(|| StoreError::NotAStore {
            path: self.path.clone().unwrap_or_default(),
            reason: "the control file lost its magic".into(),
        })?;
        if state.generation == self.state.generation {
            return Ok(false);
        }
        if state.pack_end < self.state.pack_end {
            return Err(StoreError::corrupt(FileKind::Control, 24, "published pack end went backwards"));
        }
        let len = self.files.pack.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?;
        if len < state.pack_end {
            return Err(StoreError::corrupt(FileKind::Pack, len, "file ends before its published length"));
        }
        Self::read_index(&self.files, self.state.index_end, state.index_end, &mut self.commits)?;
        self.source.reader.set_end(state.pack_end);
        self.state = state;
        Ok(true)
    }

    /// Closes the handle, first making every commit durable (under `SyncPolicy::Every` or
    /// `Never`, a final sync and publish).
    pub fn close(mut self) -> Result<()> {
        if self.writable && !self.poisoned && self.unsynced_commits > 0 {
            self.sync_files()?;
            let bytes = self.state.encode();
            self.files
                .control
                .replace(&bytes, true)
                .map_err(|e| StoreError::io(FileKind::Control, 0, "replace", e))?;
        }
        Ok(())
    }

    fn sync_files(&mut self) -> Result<()> {
        self.stats.syncs += 2;
        let pack_end = self.state.pack_end;
        self.files.pack.sync().map_err(|e| StoreError::io(FileKind::Pack, pack_end, "sync", e))?;
        self.files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
        self.unsynced_commits = 0;
        Ok(())
    }

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

    /// Every commit hash with its record offset, in no particular order.
    pub fn commits(&self) -> impl Iterator<Item = (&Hash, &u64)> {
        self.commits.iter()
    }

    fn commit_offset(&self, hash: &Hash) -> Result<u64> {
        self.commits.get(hash).copied().ok_or(StoreError::UnknownCommit(*hash))
    }

    /// What commit `hash` records.
    pub fn commit_details(&self, hash: &Hash) -> Result<CommitDetails> {
        let offset = self.commit_offset(hash)?;
        let data = self.source.reader.commit(offset)?;
        Ok(CommitDetails {
            hash: *hash,
            offset,
            tree_hash: data.tree_hash,
            parents: data.parent_hashes(),
            info: data.info,
        })
    }

    /// The tree of commit `hash`, loaded lazily through the cache.
    pub fn checkout(&self, hash: &Hash) -> Result<Tree> {
        let offset = self.commit_offset(hash)?;
        let data = self.source.reader.commit(offset)?;
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
        self.check_writable()?;
        if let Some(name) = branch {
            check_branch_name(name)?;
        }
        let Entry::Node(root) = tree.root() else {
            return Err(StoreError::RootIsContents);
        };
        if parents.len() > codec::MAX_PARENTS {
            return Err(StoreError::TooLarge(format!(
                "{} parents (at most {} are allowed)",
                parents.len(),
                codec::MAX_PARENTS
            )));
        }
        let parent_offsets = parents
            .iter()
            .map(|parent| {
                Ok((*parent, self.commits.get(parent).copied().ok_or(StoreError::UnknownParent(*parent))?))
            })
            .collect::<Result<Vec<_>>>()?;
        let tree_hash = tree.hash();
        let hash = schema::commit_hash(&tree_hash, parents, &info);
        if let Some(offset) = self.commits.get(&hash).copied() {
            if let Some(name) = branch
                && self.state.branches.get(name) != Some(&(hash, offset))
            {
                let mut state = self.state.clone();
                state.branches.insert(name.to_string(), (hash, offset));
                self.publish(state, 0, 0)?;
            }
            return Ok(hash);
        }
        let base = self.state.pack_end;
        let store = self.source.reader.store();
        // Rewritten nodes may be written as patches of their versions in the first parent's tree.
        let reader = self.options.patches.then_some(&self.source.reader);
        let root_base = match (reader, parent_offsets.first()) {
            (Some(reader), Some((_, offset))) => {
                reader.commit(*offset).ok().map(|parent| (parent.tree_hash, parent.tree_offset))
            }
            _ => None,
        };
        let mut buffer = std::mem::take(&mut self.buffer);
        let result = (|| {
            let prime_budget = self.source.reader.cache_capacity() / PRIME_FRACTION;
            let mut encoder = Encoder::new(
                &mut buffer,
                (base, store),
                Some(&*self.files.pack),
                &**tree.source(),
                reader,
                prime_budget,
            );
            let (root_hash, root_offset) = encoder.node(root, root_base)?;
            let commit =
                CommitData { tree_hash: root_hash, tree_offset: root_offset, parents: parent_offsets, info };
            let commit_offset = encoder
                .record(RecordKind::Commit, |out, offset| codec::encode_commit(out, offset, &commit))?;
            Ok::<_, StoreError>((
                commit_offset,
                encoder.flushed,
                encoder.marks,
                encoder.records,
                encoder.counts,
            ))
        })();
        let (commit_offset, flushed, marks, records, counts) = match result {
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
        let mut state = self.state.clone();
        if let Some(name) = branch {
            state.branches.insert(name.to_string(), (hash, commit_offset));
        }
        self.publish(state, pack_len, index_len)?;
        self.commits.insert(hash, commit_offset);
        for (node, offset) in marks {
            node.set_stored_key(self.source.reader.key(offset));
        }
        for record in records {
            self.source.reader.prime(record.offset, record.node, record.chain, record.weight);
        }
        self.stats.bytes_written += pack_len + index_len;
        self.stats.objects_written += counts.objects();
        self.stats.commits_written += 1;
        self.last_write = counts;
        Ok(hash)
    }

    fn check_writable(&self) -> Result<()> {
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
        self.files
            .pack
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

    /// Makes the appended bytes durable (per the sync policy) and publishes `state` advanced by
    /// the appended lengths. A failure here poisons the handle: whether the publish reached the
    /// disk is unknown until the store is reopened.
    fn publish(&mut self, mut state: ControlState, pack_len: u64, index_len: u64) -> Result<()> {
        state.generation += 1;
        state.pack_end += pack_len;
        state.index_end += index_len;
        self.unsynced_commits += 1;
        let durable = match self.options.sync {
            SyncPolicy::Never => false,
            SyncPolicy::Commit => true,
            SyncPolicy::Every(n) => self.unsynced_commits >= n.max(1),
        };
        let bytes = state.encode();
        let outcome = (|| {
            if durable {
                self.sync_files()?;
            }
            self.files
                .control
                .replace(&bytes, durable)
                .map_err(|e| StoreError::io(FileKind::Control, 0, "replace", e))
        })();
        if let Err(e) = outcome {
            self.poisoned = true;
            return Err(e);
        }
        if durable {
            self.stats.syncs += 1;
        }
        self.source.reader.set_end(state.pack_end);
        self.state = state;
        Ok(())
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

    /// The ancestors of `hash`, itself first, each once, in depth-first order of parents.
    pub fn log(&self, hash: &Hash) -> Result<Vec<Hash>> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut stack = vec![*hash];
        while let Some(next) = stack.pop() {
            if !seen.insert(next) {
                continue;
            }
            let data = self.source.reader.commit(self.commit_offset(&next)?)?;
            out.push(next);
            stack.extend(data.parents.iter().rev().map(|(parent, _)| *parent));
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
            bytes_read: load(&counters.bytes_read),
            pack_bytes: self.state.pack_end,
            index_bytes: self.state.index_end,
            commit_count: self.commits.len() as u64,
            ..self.stats
        }
    }

    /// What the last commit wrote, by kind.
    pub fn last_write(&self) -> WriteCounts {
        self.last_write
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

fn check_branch_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(StoreError::InvalidBranchName(name.to_string()));
    }
    Ok(())
}
