//! The one storage seam: every byte the store reads or writes goes through [`Storage`]. Files on
//! disk ([`FileStorage`], read through a memory map; [`ControlFile`], replaced by rename), memory
//! ([`MemStorage`]) and fault injection ([`crate::fault`]) implement it.

use memmap2::Mmap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
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
    /// Fills `buf` with the bytes at `offset`; fails with `UnexpectedEof` past the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`, extending the storage if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every earlier write durable.
    fn sync(&self) -> io::Result<()>;
    /// Replaces the whole contents by `data` atomically (a reader or a crash sees the old or the new
    /// contents, never a mix); durably when `durable`.
    fn replace(&self, data: &[u8], durable: bool) -> io::Result<()>;
    /// The whole contents, read at once (one consistent version for replaced files).
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

/// An append-mostly file read through a shared memory map, remapped when it grows; written with
/// positioned writes.
#[derive(Debug)]
pub struct FileStorage {
    path: PathBuf,
    file: File,
    writable: bool,
    map: RwLock<Option<Arc<Mmap>>>,
}

impl FileStorage {
    /// Opens `path`; creates it when `writable` and absent.
    pub fn open(path: &Path, writable: bool) -> io::Result<FileStorage> {
        let file = OpenOptions::new().read(true).write(writable).create(writable).truncate(false).open(path)?;
        Ok(FileStorage { path: path.to_path_buf(), file, writable, map: RwLock::new(None) })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn mapped(&self, end: u64) -> io::Result<Arc<Mmap>> {
        {
            let map = self.map.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(map) = map.as_ref().filter(|map| map.len() as u64 >= end) {
                return Ok(map.clone());
            }
        }
        let len = self.file.metadata()?.len();
        if len < end {
            return Err(eof());
        }
        // SAFETY: larch never truncates a store file below a length it has published, and readers
        // only read below published lengths (docs/format.md §5), so the mapped range stays backed
        // by the file. The map is only read through bounds-checked slices and copied out.
        let map = Arc::new(unsafe { Mmap::map(&self.file)? });
        let mut slot = self.map.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        *slot = Some(map.clone());
        Ok(map)
    }
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = end_of(offset, buf.len())?;
        let map = self.mapped(end)?;
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let bytes = map.get(start..start + buf.len()).ok_or_else(eof)?;
        buf.copy_from_slice(bytes);
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

    fn replace(&self, _data: &[u8], _durable: bool) -> io::Result<()> {
        Err(io::Error::new(ErrorKind::Unsupported, "an append-only file is never replaced"))
    }
}

/// A small file replaced atomically by writing `NAME.tmp` and renaming it over `NAME`; every read
/// opens the file anew, so it sees the latest published version.
#[derive(Debug)]
pub struct ControlFile {
    path: PathBuf,
    writable: bool,
}

impl ControlFile {
    /// The control file at `path`.
    pub fn new(path: &Path, writable: bool) -> ControlFile {
        ControlFile { path: path.to_path_buf(), writable }
    }
}

impl Storage for ControlFile {
    fn len(&self) -> io::Result<u64> {
        Ok(std::fs::metadata(&self.path)?.len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        File::open(&self.path)?.read_exact_at(buf, offset)
    }

    fn read_all(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        File::open(&self.path)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::new(ErrorKind::Unsupported, "the control file is only replaced whole"))
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn replace(&self, data: &[u8], durable: bool) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(ErrorKind::PermissionDenied, "file opened read-only"));
        }
        let mut tmp_name = self.path.clone().into_os_string();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        {
            let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
            file.write_all(data)?;
            if durable {
                file.sync_data()?;
            }
        }
        std::fs::rename(&tmp, &self.path)?;
        if durable && let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
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

    /// A copy of the contents.
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

    fn replace(&self, data: &[u8], _durable: bool) -> io::Result<()> {
        *self.bytes.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = data.to_vec();
        Ok(())
    }
}

/// The three files of a store, as storages.
#[derive(Clone, Debug)]
pub struct StoreFiles {
    /// `control`.
    pub control: Arc<dyn Storage>,
    /// `pack`.
    pub pack: Arc<dyn Storage>,
    /// `commits`.
    pub index: Arc<dyn Storage>,
}

impl StoreFiles {
    /// Three fresh in-memory storages.
    pub fn memory() -> StoreFiles {
        StoreFiles {
            control: Arc::new(MemStorage::new()),
            pack: Arc::new(MemStorage::new()),
            index: Arc::new(MemStorage::new()),
        }
    }
}
