//! The pack's layout: the global offset space of the pack (`ObjectKey` offsets, back pointers,
//! the commit index) mapped onto files. Since format 3 the pack is a sequence of chunk files
//! `chunk.<seq>` (`docs/format.md` §3), each holding the records of the global range
//! `[start, next chunk's start)`; a format-2 `pack` is read as chunk 0 (file position = global
//! offset). A [`Layout`] maps a global offset to (file, position) by binary search over its
//! [`Extent`]s; records never span chunks. Writes go to the head chunk only: the writer rolls to
//! a new chunk ([`Layout::roll`]) at the start of a commit once the head holds
//! `RepoOptions::chunk_bytes`.
//!
//! The [`Extent`] is an enum so that a GC *segment* (a file with its own run mapping,
//! `docs/gc-design.md` §3.3) can join the layout later as another variant.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::names::{
    CHUNK_HEADER_LEN, LEGACY_PACK, chunk_name, encode_chunk_header, parse_chunk_name,
};
use crate::io::storage::{Directory, Storage};
use crate::io::usage::DiskUsage;
use crate::pack::handles::{ChunkFile, FilePool};
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex, RwLock};

mod probe;
mod refresh;
mod segments;

use probe::check_chunks;
pub(crate) use probe::{Probe, open_chunk};

pub use refresh::RefreshHook;

pub use segments::SegmentExtent;
pub(crate) use segments::entries_of;

/// A chunk file of the layout.
#[derive(Clone, Debug)]
pub struct ChunkExtent {
    /// Its sequence number.
    pub seq: u32,
    /// Global offset of its first record.
    pub start: u64,
    /// File position of global offset `start` (32, or 16 for a format-2 `pack`).
    pub data_at: u64,
    /// Whether it is a format-2 `pack` (never written by format 3).
    pub legacy: bool,
    /// The file, opened lazily behind the layout's [`FilePool`] (the writer's head: pinned open).
    pub file: Arc<ChunkFile>,
}

impl ChunkExtent {
    /// The file's name.
    pub fn name(&self) -> String {
        if self.legacy { LEGACY_PACK.to_string() } else { chunk_name(self.seq) }
    }
}

/// A piece of the global offset space and the file holding it.
#[derive(Clone, Debug)]
pub enum Extent {
    /// A chunk file: global `g` at file position `data_at + g - start`.
    Chunk(ChunkExtent),
    /// A GC segment: global `g` through the segment's run mapping (a collected offset is
    /// [`StoreError::CollectedObject`]).
    Segment(SegmentExtent),
}

impl Extent {
    /// The global offset where the extent starts.
    pub fn start(&self) -> u64 {
        match self {
            Extent::Chunk(chunk) => chunk.start,
            Extent::Segment(segment) => segment.reference.range_start,
        }
    }

    /// The file and position of global offset `global` (at or above [`Extent::start`]).
    pub fn resolve(&self, global: u64) -> Result<(Arc<dyn Storage>, u64)> {
        match self {
            Extent::Chunk(chunk) => Ok((chunk.file.clone(), chunk.data_at + (global - chunk.start))),
            Extent::Segment(segment) => {
                Ok((segment.segment.storage().clone(), segment.segment.locate(global)?.position))
            }
        }
    }

    fn as_chunk(&self) -> Option<&ChunkExtent> {
        match self {
            Extent::Chunk(chunk) => Some(chunk),
            Extent::Segment(_) => None,
        }
    }
}

/// What the next sync must cover.
#[derive(Debug, Default)]
struct Pending {
    /// Sequence number of the first chunk that may hold unsynced writes.
    from: u32,
    /// A chunk file was created since the directory was last synced.
    dir: bool,
}

/// The pack's files, mapping global offsets to positions (see the module documentation). It is
/// also a [`Storage`] over the global offset space (writes go to the head chunk), which is how the
/// writer and the bulk writer append.
#[derive(Debug)]
pub struct Layout {
    dir: Arc<dyn Directory>,
    writable: bool,
    /// Sorted by start; never empty; the last is the head chunk.
    extents: RwLock<Vec<Extent>>,
    pending: Mutex<Pending>,
    /// The open sealed chunk files, bounded (shared with snapshots and reloads of this layout).
    pool: Arc<FilePool>,
    /// A read-only layout's refreshes across a writer's GC (`refresh`).
    refresher: refresh::Refresher,
    /// The remembered lengths of its directory's sealed chunk files ([`Layout::disk_bytes`]).
    usage: DiskUsage,
}

fn io_error(offset: u64, op: &'static str, e: io::Error) -> StoreError {
    StoreError::io(FileKind::Pack, offset, op, e)
}

impl Layout {
    /// Creates chunk 0 of a new store (start 16), synced with the directory.
    pub fn create_first(dir: &Arc<dyn Directory>) -> Result<()> {
        let name = chunk_name(0);
        let file = dir.create(&name).map_err(|e| io_error(0, "create", e))?;
        file.write_at(0, &encode_chunk_header(0, PACK_HEADER_LEN)).map_err(|e| io_error(0, "write", e))?;
        file.sync().map_err(|e| io_error(0, "sync", e))?;
        dir.sync().map_err(|e| io_error(0, "sync directory", e))
    }

    /// Opens the chunks `first..=head` of a published state whose head starts at `head_start` and
    /// whose pack ends at `end`, checking their headers, their contiguity and their lengths.
    ///
    /// Every chunk is opened once (its header says where it starts); the sealed ones enter `pool`,
    /// which keeps the newest of them open, the writer's head is pinned open.
    pub fn open(
        dir: Arc<dyn Directory>,
        (first, head): (u32, u32),
        head_start: u64,
        end: u64,
        writable: bool,
        pool: Arc<FilePool>,
    ) -> Result<Layout> {
        if first > head {
            return Err(StoreError::corrupt(
                FileKind::Control,
                72,
                format!("first chunk {first} after head {head}"),
            ));
        }
        let mut chunks = Vec::new();
        let mut extents = Vec::new();
        for seq in first..=head {
            let pin = writable && seq == head;
            let (probe, file) = open_chunk(&*dir, seq, pin)?;
            chunks.push(probe.clone());
            extents.push(Extent::Chunk(probe.into_extent(&dir, &pool, file, pin)));
        }
        if chunks.first().is_some_and(|chunk| chunk.start != PACK_HEADER_LEN) && first == 0 {
            return Err(StoreError::corrupt(FileKind::Pack, 24, "the first chunk does not start at 16"));
        }
        if chunks.last().is_some_and(|chunk| chunk.start != head_start) {
            return Err(StoreError::corrupt(
                FileKind::Control,
                80,
                format!("the head chunk starts at {head_start} in the control file, not in its header"),
            ));
        }
        check_chunks(&chunks, end)?;
        Ok(Layout {
            dir,
            writable,
            extents: RwLock::new(extents),
            pending: Mutex::new(Pending { from: head, dir: false }),
            pool,
            refresher: refresh::Refresher::default(),
            usage: DiskUsage::default(),
        })
    }

    /// The layout of whatever chunk files `dir` holds (for recovery and tools, which have no
    /// trustworthy state): chunk 0 (or a format-2 `pack`) and the chunks that follow it without a
    /// gap, read-only. The last one's file bounds the pack ([`Storage::len`]).
    pub fn discover(dir: Arc<dyn Directory>) -> Result<Layout> {
        let names = dir.list().map_err(|e| io_error(0, "list", e))?;
        let mut seqs: Vec<u32> = names.iter().filter_map(|name| parse_chunk_name(name)).collect();
        seqs.sort_unstable();
        let pool = FilePool::new(crate::options::DEFAULT_OPEN_FILES);
        let (first, file) = open_chunk(&*dir, 0, false)?;
        let mut last = first.clone();
        let mut extents = vec![Extent::Chunk(first.into_extent(&dir, &pool, file, false))];
        for seq in seqs.into_iter().filter(|seq| *seq > 0) {
            if seq != last.seq + 1 {
                break;
            }
            let (next, file) = match open_chunk(&*dir, seq, false) {
                Ok(opened) => opened,
                // Gone since the listing, or left unfinished by a crashed roll: the pack ends here.
                Err(StoreError::MissingFile { .. } | StoreError::Corrupt { .. }) => break,
                // The system's failure (out of descriptors, say) is not the pack's end.
                Err(e) => return Err(e),
            };
            if !next.follows(&last) {
                break;
            }
            last = next.clone();
            extents.push(Extent::Chunk(next.into_extent(&dir, &pool, file, false)));
        }
        Ok(Layout {
            dir,
            writable: false,
            extents: RwLock::new(extents),
            pending: Mutex::default(),
            pool,
            refresher: refresh::Refresher::default(),
            usage: DiskUsage::default(),
        })
    }

    fn extents(&self) -> std::sync::RwLockReadGuard<'_, Vec<Extent>> {
        self.extents.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sequence number and start of the head chunk.
    pub fn head(&self) -> (u32, u64) {
        self.extents()
            .last()
            .and_then(Extent::as_chunk)
            .map_or((0, PACK_HEADER_LEN), |chunk| (chunk.seq, chunk.start))
    }

    /// Global start of the first chunk (16, or where the collected space ends).
    pub fn first_chunk_start(&self) -> u64 {
        self.extents().iter().find_map(Extent::as_chunk).map_or(PACK_HEADER_LEN, |chunk| chunk.start)
    }

    /// Sequence number of the first chunk.
    pub fn first_seq(&self) -> u32 {
        self.extents().iter().find_map(Extent::as_chunk).map_or(0, |chunk| chunk.seq)
    }

    /// Whether the head is a format-2 `pack` (never written by format 3: the writer rolls first).
    pub fn head_is_legacy(&self) -> bool {
        self.extents().last().and_then(Extent::as_chunk).is_some_and(|chunk| chunk.legacy)
    }

    /// The chunk files: name, global start and global end (`end` for the head).
    pub fn chunk_files(&self, end: u64) -> Vec<(String, u64, u64)> {
        let extents = self.extents();
        extents
            .iter()
            .enumerate()
            .filter_map(|(i, extent)| {
                let range_end = extents.get(i + 1).map_or(end, Extent::start);
                extent.as_chunk().map(|chunk| (chunk.name(), chunk.start, range_end))
            })
            .collect()
    }

    /// Sequence number and start of the chunk holding the last byte before `end` (the head of a
    /// state whose pack ends at `end`).
    pub fn chunk_before(&self, end: u64) -> (u32, u64) {
        let extents = self.extents();
        let index = extents.partition_point(|extent| extent.start() < end).saturating_sub(1);
        extents
            .get(index)
            .and_then(Extent::as_chunk)
            .map_or((0, PACK_HEADER_LEN), |chunk| (chunk.seq, chunk.start))
    }

    /// The chunk `seq`, if the layout holds it.
    pub fn chunk_extent(&self, seq: u32) -> Option<ChunkExtent> {
        self.extents().iter().filter_map(Extent::as_chunk).find(|chunk| chunk.seq == seq).cloned()
    }

    /// The sum of the lengths of every file in the layout's directory (the store's size on disk):
    /// one listing, and a length lookup for each file but the sealed chunks (those before the
    /// head), whose lengths never change and are remembered once looked up.
    pub fn disk_bytes(&self) -> Result<u64> {
        // Read before the listing: a chunk before this head is sealed even if the writer rolls
        // meanwhile.
        let (head, _) = self.head();
        self.usage.total(&*self.dir, |name| {
            crate::format::names::parse_chunk_name(name).is_some_and(|seq| seq < head)
        })
    }

    /// Lengths of files looked up on disk by [`Layout::disk_bytes`] so far.
    pub fn disk_lookups(&self) -> u64 {
        self.usage.lookups()
    }

    /// The budget of the memory maps the chunk files are read through, if they are.
    pub fn map_budget(&self) -> Option<Arc<crate::io::map_budget::MapBudget>> {
        self.dir.map_budget()
    }

    /// Number of chunk files.
    pub fn chunk_count(&self) -> usize {
        self.extents().iter().filter(|extent| extent.as_chunk().is_some()).count()
    }

    /// The file and position holding global offset `global`, with the global end of its extent
    /// (`u64::MAX` for the head). An offset below the first extent is [`StoreError::Unmapped`].
    pub fn resolve(&self, global: u64) -> Result<(Arc<dyn Storage>, u64, u64)> {
        let extents = self.extents();
        let index = extents.partition_point(|extent| extent.start() <= global);
        let Some(extent) = index.checked_sub(1).and_then(|i| extents.get(i)) else {
            return Err(StoreError::Unmapped { offset: global });
        };
        let (file, position) = extent.resolve(global)?;
        Ok((file, position, extents.get(index).map_or(u64::MAX, Extent::start)))
    }

    /// Tells the files holding global offsets `[global, global + len)` that these bytes will be
    /// read soon ([`Storage::will_need`], each file its part): a sequential pass asks for the
    /// piece after the one it reads, since the kernel reads nothing ahead of the pack's files
    /// (`io/disk.rs`). Only advice: from an offset the layout does not map, nothing is asked.
    pub fn will_need(&self, global: u64, len: u64) {
        let end = global.saturating_add(len);
        let mut at = global;
        while at < end {
            let Ok((file, position, extent_end)) = self.resolve(at) else { return };
            file.will_need(position, end.min(extent_end) - at);
            at = extent_end;
        }
    }

    /// [`Layout::read`] in the layout as it is (no refresh).
    fn read_once(&self, global: u64, buf: &mut [u8]) -> Result<()> {
        let extents = self.extents();
        let mut at = global;
        let mut done = 0usize;
        while done < buf.len() {
            let index = extents.partition_point(|extent| extent.start() <= at);
            let Some(extent) = index.checked_sub(1).and_then(|i| extents.get(i)) else {
                return Err(StoreError::Unmapped { offset: at });
            };
            let mut limit = extents.get(index).map_or(u64::MAX, Extent::start);
            if let Extent::Segment(segment) = extent {
                // Inside a segment, a read ends with its run. The first byte must be mapped; the
                // bytes of a hole after it are never part of a record that starts in a run (records
                // are copied whole): they read as zeros (a record running into them fails its
                // checksum).
                match segment.segment.locate(at) {
                    Ok(slot) => limit = limit.min(at + slot.available),
                    Err(e) if done == 0 => return Err(e),
                    Err(_) => {
                        let hole_end = segment.segment.next_run_after(at).unwrap_or(limit).min(limit);
                        let take = usize::try_from((hole_end - at).min((buf.len() - done) as u64))
                            .unwrap_or(buf.len() - done);
                        buf.get_mut(done..done + take).unwrap_or_default().fill(0);
                        done += take;
                        at += take as u64;
                        continue;
                    }
                }
            }
            let take =
                usize::try_from((limit - at).min((buf.len() - done) as u64)).unwrap_or(buf.len() - done);
            let piece = buf.get_mut(done..done + take).unwrap_or_default();
            let read = match extent {
                // The chunk's file is opened first if its descriptor was closed (typed errors).
                Extent::Chunk(chunk) => {
                    chunk.file.with(|file| file.read_at(chunk.data_at + (at - chunk.start), piece))?
                }
                Extent::Segment(segment) => {
                    let position = segment.segment.locate(at)?.position;
                    segment.segment.storage().read_at(position, piece)
                }
            };
            read.map_err(|e| match (e.kind(), extent) {
                // An open file of a lower layer that does not keep removed files readable (object
                // storage) answers "not found" once a GC removed it: as a file gone at its opening.
                (ErrorKind::NotFound, Extent::Chunk(chunk)) => StoreError::MissingFile {
                    file: FileKind::Pack,
                    what: "chunk",
                    name: chunk.name(),
                    detail: format!("{e}; reading it"),
                },
                // A chunk kept in place is reopened like any chunk when its pool closed it: gone
                // once a GC merged it (the layout then follows that GC).
                (ErrorKind::NotFound, Extent::Segment(segment)) => {
                    let (file, what) = match segment.reference.kept_chunk() {
                        Some(_) => (FileKind::Pack, "chunk kept in place"),
                        None => (FileKind::Segment, "segment"),
                    };
                    StoreError::MissingFile {
                        file,
                        what,
                        name: segment.name(),
                        detail: format!("{e}; reading it"),
                    }
                }
                (ErrorKind::UnexpectedEof, _) => StoreError::Truncated {
                    file: FileKind::Pack,
                    offset: at,
                    len: take as u64,
                    file_len: extent.resolve(at).map_or(0, |(file, _)| file.len().unwrap_or(0)),
                },
                (_, _) => io_error(at, "read", e),
            })?;
            done += take;
            at += take as u64;
        }
        Ok(())
    }

    /// Starts chunk `head + 1` at global offset `start` (the pack's end): creates its file and
    /// writes its header. The file, the previous head and the directory are synced by the next
    /// [`Storage::sync`], before a control slot names the new chunk.
    pub fn roll(&self, start: u64) -> Result<()> {
        if !self.writable {
            return Err(StoreError::ReadOnly);
        }
        let (seq, head_start) = self.head();
        if start < head_start {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                start,
                "a new chunk cannot start below the head",
            ));
        }
        let seq = seq
            .checked_add(1)
            .ok_or_else(|| StoreError::TooLarge("chunk sequence numbers exhausted".into()))?;
        let name = chunk_name(seq);
        let file = self.dir.create(&name).map_err(|e| io_error(start, "create chunk", e))?;
        file.write_at(0, &encode_chunk_header(seq, start))
            .map_err(|e| io_error(start, "write chunk header", e))?;
        let probe = Probe { seq, start, data_at: CHUNK_HEADER_LEN, legacy: false, len: CHUNK_HEADER_LEN };
        let chunk = probe.into_extent(&self.dir, &self.pool, file, true);
        let mut extents = self.extents.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The previous head is sealed: its writable descriptor closes now, and it is read (and
        // synced, by the next sync: `fdatasync` through a read-only descriptor flushes the file's
        // written pages as well) through the pool from now on, so that many rolls between two
        // syncs (`SyncPolicy::Never`) do not hold a descriptor each.
        if let Some(Extent::Chunk(previous)) = extents.last() {
            previous.file.unpin();
        }
        extents.push(Extent::Chunk(chunk));
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).dir = true;
        Ok(())
    }

    /// For a reader: opens the chunks a newer published state names (`first..=head`, the head
    /// starting at `head_start`, the pack ending at `end`). Returns the number of chunks opened.
    pub fn follow(&self, (first, head): (u32, u32), head_start: u64, end: u64) -> Result<usize> {
        let (our_head, _) = self.head();
        if first != self.first_seq() || head < our_head {
            return Err(StoreError::corrupt(
                FileKind::Control,
                72,
                format!(
                    "the published chunks {first}..={head} do not extend this reader's ({}..={our_head})",
                    self.first_seq()
                ),
            ));
        }
        // Each chunk enters the pool as soon as it is opened, so that a reader far behind the
        // writer (many rolls since its last reload) still holds at most the pool's capacity.
        let mut chunks = Vec::new();
        for seq in our_head + 1..=head {
            let (probe, file) = open_chunk(&*self.dir, seq, false)?;
            chunks.push((probe.clone(), probe.into_extent(&self.dir, &self.pool, file, false)));
        }
        let mut extents = self.extents.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Our head (its length now) and the new chunks.
        let mut probes = Vec::with_capacity(chunks.len() + 1);
        if let Some(Extent::Chunk(ours)) = extents.last() {
            let len = ours.file.len().map_err(|e| io_error(ours.start, "stat", e))?;
            let (seq, start, data_at, legacy) = (ours.seq, ours.start, ours.data_at, ours.legacy);
            probes.push(Probe { seq, start, data_at, legacy, len });
        }
        probes.extend(chunks.iter().map(|(probe, _)| probe.clone()));
        if probes.last().is_some_and(|chunk| chunk.start != head_start) {
            return Err(StoreError::corrupt(
                FileKind::Control,
                80,
                "the head chunk's start disagrees with its header",
            ));
        }
        check_chunks(&probes, end)?;
        let opened = chunks.len();
        for (_, chunk) in chunks {
            extents.push(Extent::Chunk(chunk));
        }
        Ok(opened)
    }

    /// Opens sealed chunk `seq` again through the directory and puts the new file in place of the
    /// one the layout holds (archive mode: once the chunk moved to the lower directory, this
    /// releases the descriptor of the unlinked upper copy, and with it its disk space). Its header
    /// must say the same start. Returns `false` when `seq` is the head or not in the layout.
    pub fn reopen_chunk(&self, seq: u32) -> Result<bool> {
        let (head, _) = self.head();
        if seq >= head || seq < self.first_seq() {
            return Ok(false);
        }
        let (opened, file) = open_chunk(&*self.dir, seq, false)?;
        let extents = self.extents();
        let found = extents.iter().find_map(|extent| match extent {
            Extent::Chunk(chunk) if chunk.seq == seq => Some(chunk),
            _ => None,
        });
        let Some(chunk) = found else { return Ok(false) };
        if opened.start != chunk.start || opened.legacy != chunk.legacy {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                16,
                format!(
                    "{}: reopened, its header says start {} (was {})",
                    chunk.name(),
                    opened.start,
                    chunk.start
                ),
            ));
        }
        chunk.file.replace(file);
        Ok(true)
    }

    /// Archive mode, for a reader (on reload of an archived state): reopens the sealed chunks that
    /// left the upper directory (moved to the lower one) while this layout held their upper copy,
    /// so that the descriptors of the unlinked copies, and the disk space behind them, are
    /// released. Chunks move from the bottom up, so the moved ones are a prefix of the layout's
    /// chunks: a binary search with `open` in the upper directory finds its end (a few `open`s),
    /// then each of them whose descriptor is open (at most the pool's capacity) and no longer the
    /// file its name points to ([`Storage::check_identity`]) is reopened; a closed one is opened
    /// from wherever its name points when next read. Returns the number of chunks reopened (0 on
    /// a directory without a lower layer).
    pub fn release_moved(&self) -> Result<usize> {
        let Some((upper, _)) = self.dir.layers() else { return Ok(0) };
        let (head, _) = self.head();
        let chunks: Vec<ChunkExtent> = self
            .extents()
            .iter()
            .filter_map(|extent| match extent {
                Extent::Chunk(chunk) if chunk.seq < head => Some(chunk.clone()),
                _ => None,
            })
            .collect();
        let in_upper = |chunk: &ChunkExtent| match upper.open(&chunk.name(), false) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(chunk.start, "open", e)),
        };
        let (mut moved, mut above) = (0, chunks.len());
        while moved < above {
            let mid = moved + (above - moved) / 2;
            match chunks.get(mid) {
                Some(chunk) if !in_upper(chunk)? => moved = mid + 1,
                _ => above = mid,
            }
        }
        // Only the chunks whose descriptor is open hold an upper copy (at most the pool's
        // capacity); a closed one is reopened from wherever its name points when next read.
        let mut reopened = 0;
        for chunk in chunks.get(..moved).unwrap_or_default().iter().rev() {
            if chunk.file.check_held_identity().is_ok() {
                continue;
            }
            self.reopen_chunk(chunk.seq)?;
            reopened += 1;
        }
        Ok(reopened)
    }

    /// For a writer at open: removes chunk files above the head (created by a roll that was never
    /// published) and syncs the directory if it removed any. Returns their names. Only the store
    /// directory itself is looked at: never a lower directory (a roll creates chunks upper).
    pub fn remove_orphans(&self) -> Result<Vec<String>> {
        let (head, _) = self.head();
        let names = self.dir.list_upper().map_err(|e| io_error(0, "list", e))?;
        let orphans: Vec<String> =
            names.into_iter().filter(|name| parse_chunk_name(name).is_some_and(|seq| seq > head)).collect();
        for name in &orphans {
            self.dir.remove_upper(name).map_err(|e| io_error(0, "remove orphan chunk", e))?;
        }
        if !orphans.is_empty() {
            self.dir.sync().map_err(|e| io_error(0, "sync directory", e))?;
        }
        Ok(orphans)
    }

    /// Reads every chunk's header again and checks it and the file's length against the layout
    /// (fsck): returns `(file name, problem)` pairs.
    pub fn check_files(&self, end: u64) -> Vec<(String, String)> {
        let chunks: Vec<ChunkExtent> = self.extents().iter().filter_map(Extent::as_chunk).cloned().collect();
        let mut problems = self.check_segments();
        let mut probes = Vec::with_capacity(chunks.len());
        for chunk in &chunks {
            match open_chunk(&*self.dir, chunk.seq, false) {
                Ok((found, _)) if found.start == chunk.start && found.legacy == chunk.legacy => {
                    probes.push(found)
                }
                Ok((found, _)) => {
                    problems.push((chunk.name(), format!("its header now says start {}", found.start)))
                }
                Err(e) => problems.push((chunk.name(), e.to_string())),
            }
        }
        if probes.len() == chunks.len()
            && let Err(e) = check_chunks(&probes, end)
        {
            problems.push((chunks.last().map(ChunkExtent::name).unwrap_or_default(), e.to_string()));
        }
        problems
    }

    /// Whether a sync is owed that the pack's length alone does not show (a chunk was created).
    pub fn needs_sync(&self) -> bool {
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).dir
    }

    /// The whole pack as a format-2 image (16-byte pack header, then the records of every chunk
    /// at their global offsets), up to the end of the head chunk's file.
    pub fn flatten(&self) -> Result<Vec<u8>> {
        let end = self.len().map_err(|e| io_error(0, "stat", e))?;
        let len = usize::try_from(end).map_err(|_| StoreError::TooLarge("pack image".into()))?;
        let mut image = vec![0u8; len];
        if let Some(header) = image.get_mut(..PACK_HEADER_LEN as usize) {
            header.copy_from_slice(&crate::format::codec::pack_header());
        }
        self.read(PACK_HEADER_LEN, image.get_mut(PACK_HEADER_LEN as usize..).unwrap_or_default())?;
        Ok(image)
    }
}

impl Storage for Layout {
    /// The global end of what the head chunk's file holds.
    fn len(&self) -> io::Result<u64> {
        let extents = self.extents();
        let Some(Extent::Chunk(head)) = extents.last() else { return Ok(PACK_HEADER_LEN) };
        Ok(head.start + head.file.len()?.saturating_sub(head.data_at))
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read(offset, buf).map_err(|e| match e {
            StoreError::Truncated { .. } => io::Error::new(ErrorKind::UnexpectedEof, e.to_string()),
            other => io::Error::other(other.to_string()),
        })
    }

    /// Writes into the head chunk (the only one ever written).
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let extents = self.extents();
        let Some(Extent::Chunk(head)) = extents.last() else {
            return Err(io::Error::other("a layout without chunks"));
        };
        if offset < head.start || head.legacy || !self.writable {
            return Err(io::Error::new(
                ErrorKind::PermissionDenied,
                format!("write at {offset} outside the head chunk {} (start {})", head.name(), head.start),
            ));
        }
        head.file.write_at(head.data_at + (offset - head.start), data)
    }

    /// Syncs every chunk written since the last sync (the head; at a roll also the previous head
    /// and the new file), then the directory when a chunk was created.
    fn sync(&self) -> io::Result<()> {
        let extents = self.extents();
        let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for chunk in extents.iter().filter_map(Extent::as_chunk).filter(|chunk| chunk.seq >= pending.from) {
            chunk.file.sync()?;
        }
        if pending.dir {
            self.dir.sync()?;
            pending.dir = false;
        }
        pending.from = extents.last().and_then(Extent::as_chunk).map_or(0, |chunk| chunk.seq);
        Ok(())
    }

    fn check_identity(&self) -> io::Result<()> {
        match self.extents().last().and_then(Extent::as_chunk) {
            Some(chunk) => chunk.file.check_identity(),
            None => Ok(()),
        }
    }
}

impl crate::io::storage::StoreFiles {
    /// The pack as one format-2 image: the 16-byte format-2 header, then every chunk's records at
    /// their global offsets (file position = global offset), up to the end of the last chunk file.
    pub fn pack_image(&self) -> io::Result<Vec<u8>> {
        Layout::discover(self.dir.clone()).map_err(io::Error::other)?.flatten().map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests;
