//! Archive mode with a lower layer (issue 10 point 6, `docs/gc-design.md` §10, `docs/store.md`
//! *Archive mode*): instead of being collected, sealed chunk files move to a second directory
//! (another disk) given at open ([`crate::RepoOptions::lower`]), and every lookup of a chunk file
//! tries the store directory, then the lower one ([`crate::io::layered::LayeredDirectory`]). Nothing is collected:
//! every commit stays readable, and no address changes.
//!
//! A move ([`crate::Repo::archive`]) of chunk `chunk.<seq>`: copy it to `lower/chunk.<seq>.tmp`,
//! `fdatasync` the copy, rename it to `lower/chunk.<seq>`, `fsync` the lower directory, then unlink
//! the upper copy. Before the first upper copy goes, a publish sets the control slot's archive flag
//! ([`crate::format::control::FLAG_ARCHIVE`]): a store that may hold chunks only in the lower directory
//! always says so, and opening it without one fails with [`StoreError::NeedsLower`]. Sealed chunk
//! files are immutable, so the move needs no switch: a reader's `open` of the upper path either
//! succeeds (its descriptor stays valid after the unlink) or finds nothing and opens the lower
//! copy, which was durable before the unlink. The writer's open cleans up what a crash leaves
//! ([`clean_up`]): `.tmp` files in the lower directory, upper copies whose lower copy is complete.

use crate::error::{FileKind, Result, StoreError};
use crate::format::control::FLAG_ARCHIVE;
use crate::format::names::{LEGACY_PACK, parse_chunk_name};
use crate::io::layered::LayeredDirectory;
use crate::io::storage::Directory;
use std::io::{self, ErrorKind};
use std::time::Duration;

/// Suffix of a copy being written in the lower directory (`chunk.<seq>.tmp`): never read, removed
/// by the writer's open.
pub const TMP_SUFFIX: &str = ".tmp";

/// Bytes copied per read and write when a chunk moves.
const COPY_BUFFER: u64 = 1 << 20;

/// Whether `name` is a file of the pack that may move: a chunk file or a format-2 `pack`.
pub(crate) fn is_pack_file(name: &str) -> bool {
    name == LEGACY_PACK || parse_chunk_name(name).is_some()
}

/// What [`crate::Repo::archive`] did.
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

pub(crate) fn pack_io(name: &str, op: &'static str, e: io::Error) -> StoreError {
    StoreError::io(FileKind::Pack, 0, op, io::Error::new(e.kind(), format!("{name}: {e}")))
}

/// Whether `name` in `lower` is a complete copy of `name` in `upper`: the same length and the same
/// bytes, compared in full (a header is the same for the same chunk of any store, and a copy torn
/// or damaged after it must not count). The comparison needs no record of the move, so it holds
/// after a crash at any step: the upper copy is unlinked only when both copies exist and agree.
/// Only asked at a writer's open after a move was cut short (a completed move leaves one copy).
pub(crate) fn same_copy(upper: &dyn Directory, lower: &dyn Directory, name: &str) -> Result<bool> {
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
    // Read in order, with nothing read ahead by the kernel (`io/disk.rs`): asked for up front.
    up.will_need(0, len);
    low.will_need(0, len);
    let size = usize::try_from(len.min(COPY_BUFFER)).unwrap_or(0);
    let (mut a, mut b) = (vec![0u8; size], vec![0u8; size]);
    let mut at = 0u64;
    while at < len {
        let take = usize::try_from((len - at).min(COPY_BUFFER)).unwrap_or(0);
        let (a, b) = (a.get_mut(..take).unwrap_or_default(), b.get_mut(..take).unwrap_or_default());
        up.read_at(at, a).map_err(|e| pack_io(name, "read", e))?;
        low.read_at(at, b).map_err(|e| pack_io(name, "read", e))?;
        if a != b {
            return Ok(false);
        }
        at += take as u64;
    }
    Ok(true)
}

/// Moves the pack file `name` from `upper` to `lower`: copy to `name.tmp`, sync it, rename it,
/// sync the lower directory, unlink the upper copy. Returns the bytes moved.
pub(crate) fn move_file(upper: &dyn Directory, lower: &dyn Directory, name: &str) -> Result<u64> {
    let source = upper.open(name, false).map_err(|e| pack_io(name, "open", e))?;
    let len = source.len().map_err(|e| pack_io(name, "stat", e))?;
    let tmp = format!("{name}{TMP_SUFFIX}");
    let copy = lower.create(&tmp).map_err(|e| pack_io(&tmp, "create in the lower directory", e))?;
    // Read in order, with nothing read ahead by the kernel (`io/disk.rs`): asked for up front.
    source.will_need(0, len);
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
/// the lower directory (whose marker names this store: checked at open) and, when the store's
/// flags say it is archived, the upper copies of sealed chunks (below `head`) whose lower copy is
/// complete ([`same_copy`]: same bytes), after syncing that lower copy and the lower directory (a
/// crash may have cut the move before they were durable). Returns the sequence numbers of the
/// chunks whose upper copy it removed (the caller reopens them).
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
        let copy = lower.open(name, false).map_err(|e| pack_io(name, "open the lower copy", e))?;
        copy.sync().map_err(|e| pack_io(name, "sync the lower copy", e))?;
        lower.sync().map_err(|e| pack_io("lower directory", "sync", e))?;
        upper.remove(name).map_err(|e| pack_io(name, "unlink the upper copy", e))?;
        removed.push(seq);
    }
    if !removed.is_empty() {
        upper.sync().map_err(|e| pack_io("store directory", "sync", e))?;
    }
    Ok(removed)
}
