//! Archive mode with a lower layer (issue 10 point 6, `docs/gc-design.md` §10, `docs/store.md`
//! *Archive mode*): instead of being collected, sealed chunk files move to a second directory
//! (another disk) given at open ([`crate::RepoOptions::lower`]), and every lookup of a chunk file
//! tries the store directory, then the lower one ([`LayeredDirectory`]). Nothing is collected:
//! every commit stays readable, and no address changes.
//!
//! A move ([`Repo::archive`]) of chunk `chunk.<seq>`: copy it to `lower/chunk.<seq>.tmp`,
//! `fdatasync` the copy, rename it to `lower/chunk.<seq>`, `fsync` the lower directory, then unlink
//! the upper copy. Before the first upper copy goes, a publish sets the control slot's archive flag
//! ([`crate::control::FLAG_ARCHIVE`]): a store that may hold chunks only in the lower directory
//! always says so, and opening it without one fails with [`StoreError::NeedsLower`]. Sealed chunk
//! files are immutable, so the move needs no switch: a reader's `open` of the upper path either
//! succeeds (its descriptor stays valid after the unlink) or finds nothing and opens the lower
//! copy, which was durable before the unlink. The writer's open cleans up what a crash leaves
//! ([`clean_up`]): `.tmp` files in the lower directory, upper copies whose lower copy is complete.

use crate::control::FLAG_ARCHIVE;
use crate::error::{FileKind, Result, StoreError};
use crate::layout::{LEGACY_PACK, parse_chunk_name};
use crate::repo::Repo;
use crate::storage::{Directory, DiskDirectory, Layers, Storage, StoreFiles};
use larch_core::Hash;
use std::io::{self, ErrorKind};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Suffix of a copy being written in the lower directory (`chunk.<seq>.tmp`): never read, removed
/// by the writer's open.
pub const TMP_SUFFIX: &str = ".tmp";

/// Bytes copied per read and write when a chunk moves.
const COPY_BUFFER: u64 = 1 << 20;

/// Bytes compared at the start of both copies of a chunk (its header) to tell a complete lower
/// copy (with the same length).
const HEADER_BYTES: u64 = crate::layout::CHUNK_HEADER_LEN;

/// Whether `name` is a file of the pack that may move: a chunk file or a format-2 `pack`.
fn is_pack_file(name: &str) -> bool {
    name == LEGACY_PACK || parse_chunk_name(name).is_some()
}

/// A store directory with a lower layer. Chunk files are created, written, renamed and removed in
/// the upper directory; a read-only `open` that finds no file in the upper directory opens the
/// lower one (a missing file names both directories). The listing is the union of both.
#[derive(Debug)]
pub struct LayeredDirectory {
    upper: Arc<dyn Directory>,
    lower: Arc<dyn Directory>,
    upper_name: String,
    lower_name: String,
}

impl LayeredDirectory {
    /// The store directory `upper` over the lower directory `lower`; the names are used in error
    /// messages (paths, for directories on disk).
    pub fn new(
        upper: Arc<dyn Directory>,
        lower: Arc<dyn Directory>,
        upper_name: impl Into<String>,
        lower_name: impl Into<String>,
    ) -> LayeredDirectory {
        LayeredDirectory { upper, lower, upper_name: upper_name.into(), lower_name: lower_name.into() }
    }

    /// The names of the files of `dir`; none when the directory does not exist.
    fn list_of(dir: &dyn Directory) -> io::Result<Vec<String>> {
        match dir.list() {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
            other => other,
        }
    }
}

impl Directory for LayeredDirectory {
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        self.upper.create(name)
    }

    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>> {
        if writable {
            return self.upper.open(name, true);
        }
        match self.upper.open(name, false) {
            Err(e) if e.kind() == ErrorKind::NotFound => match self.lower.open(name, false) {
                Err(e) if e.kind() == ErrorKind::NotFound => Err(io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "{name} is neither in the store directory {} nor in the lower directory {}",
                        self.upper_name, self.lower_name
                    ),
                )),
                other => other,
            },
            other => other,
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = self.upper.list()?;
        names.extend(Self::list_of(&*self.lower)?);
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match self.upper.remove(name) {
            Err(e) if e.kind() == ErrorKind::NotFound => self.lower.remove(name),
            other => other,
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.upper.sync()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.upper.rename(from, to)
    }

    fn layers(&self) -> Option<Layers<'_>> {
        Some((&self.upper, &self.lower))
    }
}

/// What [`Repo::archive`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArchiveReport {
    /// Sequence number of the chunk holding the commit: every chunk below it is in the lower
    /// directory afterwards.
    pub commit_chunk: u32,
    /// Chunk files moved by this call.
    pub chunks_moved: u64,
    /// Bytes of the chunk files moved by this call.
    pub bytes_moved: u64,
    /// Chunk files below `commit_chunk` that an earlier call had already moved.
    pub chunks_already_lower: u64,
    /// Chunk files left in the upper directory (the head, and the chunks from `commit_chunk` on).
    pub upper_chunks: u64,
    /// Whether this call published the archive flag (the first move of the store).
    pub flag_published: bool,
    /// Wall-clock time of the call.
    pub elapsed: Duration,
}

fn pack_io(name: &str, op: &'static str, e: io::Error) -> StoreError {
    StoreError::io(FileKind::Pack, 0, op, io::Error::new(e.kind(), format!("{name}: {e}")))
}

/// Whether `name` in `lower` is a complete copy of `name` in `upper`: same length, same header.
fn same_copy(upper: &dyn Directory, lower: &dyn Directory, name: &str) -> Result<bool> {
    let open = |dir: &dyn Directory| match dir.open(name, false) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(pack_io(name, "open", e)),
    };
    let (Some(up), Some(low)) = (open(upper)?, open(lower)?) else { return Ok(false) };
    let len = up.len().map_err(|e| pack_io(name, "stat", e))?;
    if low.len().map_err(|e| pack_io(name, "stat", e))? != len {
        return Ok(false);
    }
    let take = usize::try_from(len.min(HEADER_BYTES)).unwrap_or(0);
    let (mut a, mut b) = (vec![0u8; take], vec![0u8; take]);
    up.read_at(0, &mut a).map_err(|e| pack_io(name, "read", e))?;
    low.read_at(0, &mut b).map_err(|e| pack_io(name, "read", e))?;
    Ok(a == b)
}

/// Moves the pack file `name` from `upper` to `lower`: copy to `name.tmp`, sync it, rename it,
/// sync the lower directory, unlink the upper copy. Returns the bytes moved.
fn move_file(upper: &dyn Directory, lower: &dyn Directory, name: &str) -> Result<u64> {
    let source = upper.open(name, false).map_err(|e| pack_io(name, "open", e))?;
    let len = source.len().map_err(|e| pack_io(name, "stat", e))?;
    let tmp = format!("{name}{TMP_SUFFIX}");
    let copy = lower.create(&tmp).map_err(|e| pack_io(&tmp, "create in the lower directory", e))?;
    let mut buf = vec![0u8; usize::try_from(len.min(COPY_BUFFER)).unwrap_or(0)];
    let mut at = 0u64;
    while at < len {
        let take = usize::try_from((len - at).min(COPY_BUFFER)).unwrap_or(0);
        let piece = buf.get_mut(..take).unwrap_or_default();
        source.read_at(at, piece).map_err(|e| pack_io(name, "read", e))?;
        copy.write_at(at, piece).map_err(|e| pack_io(&tmp, "write", e))?;
        at += take as u64;
    }
    copy.sync().map_err(|e| pack_io(&tmp, "sync", e))?;
    drop(copy);
    lower.rename(&tmp, name).map_err(|e| pack_io(&tmp, "rename in the lower directory", e))?;
    lower.sync().map_err(|e| pack_io(name, "sync the lower directory", e))?;
    upper.remove(name).map_err(|e| pack_io(name, "unlink the upper copy", e))?;
    Ok(len)
}

/// The writer's open in archive mode (no-op on a plain directory): removes the `.tmp` copies of
/// the lower directory and, when the store's flags say it is archived, the upper copies of sealed
/// chunks (below `head`) whose lower copy is complete (same length and header). Returns the
/// sequence numbers of the chunks whose upper copy it removed (the caller reopens them).
pub(crate) fn clean_up(dir: &dyn Directory, flags: u32, head: u32) -> Result<Vec<u32>> {
    let Some((upper, lower)) = dir.layers() else { return Ok(Vec::new()) };
    let lower_names =
        LayeredDirectory::list_of(&**lower).map_err(|e| pack_io("lower directory", "list", e))?;
    let mut removed_tmp = false;
    for name in &lower_names {
        if name.strip_suffix(TMP_SUFFIX).is_some_and(is_pack_file) {
            lower.remove(name).map_err(|e| pack_io(name, "remove a partial copy", e))?;
            removed_tmp = true;
        }
    }
    if removed_tmp {
        lower.sync().map_err(|e| pack_io("lower directory", "sync", e))?;
    }
    let mut removed = Vec::new();
    if flags & FLAG_ARCHIVE == 0 {
        return Ok(removed);
    }
    let upper_names = upper.list().map_err(|e| pack_io("store directory", "list", e))?;
    for name in upper_names.iter().filter(|name| is_pack_file(name) && lower_names.contains(name)) {
        let seq = parse_chunk_name(name).unwrap_or(0);
        if seq >= head || !same_copy(&**upper, &**lower, name)? {
            continue;
        }
        upper.remove(name).map_err(|e| pack_io(name, "unlink the upper copy", e))?;
        removed.push(seq);
    }
    if !removed.is_empty() {
        upper.sync().map_err(|e| pack_io("store directory", "sync", e))?;
    }
    Ok(removed)
}

/// The store files of a store opened at `path` with the lower directory `lower` on disk. A writer
/// creates the lower directory when absent (and syncs its parent). The lower directory may not be
/// the store directory.
pub(crate) fn with_lower(
    mut files: StoreFiles,
    path: &Path,
    lower: &Path,
    mmap: bool,
    writable: bool,
) -> Result<StoreFiles> {
    let dir_error = |op, source| StoreError::Directory { path: lower.into(), op, source };
    if writable && !lower.exists() {
        std::fs::create_dir_all(lower).map_err(|e| dir_error("create", e))?;
        if let Some(parent) = lower.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|dir| dir.sync_all())
                .map_err(|e| dir_error("sync parent", e))?;
        }
    }
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(path), std::fs::canonicalize(lower))
        && a == b
    {
        return Err(StoreError::ArchiveRefused(format!(
            "the lower directory {} is the store directory itself",
            lower.display()
        )));
    }
    files.dir = Arc::new(LayeredDirectory::new(
        files.dir,
        Arc::new(DiskDirectory::new(lower, mmap)),
        path.display().to_string(),
        lower.display().to_string(),
    ));
    Ok(files)
}

impl Repo {
    /// Archive mode: moves every sealed chunk file wholly below the chunk holding `commit` to the
    /// lower directory (`docs/store.md` *Archive mode*). Nothing is collected: every commit stays
    /// readable, through this handle and any other. Staged commits are published first; the first
    /// move of a store publishes the archive flag before any upper copy is unlinked. Each chunk:
    /// copy to `chunk.<seq>.tmp` in the lower directory, `fdatasync`, rename, `fsync` of the lower
    /// directory, unlink of the upper copy; this handle then reads the lower copy. Chunks already
    /// moved are counted, not copied again.
    ///
    /// Refused with [`StoreError::ReadOnly`] on a reader, [`StoreError::ArchiveRefused`] when the
    /// store was opened without a lower directory, [`StoreError::UnknownCommit`] for a commit not
    /// in the store.
    pub fn archive(&mut self, commit: &Hash) -> Result<ArchiveReport> {
        let started = Instant::now();
        if !self.writable {
            return Err(StoreError::ReadOnly);
        }
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let Some((upper, lower)) =
            self.files.dir.layers().map(|(upper, lower)| (upper.clone(), lower.clone()))
        else {
            return Err(StoreError::ArchiveRefused(
                "the store was opened without a lower directory (RepoOptions::lower, --lower DIR)".into(),
            ));
        };
        let offset = *self.commits.get(commit).ok_or(StoreError::UnknownCommit(*commit))?;
        self.flush()?;
        let layout = self.source.reader.layout().clone();
        let (commit_chunk, _) = layout.chunk_before(offset + 1);
        let first = layout.first_seq();
        let mut report = ArchiveReport { commit_chunk, ..ArchiveReport::default() };
        let mut to_move = Vec::new();
        for (seq, (name, _, _)) in (first..).zip(layout.chunk_files(self.state.pack_end)) {
            if seq >= commit_chunk {
                break;
            }
            match upper.open(&name, false) {
                Ok(_) => to_move.push((seq, name)),
                Err(e) if e.kind() == ErrorKind::NotFound => report.chunks_already_lower += 1,
                Err(e) => return Err(pack_io(&name, "open", e)),
            }
        }
        if !to_move.is_empty() && self.state.flags & FLAG_ARCHIVE == 0 {
            self.publish_archive_flag()?;
            report.flag_published = true;
        }
        for (seq, name) in &to_move {
            report.bytes_moved += move_file(&*upper, &*lower, name)?;
            report.chunks_moved += 1;
            // Release the unlinked upper copy: this handle reads the lower one from now on.
            layout.reopen_chunk(*seq)?;
        }
        if !to_move.is_empty() {
            upper.sync().map_err(|e| pack_io("store directory", "sync", e))?;
        }
        let names = upper.list().map_err(|e| pack_io("store directory", "list", e))?;
        report.upper_chunks = names.iter().filter(|name| is_pack_file(name)).count() as u64;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Publishes the current state with the archive flag set (no new commit). A failure poisons
    /// the handle, as any failed publish does.
    fn publish_archive_flag(&mut self) -> Result<()> {
        let mut state = self.state.clone();
        state.flags |= FLAG_ARCHIVE;
        if let Err(e) = self.write_switch(&mut state) {
            self.poisoned = true;
            return Err(e);
        }
        self.state = state;
        Ok(())
    }

    /// The writer's open in archive mode: [`clean_up`], then reopens the chunks whose upper copy
    /// it removed (so that this handle reads the lower copies).
    pub(crate) fn archive_clean_up(&mut self) -> Result<()> {
        let layout = self.source.reader.layout().clone();
        for seq in clean_up(&*self.files.dir, self.state.flags, layout.head().0)? {
            layout.reopen_chunk(seq)?;
        }
        Ok(())
    }

    /// Whether the store is in archive mode (its published state carries the archive flag: chunk
    /// files may be in the lower directory).
    pub fn is_archived(&self) -> bool {
        self.state.flags & FLAG_ARCHIVE != 0
    }
}
