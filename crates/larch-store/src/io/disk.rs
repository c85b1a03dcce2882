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
        if holds_pack_records(name) {
            advise_random_reads(&fd);
        }
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

/// Whether `name` is one of the files that hold the pack's records: a chunk, a GC segment, or a
/// format-2 `pack`.
fn holds_pack_records(name: &str) -> bool {
    use crate::format::names::{LEGACY_PACK, parse_chunk_name, parse_segment_name};
    name == LEGACY_PACK || parse_chunk_name(name).is_some() || parse_segment_name(name).is_some()
}

/// Tells the kernel that reads of `file` are random (`posix_fadvise(POSIX_FADV_RANDOM)`), so that a
/// read the page cache misses brings in the pages it asks for and not the ones after them.
///
/// The pack is read by pointer: a tree's records, scattered over the whole store, one at a time.
/// The kernel's read-ahead then reads pages nobody asks for; where the page cache is smaller than
/// the store, they push out pages that are needed. On the mainnet rung under a 2 GiB cgroup it cut
/// the bytes read from disk by 28% (docs/benchmarks.md, *Mainnet rung under a 2 GiB cgroup*). Once
/// a store's pages are in the page cache, its reads do not reach the disk and the advice has
/// nothing to act on. Sequential passes (a scan, archive mode's copies) ask for what they will read
/// next instead ([`Storage::will_need`]). Only advice: a file system that refuses it is read as
/// before.
fn advise_random_reads(file: &OwnedFd) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random);
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let _ = file;
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::expect_used)] // test code
    use super::*;
    use std::os::fd::AsRawFd;

    /// Pages of the files the test reads.
    const FILE_PAGES: usize = 512;
    /// Pages read, one at a time, from the start of a file.
    const READ_PAGES: usize = 16;

    /// The size of a page of memory (and of the page cache).
    fn page_size() -> usize {
        // SAFETY: `sysconf` only returns a value of the running system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).expect("the page size")
    }

    /// Pages of `file` (`FILE_PAGES` pages long) that the page cache holds (`mincore` of a map
    /// of it).
    fn resident_pages(file: &File) -> usize {
        let len = FILE_PAGES * page_size();
        // SAFETY: a fresh read-only shared map of the whole file (`len` bytes, the file's length),
        // unmapped below; nothing reads through it, `mincore` only asks which of its pages are
        // resident.
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
        };
        assert_ne!(map, libc::MAP_FAILED, "mmap: {}", io::Error::last_os_error());
        let mut pages = vec![0u8; FILE_PAGES];
        // SAFETY: `map` is the page-aligned map of `len` bytes made above and `pages` holds one
        // byte for each of its `FILE_PAGES` pages, as `mincore` writes.
        let status = unsafe { libc::mincore(map, len, pages.as_mut_ptr()) };
        let error = io::Error::last_os_error();
        // SAFETY: unmaps exactly the map made above, which nothing refers to any more.
        unsafe { libc::munmap(map, len) };
        assert_eq!(status, 0, "mincore: {error}");
        pages.iter().filter(|&&page| page & 1 == 1).count()
    }

    /// Drops the page cache's pages of `file` (clean: the file was synced).
    fn evict(file: &File) {
        // SAFETY: plain advice on an open descriptor (offset 0, length 0: the whole file); it
        // changes no memory of this process.
        let status = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(status, 0, "posix_fadvise(DONTNEED)");
    }

    /// A directory for the tests, in the build's directory, not /tmp: a tmpfs holds every page
    /// whatever the advice.
    fn test_dir() -> (tempfile::TempDir, DiskDirectory) {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"), PathBuf::from);
        let parent = target.join("tmp");
        std::fs::create_dir_all(&parent).expect("target/tmp");
        let root = tempfile::tempdir_in(&parent).expect("tempdir");
        let dir = DiskDirectory::open(root.path(), None).expect("open the directory");
        (root, dir)
    }

    /// Writes the file `name` of `FILE_PAGES` pages in `root` and drops its pages from the page
    /// cache; returns it open (to count its pages) and its bytes.
    fn cold_file(root: &Path, name: &str) -> (File, Vec<u8>) {
        let bytes: Vec<u8> = (0..FILE_PAGES * page_size()).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join(name), &bytes).expect("write");
        let file = File::open(root.join(name)).expect("open");
        file.sync_all().expect("sync");
        evict(&file);
        assert_eq!(
            resident_pages(&file),
            0,
            "{name}: the page cache kept pages it was told to drop (this test needs a disk-backed file system)"
        );
        (file, bytes)
    }

    /// Reads through the directory the first [`READ_PAGES`] pages of `name`, in turn, with nothing
    /// of the file in the page cache before; returns the pages of the file the page cache then
    /// holds.
    fn pages_brought_in(dir: &DiskDirectory, root: &Path, name: &str) -> usize {
        let (file, bytes) = cold_file(root, name);
        let storage = dir.open(name, false).expect("open through the directory");
        let page_size = page_size();
        let mut page = vec![0u8; page_size];
        for index in 0..READ_PAGES {
            let at = index * page_size;
            storage.read_at(at as u64, &mut page).expect("read a page");
            assert_eq!(page.get(..4), bytes.get(at..at + 4));
        }
        resident_pages(&file)
    }

    #[test]
    fn the_pack_files_are_read_without_the_kernels_read_ahead() {
        let (root, dir) = test_dir();
        // Another file of the directory, opened the same way, is read ahead: the kernel reads
        // pages past those asked for, more and more as the reads go on one after the other.
        let other = pages_brought_in(&dir, root.path(), "notes.bin");
        eprintln!("notes.bin: {other} pages in the page cache after {READ_PAGES} one-page reads");
        assert!(other >= 2 * READ_PAGES, "without the advice the kernel read ahead only to {other} pages");
        for name in ["chunk.000003", "seg.000007", "pack"] {
            let brought = pages_brought_in(&dir, root.path(), name);
            eprintln!("{name}: {brought} pages in the page cache after {READ_PAGES} one-page reads");
            assert!(
                brought <= READ_PAGES + 1,
                "{name}: {brought} pages in the page cache (read ahead: {other})"
            );
        }
    }

    #[test]
    fn a_pack_file_reads_ahead_what_it_is_told_it_will_need() {
        let (root, dir) = test_dir();
        let (file, _) = cold_file(root.path(), "chunk.000005");
        let storage = dir.open("chunk.000005", false).expect("open through the directory");
        let wanted = FILE_PAGES / 2;
        storage.will_need(0, (wanted * page_size()) as u64);
        // The reads run in the background: wait for them (at most 5 s).
        let started = std::time::Instant::now();
        let mut resident = resident_pages(&file);
        while resident < wanted && started.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
            resident = resident_pages(&file);
        }
        eprintln!("chunk.000005: {resident} pages in the page cache after asking for {wanted}");
        assert!(resident >= wanted, "{resident} of the {wanted} pages asked for are in the page cache");
    }
}
