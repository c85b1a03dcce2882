//! A store directory on disk, acted on through its descriptor (issue 39 item 6).
//!
//! A [`DiskDirectory`] holds the directory open (the writer's: the directory it locked, checked by
//! device and inode against the locked descriptor) and
//! creates, opens, lists, stats, removes, renames and syncs its files relative to that descriptor
//! (`openat`, `unlinkat`, `renameat`, `fstatat`, through `rustix`), never through the path. So if
//! the store directory is renamed, or replaced by another directory at its path, under a running
//! writer, the writer's rolls, GC segments, orphan removals and background unlinks still act on
//! the directory it locked, and nothing is created in or removed from whatever the path names now.
//! A file opened through it checks its identity ([`Storage::check_identity`]) by its name in that
//! same directory: the pair (directory, name).

use super::map_budget::MapBudget;
use super::storage::{Directory, FileStorage, Storage};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Where a file was opened: the directory's descriptor and the file's name there.
#[derive(Debug, Clone)]
pub(crate) struct Anchor {
    dir: Arc<OwnedFd>,
    name: String,
}

impl Anchor {
    /// Device and inode of the file `name` names in the directory now.
    pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
        let stat = rustix::fs::statat(&*self.dir, self.name.as_str(), AtFlags::empty())?;
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)] // widths vary by platform
        Ok((stat.st_dev as u64, stat.st_ino as u64))
    }
}

/// A store directory on disk, held by its descriptor (see the module documentation).
#[derive(Debug)]
pub struct DiskDirectory {
    path: PathBuf,
    /// The directory, opened at construction ([`DiskDirectory::open`],
    /// [`DiskDirectory::open_locked`]) or at first use ([`DiskDirectory::new`]), then kept for
    /// the handle's life.
    handle: OnceLock<Arc<OwnedFd>>,
    /// Files are read through memory maps under this budget; `None`: with `pread`.
    mmap: Option<Arc<MapBudget>>,
}

/// Opens the directory `path` (read-only, `O_DIRECTORY`).
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

impl DiskDirectory {
    /// The directory at `path`, opened when first used (a lower directory may not exist yet);
    /// files are read through memory maps under the budget `mmap` when given, else with `pread`.
    pub fn new(path: &Path, mmap: Option<Arc<MapBudget>>) -> DiskDirectory {
        DiskDirectory { path: path.to_path_buf(), handle: OnceLock::new(), mmap }
    }

    /// The directory at `path`, opened now (`mmap` as in [`DiskDirectory::new`]).
    pub fn open(path: &Path, mmap: Option<Arc<MapBudget>>) -> io::Result<DiskDirectory> {
        DiskDirectory::with_handle(path, open_dir(path)?, mmap)
    }

    /// The directory `handle`, known as `path` in messages. Fails when `handle` is not a directory.
    fn with_handle(path: &Path, handle: OwnedFd, mmap: Option<Arc<MapBudget>>) -> io::Result<DiskDirectory> {
        let stat = rustix::fs::fstat(&handle)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Directory {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", path.display()),
            ));
        }
        Ok(DiskDirectory { path: path.to_path_buf(), handle: OnceLock::from(Arc::new(handle)), mmap })
    }

    /// The directory's path (as given: the directory may have been renamed since).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`DiskDirectory::open`] of the directory `locked` is a descriptor of (the writer's lock:
    /// a descriptor of its own, so that the lock goes with the handle's, not with this one's): its
    /// device and inode must be `locked`'s, else the path was renamed or replaced in between.
    pub fn open_locked(
        path: &Path,
        locked: &File,
        mmap: Option<Arc<MapBudget>>,
    ) -> io::Result<DiskDirectory> {
        let directory = DiskDirectory::open(path, mmap)?;
        let lock = rustix::fs::fstat(locked)?;
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)] // widths vary by platform
        let locked = (lock.st_dev as u64, lock.st_ino as u64);
        if directory.identity()? != locked {
            return Err(io::Error::other(format!(
                "{} was replaced by another directory while the store was being opened",
                path.display()
            )));
        }
        Ok(directory)
    }

    /// Device and inode of the directory this acts on.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let stat = rustix::fs::fstat(&**self.handle()?)?;
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)] // widths vary by platform
        Ok((stat.st_dev as u64, stat.st_ino as u64))
    }

    fn handle(&self) -> io::Result<&Arc<OwnedFd>> {
        if let Some(handle) = self.handle.get() {
            return Ok(handle);
        }
        let opened = Arc::new(open_dir(&self.path)?);
        Ok(self.handle.get_or_init(|| opened))
    }

    /// Opens the file `name` (for writing when `writable`; created when absent if `create`, and
    /// emptied if `truncate`), relative to the directory's descriptor.
    pub fn open_file(
        &self,
        name: &str,
        writable: bool,
        create: bool,
        truncate: bool,
    ) -> io::Result<FileStorage> {
        let dir = self.handle()?;
        let mut flags = OFlags::CLOEXEC | if writable { OFlags::RDWR } else { OFlags::RDONLY };
        if writable && create {
            flags |= OFlags::CREATE;
        }
        if writable && truncate {
            flags |= OFlags::TRUNC;
        }
        let fd = rustix::fs::openat(&**dir, name, flags, Mode::from_raw_mode(0o666))?;
        let anchor = super::disk::Anchor { dir: dir.clone(), name: name.to_string() };
        Ok(FileStorage::from_file(
            File::from(fd),
            self.path.join(name),
            Some(anchor),
            writable,
            self.mmap.clone(),
        ))
    }
}

impl Directory for DiskDirectory {
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.open_file(name, true, true, true)?))
    }

    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.open_file(name, writable, false, false)?))
    }

    fn file_len(&self, name: &str) -> io::Result<u64> {
        let stat = rustix::fs::statat(&**self.handle()?, name, AtFlags::empty())?;
        u64::try_from(stat.st_size).map_err(|_| io::Error::other(format!("{name}: negative length")))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&**self.handle()?)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy();
            if name != "." && name != ".." {
                names.push(name.into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&**self.handle()?, name, AtFlags::empty())?)
    }

    fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&**self.handle()?)?)
    }

    /// A shared `flock` on a descriptor of its own (released at once): free unless a writer holds
    /// the directory's exclusive lock.
    fn writer_absent(&self) -> Option<bool> {
        let dir = self.handle().ok()?;
        let own = rustix::fs::openat(
            &**dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        Some(rustix::fs::flock(&own, rustix::fs::FlockOperation::NonBlockingLockShared).is_ok())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let dir = self.handle()?;
        Ok(rustix::fs::renameat(&**dir, from, &**dir, to)?)
    }

    fn map_budget(&self) -> Option<Arc<MapBudget>> {
        self.mmap.clone()
    }
}
