//! Chunk files opened lazily behind a bounded set of descriptors (issue 39 item 11).
//!
//! A [`ChunkFile`] is one chunk of a layout: its name, sequence number and start, and, while it is
//! open, the [`Storage`] its directory opened. Sealed chunks are opened on first use and closed
//! again by the [`FilePool`] of their handle (a `Repo`'s layout and its snapshots share one), which
//! keeps at most `capacity` of them open (`RepoOptions::open_files`) and evicts with the clock
//! algorithm: a file read since the hand last passed keeps its place once. The writer's head chunk
//! is *pinned*: opened for writing, never in the pool, never closed until it is sealed.
//!
//! Concurrency: a read holds the file's own read lock for the length of its `pread` (one atomic
//! operation when the file is open; chunks are independent, so readers of different chunks never
//! meet). The pool's mutex is taken only to open a file, never on a read. Eviction only *tries*
//! the victim's write lock: a file being read is skipped, never closed under its reader; a file
//! opened by a thread that lost the race to an eviction is read through its own `Arc` clone. So at
//! most `capacity` sealed files are open, plus, briefly, one per thread that is opening one while
//! every other is being read.
//!
//! A reopened chunk is checked against what the layout knows of it (its header's sequence number
//! and start): a file that is not there any more is [`StoreError::MissingFile`] (a GC retired it
//! since this handle's last reload), any other failure (e.g. `EMFILE`) [`StoreError::OpenFile`],
//! both naming the file and the operation.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::names::{
    CHUNK_HEADER_LEN, LEGACY_PACK, check_pack_header, chunk_name, decode_chunk_header,
};
use crate::io::storage::{Directory, Storage};
use std::fmt;
use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// The open sealed chunk files of one handle, at most `capacity` (see the module documentation).
#[derive(Debug)]
pub struct FilePool {
    capacity: usize,
    ring: Mutex<Ring>,
    /// Files opened (first opens and reopens), for tests and statistics.
    opens: AtomicU64,
}

#[derive(Debug, Default)]
struct Ring {
    /// The files the pool may close; every open unpinned file is here (an entry whose file was
    /// closed otherwise, or dropped, is removed when the hand reaches it).
    entries: Vec<Weak<ChunkFile>>,
    hand: usize,
}

impl FilePool {
    /// A pool keeping at most `capacity` files open (at least 1).
    pub fn new(capacity: usize) -> Arc<FilePool> {
        Arc::new(FilePool { capacity: capacity.max(1), ring: Mutex::default(), opens: AtomicU64::new(0) })
    }

    /// Files the pool holds an entry for (an upper bound of those open).
    pub fn entries(&self) -> usize {
        self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entries.len()
    }

    /// Files opened through the pool so far (first opens and reopens after an eviction).
    pub fn opens(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }

    /// Enters `file` (just opened) and closes others until at most `capacity` remain.
    fn register(&self, file: &ChunkFile) {
        let mut ring = self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !file.in_ring.swap(true, Ordering::Relaxed) {
            ring.entries.push(file.me.clone());
        }
        // Two turns of the hand: the first clears the reference bits, the second finds a victim.
        // If every other file is being read, the pool stays over capacity until the next open.
        let mut steps = 2 * ring.entries.len() + 1;
        while ring.entries.len() > self.capacity && steps > 0 {
            steps -= 1;
            if ring.hand >= ring.entries.len() {
                ring.hand = 0;
            }
            let at = ring.hand;
            let Some(entry) = ring.entries.get(at) else { break };
            let Some(victim) = entry.upgrade() else {
                ring.entries.swap_remove(at);
                continue;
            };
            if std::ptr::eq(&*victim, file) || victim.referenced.swap(false, Ordering::Relaxed) {
                ring.hand += 1;
                continue;
            }
            match victim.slot.try_write() {
                Ok(mut slot) => {
                    let closed = slot.take();
                    drop(slot);
                    victim.in_ring.store(false, Ordering::Relaxed);
                    ring.entries.swap_remove(at);
                    drop(closed); // Closes the descriptor (no reader holds a clone).
                }
                Err(_) => ring.hand += 1, // Being read (or opened): never closed under its user.
            }
        }
    }
}

/// One chunk file of a layout, opened lazily (see the module documentation). It is a [`Storage`]
/// over the chunk file's positions.
pub struct ChunkFile {
    dir: Arc<dyn Directory>,
    pool: Arc<FilePool>,
    me: Weak<ChunkFile>,
    /// Its sequence number.
    seq: u32,
    /// Global offset of its first record (checked against the header of every reopen).
    start: u64,
    /// A format-2 `pack`.
    legacy: bool,
    /// The open file, if any.
    slot: RwLock<Option<Arc<dyn Storage>>>,
    /// The writer's head: open for writing, never closed by the pool.
    pinned: AtomicBool,
    /// Read since the clock's hand last passed.
    referenced: AtomicBool,
    /// Whether the pool's ring holds an entry for it (changed under the ring's mutex).
    in_ring: AtomicBool,
}

impl fmt::Debug for ChunkFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkFile")
            .field("name", &self.name())
            .field("start", &self.start)
            .field("open", &self.is_open())
            .field("pinned", &self.pinned.load(Ordering::Relaxed))
            .finish()
    }
}

impl ChunkFile {
    /// Chunk `seq` (or a format-2 `pack` when `legacy`) starting at global `start`, whose file
    /// `file` was just opened and checked. Pinned (`pin`: the writer's head) or entered in `pool`.
    pub fn new(
        dir: Arc<dyn Directory>,
        pool: Arc<FilePool>,
        (seq, start, legacy): (u32, u64, bool),
        file: Arc<dyn Storage>,
        pin: bool,
    ) -> Arc<ChunkFile> {
        pool.opens.fetch_add(1, Ordering::Relaxed);
        let chunk = Arc::new_cyclic(|me| ChunkFile {
            dir,
            pool,
            me: me.clone(),
            seq,
            start,
            legacy,
            slot: RwLock::new(Some(file)),
            pinned: AtomicBool::new(pin),
            referenced: AtomicBool::new(false),
            in_ring: AtomicBool::new(false),
        });
        if !pin {
            chunk.pool.register(&chunk);
        }
        chunk
    }

    /// The file's name.
    pub fn name(&self) -> String {
        if self.legacy { LEGACY_PACK.to_string() } else { chunk_name(self.seq) }
    }

    /// Whether a descriptor is open now.
    pub fn is_open(&self) -> bool {
        self.slot.read().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some()
    }

    /// Seals the chunk (the writer rolled past it): its writable descriptor is closed, and it is
    /// reopened read-only, through the pool, when next read or synced.
    pub fn unpin(&self) {
        if self.pinned.swap(false, Ordering::Relaxed) {
            let closed = self.slot.write().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            drop(closed);
        }
    }

    /// Puts `file` (opened and checked by the caller) in place of the open one, if any: archive
    /// mode's release of an unlinked upper copy.
    pub fn replace(&self, file: Arc<dyn Storage>) {
        let old = self.slot.write().unwrap_or_else(|poisoned| poisoned.into_inner()).replace(file);
        drop(old);
        self.pool.opens.fetch_add(1, Ordering::Relaxed);
        if !self.pinned.load(Ordering::Relaxed) {
            self.pool.register(self);
        }
    }

    /// Fails when the open file, if any, is no longer the one its name points to
    /// ([`Storage::check_identity`]); a closed file is fine (the next open finds the right one).
    pub fn check_held_identity(&self) -> io::Result<()> {
        let held = self.slot.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        held.map_or(Ok(()), |file| file.check_identity())
    }

    /// The open file, opening it first if needed (typed errors).
    #[cfg(test)]
    pub fn file(&self) -> Result<Arc<dyn Storage>> {
        if let Some(file) = self.slot.read().unwrap_or_else(|poisoned| poisoned.into_inner()).as_ref() {
            self.touch();
            return Ok(file.clone());
        }
        self.open()
    }

    /// Runs `f` on the open file, opening it first if needed; the file is not closed meanwhile.
    pub fn with<T>(&self, f: impl FnOnce(&dyn Storage) -> io::Result<T>) -> Result<io::Result<T>> {
        {
            let slot = self.slot.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(file) = slot.as_ref() {
                self.touch();
                return Ok(f(&**file));
            }
        }
        let file = self.open()?;
        Ok(f(&*file))
    }

    fn touch(&self) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }

    /// Opens the file again (read-only) and checks its header; enters it in the pool.
    fn open(&self) -> Result<Arc<dyn Storage>> {
        let mut slot = self.slot.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(file) = slot.as_ref() {
            return Ok(file.clone());
        }
        let file = self.reopen()?;
        *slot = Some(file.clone());
        drop(slot);
        self.pool.opens.fetch_add(1, Ordering::Relaxed);
        self.referenced.store(true, Ordering::Relaxed);
        if !self.pinned.load(Ordering::Relaxed) {
            self.pool.register(self);
        }
        Ok(file)
    }

    fn reopen(&self) -> Result<Arc<dyn Storage>> {
        let name = self.name();
        let file = match self.dir.open(&name, false) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StoreError::MissingFile {
                    file: FileKind::Pack,
                    what: "chunk",
                    name,
                    detail: format!("{e}; reopening it after its descriptor was closed"),
                });
            }
            Err(source) => return Err(StoreError::OpenFile { name, op: "reopen", source }),
        };
        let header_error =
            |source: io::Error| StoreError::OpenFile { name: name.clone(), op: "read header", source };
        if self.legacy {
            let mut header = [0u8; PACK_HEADER_LEN as usize];
            file.read_at(0, &mut header).map_err(header_error)?;
            check_pack_header(&header)?;
        } else {
            let mut header = [0u8; CHUNK_HEADER_LEN as usize];
            file.read_at(0, &mut header).map_err(header_error)?;
            let (seq, start) = decode_chunk_header(&header, &name)?;
            if (seq, start) != (self.seq, self.start) {
                return Err(StoreError::corrupt(
                    FileKind::Pack,
                    16,
                    format!(
                        "{name}: reopened, its header says chunk {seq} at {start}, not chunk {} at {}",
                        self.seq, self.start
                    ),
                ));
            }
        }
        Ok(file)
    }

    fn as_io(e: StoreError) -> io::Error {
        let kind = match &e {
            StoreError::MissingFile { .. } => ErrorKind::NotFound,
            _ => ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

impl Storage for ChunkFile {
    fn len(&self) -> io::Result<u64> {
        self.with(|file| file.len()).map_err(ChunkFile::as_io)?
    }

    fn will_need(&self, offset: u64, len: u64) {
        // Advice: a file that cannot be opened is left to the read that follows to report.
        let _ = self.with(|file| {
            file.will_need(offset, len);
            Ok(())
        });
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.with(|file| file.read_at(offset, buf)).map_err(ChunkFile::as_io)?
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.pinned.load(Ordering::Relaxed) {
            return Err(io::Error::new(ErrorKind::PermissionDenied, format!("{} is sealed", self.name())));
        }
        self.with(|file| file.write_at(offset, data)).map_err(ChunkFile::as_io)?
    }

    fn sync(&self) -> io::Result<()> {
        self.with(|file| file.sync()).map_err(ChunkFile::as_io)?
    }

    fn check_identity(&self) -> io::Result<()> {
        self.with(|file| file.check_identity()).map_err(ChunkFile::as_io)?
    }
}

#[cfg(test)]
mod tests;
