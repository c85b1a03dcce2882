//! The one storage seam: every byte the store reads or writes goes through [`Storage`]. Files on
//! disk ([`FileStorage`], positioned reads or a memory map), memory
//! ([`MemStorage`]) and fault injection (`fault`, feature `fault-injection`) implement it.

use super::map_budget::{MapBudget, MappedFile};
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// A byte-addressed file. Implementations are shared between threads.
pub trait Storage: Send + Sync + Debug {
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the storage holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Tells the storage that the `len` bytes at `offset` will be read soon, so that it may start
    /// reading them now (a file on disk: `posix_fadvise(POSIX_FADV_WILLNEED)`, the page cache
    /// filled in the background). Only advice: by default, and on any error, nothing happens.
    fn will_need(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// Fills `buf` with the bytes at `offset`; fails with `UnexpectedEof` past the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`, extending the storage if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every earlier write durable.
    fn sync(&self) -> io::Result<()>;
    /// Fails when the storage is no longer the file its path names (deleted, or replaced by a
    /// rename): writing it would write to a file nobody will read. In memory: always fine.
    fn check_identity(&self) -> io::Result<()> {
        Ok(())
    }
    /// The whole contents, read at once.
    fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len()?).map_err(|_| io::Error::from(ErrorKind::OutOfMemory))?;
        let mut buf = vec![0; len];
        self.read_at(0, &mut buf)?;
        Ok(buf)
    }
}

fn eof() -> io::Error {
    io::Error::new(ErrorKind::UnexpectedEof, "read past the end of the file")
}

fn end_of(offset: u64, len: usize) -> io::Result<u64> {
    offset.checked_add(len as u64).ok_or_else(eof)
}

/// The memory map of a [`FileStorage`] open for writing is reserved in steps of this many bytes,
/// so a growing file is remapped once per step, not after every commit. A read-only file is mapped
/// at its length.
pub const MAP_STEP: u64 = 1 << 30;

#[derive(Debug)]
struct Mapping {
    map: Arc<MappedFile>,
    /// The file length last observed: bytes below it are backed by the file.
    file_len: u64,
}

/// An append-mostly file, written with positioned writes and read either with positioned reads
/// (`pread`, the default) or through a shared memory map (when open for writing, reserved beyond
/// the file's end in [`MAP_STEP`]s; read-only, at the file's length; remapped when the file
/// outgrows it), whose resident pages are bounded by a [`MapBudget`] shared by the maps of a
/// handle.
///
/// Why `pread` by default: the pack is read one record (~60 B to a few KB) at a time, on cache
/// misses only. Measured on the Tezos-shaped benchmark (docs/benchmarks.md), both give the same
/// throughput, but a map makes the process's resident set grow with the page cache it touches
/// (recent kernels map whole large folios per fault, up to 2 MiB), unless bounded by the budget.
/// The map remains available (`RepoOptions::mmap`, through [`DiskDirectory`]).
#[derive(Debug)]
pub struct FileStorage {
    path: PathBuf,
    /// The directory the file was opened in, by descriptor, and its name there: its identity is
    /// checked there ([`Storage::check_identity`]), not through `path`.
    anchor: Option<super::disk::Anchor>,
    file: File,
    writable: bool,
    /// Read through a memory map under this budget; `None`: with `pread`.
    budget: Option<Arc<MapBudget>>,
    map: RwLock<Option<Mapping>>,
}

impl FileStorage {
    /// Opens `path` (for writing when `writable`); creates it when absent if `create` (and writable).
    pub fn open(path: &Path, writable: bool, create: bool) -> io::Result<FileStorage> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .create(writable && create)
            .truncate(false)
            .open(path)?;
        Ok(FileStorage::from_file(file, path.to_path_buf(), None, writable, None))
    }

    /// The open `file`, named `path` (and, with an `anchor`, the directory and name it was opened
    /// by), written through when `writable`, read through a memory map under `budget` if any.
    pub(crate) fn from_file(
        file: File,
        path: PathBuf,
        anchor: Option<super::disk::Anchor>,
        writable: bool,
        budget: Option<Arc<MapBudget>>,
    ) -> FileStorage {
        FileStorage { path, anchor, file, writable, budget, map: RwLock::new(None) }
    }

    /// The file's path.
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A map whose first `end` bytes are backed by the file, under `budget`.
    fn mapped(&self, end: u64, budget: &Arc<MapBudget>) -> io::Result<Arc<MappedFile>> {
        {
            let map = self.map.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(mapping) = map.as_ref().filter(|mapping| mapping.file_len >= end) {
                return Ok(mapping.map.clone());
            }
        }
        let file_len = self.file.metadata()?.len();
        if file_len < end {
            return Err(eof());
        }
        let mut slot = self.map.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mapping) = slot.as_mut().filter(|mapping| mapping.map.bytes().len() as u64 >= file_len) {
            mapping.file_len = file_len;
            return Ok(mapping.map.clone());
        }
        // A file open for writing (the writer's head chunk: one per handle) is mapped in steps
        // of MAP_STEP, so that it is not remapped after every commit; a read-only one (a sealed
        // chunk, or a reader's head, remapped when a read reaches past the map) at its length:
        // no address space is reserved per chunk file.
        let reserve =
            if self.writable { file_len.div_ceil(MAP_STEP).max(1) * MAP_STEP } else { file_len.max(1) };
        let reserve = usize::try_from(reserve).map_err(|_| io::Error::from(ErrorKind::OutOfMemory))?;
        // SAFETY: the map is shared and read-only. It may extend past the end of the file, but it
        // is only read below `file_len`, a length the file had (reads check `end <= file_len`
        // above), and larch never truncates a store file below a length it has published
        // (docs/format.md §5), so every page read is backed by the file and cannot fault. The
        // bytes are copied out through bounds-checked slices.
        let map = unsafe { memmap2::MmapOptions::new().len(reserve).map(&self.file)? };
        // Records are read at random: no read-ahead from the disk.
        let _ = map.advise(memmap2::Advice::Random);
        let map = MappedFile::new(map, budget.clone());
        // The previous map, if any, is unmapped (and refunded) when its last reader drops it.
        *slot = Some(Mapping { map: map.clone(), file_len });
        Ok(map)
    }
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn will_need(&self, offset: u64, len: u64) {
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        let _ = rustix::fs::fadvise(
            &self.file,
            offset,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::WillNeed,
        );
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        let _ = (offset, len);
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let Some(budget) = &self.budget else {
            return self.file.read_exact_at(buf, offset);
        };
        if buf.is_empty() {
            return Ok(());
        }
        let end = end_of(offset, buf.len())?;
        let map = self.mapped(end, budget)?;
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let bytes = map.bytes().get(start..start + buf.len()).ok_or_else(eof)?;
        buf.copy_from_slice(bytes);
        map.note_read(start, start + buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(ErrorKind::PermissionDenied, "file opened read-only"));
        }
        self.file.write_all_at(data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn check_identity(&self) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let open = self.file.metadata()?;
        let named = match &self.anchor {
            // The name in the directory the file was opened in (the locked store directory, even
            // if it was renamed since): the pair (directory, name) is the file's identity.
            Some(anchor) => anchor.identity()?,
            None => {
                let named = std::fs::metadata(&self.path)?;
                (named.dev(), named.ino())
            }
        };
        if (open.dev(), open.ino()) != named {
            return Err(io::Error::other(format!(
                "{} was replaced by another file while the store was open",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// A storage in memory (tests, tools).
#[derive(Debug, Default)]
pub struct MemStorage {
    bytes: RwLock<Vec<u8>>,
}

impl MemStorage {
    /// An empty storage.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// A storage holding `bytes`.
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub fn from_bytes(bytes: Vec<u8>) -> MemStorage {
        MemStorage { bytes: RwLock::new(bytes) }
    }

    /// A copy of the contents.
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// Copies `buf.len()` bytes of `image` at `offset` into `buf`.
pub(crate) fn read_image(image: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| eof())?;
    let end = start.checked_add(buf.len()).ok_or_else(eof)?;
    buf.copy_from_slice(image.get(start..end).ok_or_else(eof)?);
    Ok(())
}

/// Writes `data` into `image` at `offset`, zero-filling any gap.
pub(crate) fn write_image(image: &mut Vec<u8>, offset: u64, data: &[u8]) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| eof())?;
    let end = start.checked_add(data.len()).ok_or_else(eof)?;
    if image.len() < end {
        image.resize(end, 0);
    }
    if let Some(target) = image.get_mut(start..end) {
        target.copy_from_slice(data);
    }
    Ok(())
}

impl Storage for MemStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.read().unwrap_or_else(|poisoned| poisoned.into_inner()).len() as u64)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        read_image(&self.bytes.read().unwrap_or_else(|poisoned| poisoned.into_inner()), offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        write_image(&mut self.bytes.write().unwrap_or_else(|poisoned| poisoned.into_inner()), offset, data)
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The store directory: creating, opening, listing and removing the pack's chunk files, and making
/// those changes durable. Implemented for a directory on disk (`DiskDirectory`), memory
/// (`MemDirectory`) and fault injection (`fault`); outside the crate, object storage (`larch-remote`).
pub trait Directory: Send + Sync + Debug {
    /// Creates the file `name`, empty (an existing one is truncated), open for writing.
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>>;
    /// Opens the existing file `name` (`NotFound` when absent), for writing when `writable`.
    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>>;
    /// The names of the files the directory holds.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Removes the file `name` (`NotFound` when absent). On a layered directory it falls through
    /// to the lower directory: only for names the store's own published state retires (a GC's
    /// retired chunks); anything else uses [`Directory::remove_upper`].
    fn remove(&self, name: &str) -> io::Result<()>;
    /// The names of the files of the store directory itself: on a layered directory, the upper
    /// directory only (what [`Directory::remove_upper`] may remove); elsewhere [`Directory::list`].
    fn list_upper(&self) -> io::Result<Vec<String>> {
        self.list()
    }
    /// Removes the file `name` from the store directory itself, never from a lower directory
    /// (orphans above the head, unnamed files, an abandoned GC's segment); elsewhere
    /// [`Directory::remove`].
    fn remove_upper(&self, name: &str) -> io::Result<()> {
        self.remove(name)
    }
    /// Makes every creation and removal so far durable (`fsync` of the directory).
    fn sync(&self) -> io::Result<()>;
    /// Renames the file `from` to `to`, atomically replacing any file `to` (durable after
    /// [`Directory::sync`]). Used by archive mode to name a complete copy in the lower directory.
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// The length of the file `name`, from its metadata where the backend has them (no open, no
    /// map). The default opens the file.
    fn file_len(&self, name: &str) -> io::Result<u64> {
        self.open(name, false)?.len()
    }
    /// Whether no writer holds the store now, where the backend can tell (a directory on disk:
    /// the writer's `flock` on it is free; the fault model: as its test says), else `None`. A
    /// reader asks it only when the newest control slot is not confirmed (`docs/store.md`,
    /// *Durable-only visibility*); `None` is taken as a live writer.
    fn writer_absent(&self) -> Option<bool> {
        None
    }
    /// For a directory with a lower layer (archive mode, `LayeredDirectory`):
    /// the upper and the lower directory. `None` for a plain directory.
    fn layers(&self) -> Option<Layers<'_>> {
        None
    }
    /// The budget of the memory maps its files are read through, if they are (a directory on
    /// disk opened with `RepoOptions::mmap`; a layered one: its upper directory's).
    fn map_budget(&self) -> Option<Arc<MapBudget>> {
        None
    }
}

/// The upper (store) and the lower directory of a layered directory ([`Directory::layers`]).
pub type Layers<'a> = (&'a Arc<dyn Directory>, &'a Arc<dyn Directory>);

pub use super::disk::DiskDirectory;

/// A store directory in memory (tests, tools).
#[derive(Debug, Default)]
pub struct MemDirectory {
    files: RwLock<std::collections::BTreeMap<String, Arc<MemStorage>>>,
}

impl MemDirectory {
    /// An empty directory.
    pub fn new() -> MemDirectory {
        MemDirectory::default()
    }

    /// Puts `bytes` in the file `name` (replacing it).
    pub fn insert(&self, name: &str, bytes: Vec<u8>) {
        let mut files = self.files.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        files.insert(name.to_string(), Arc::new(MemStorage::from_bytes(bytes)));
    }
}

impl Directory for MemDirectory {
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        let file = Arc::new(MemStorage::new());
        let mut files = self.files.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        files.insert(name.to_string(), file.clone());
        Ok(file)
    }

    fn open(&self, name: &str, _writable: bool) -> io::Result<Arc<dyn Storage>> {
        let files = self.files.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        match files.get(name) {
            Some(file) => Ok(file.clone() as Arc<dyn Storage>),
            None => Err(io::Error::new(ErrorKind::NotFound, format!("no file {name}"))),
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.files.read().unwrap_or_else(|poisoned| poisoned.into_inner()).keys().cloned().collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut files = self.files.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        match files.remove(name) {
            Some(_) => Ok(()),
            None => Err(io::Error::new(ErrorKind::NotFound, format!("no file {name}"))),
        }
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut files = self.files.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        match files.remove(from) {
            Some(file) => {
                files.insert(to.to_string(), file);
                Ok(())
            }
            None => Err(io::Error::new(ErrorKind::NotFound, format!("no file {from}"))),
        }
    }
}

/// The files of a store: `control` and `commits` as storages, and the directory holding the
/// pack's chunk files (and a format-2 `pack`).
#[derive(Clone, Debug)]
pub struct StoreFiles {
    /// `control`.
    pub control: Arc<dyn Storage>,
    /// `commits`.
    pub index: Arc<dyn Storage>,
    /// The directory of the chunk files.
    pub dir: Arc<dyn Directory>,
}

impl StoreFiles {
    /// A fresh store in memory.
    pub fn memory() -> StoreFiles {
        StoreFiles {
            control: Arc::new(MemStorage::new()),
            index: Arc::new(MemStorage::new()),
            dir: Arc::new(MemDirectory::new()),
        }
    }

    /// A store in memory holding these bytes of `control` and `commits`, and `pack` as a format-2
    /// pack file (read as chunk 0, file position = global offset). Tests that alter the pack at
    /// global offsets use it with [`StoreFiles::pack_image`].
    pub fn memory_with_pack(control: Vec<u8>, pack: Vec<u8>, index: Vec<u8>) -> StoreFiles {
        let dir = MemDirectory::new();
        dir.insert(crate::format::names::LEGACY_PACK, pack);
        StoreFiles {
            control: Arc::new(MemStorage::from_bytes(control)),
            index: Arc::new(MemStorage::from_bytes(index)),
            dir: Arc::new(dir),
        }
    }
}

/// Sum of the lengths of every file in `dir`, from metadata ([`Directory::file_len`]), each
/// looked up now (a handle's layout remembers its sealed chunks' lengths instead, `DiskUsage`).
pub(crate) fn dir_bytes(dir: &dyn Directory) -> crate::error::Result<u64> {
    super::usage::DiskUsage::default().total(dir, |_| false)
}
