//! Archive mode's layered directory: the store directory over a lower directory (another disk,
//! `docs/store.md` *Archive mode*). Chunk files are created, written and renamed in the upper
//! directory; a read-only open that finds nothing there opens the lower one.

use crate::error::{Result, StoreError};
use crate::io::storage::{Directory, DiskDirectory, Layers, Storage, StoreFiles};
use std::io::{self, ErrorKind};
use std::path::Path;
use std::sync::Arc;

/// A lower layer of archive mode given as a [`Directory`] rather than a path (object storage: the
/// `larch-remote` crate), for [`crate::Repo::open_with_layer`] and
/// [`crate::Repo::open_read_only_layered`]. Whoever builds it has checked that it serves the store
/// (its identity, [`crate::store_identity`]).
#[derive(Clone, Debug)]
pub struct LowerLayer {
    /// The lower directory: sealed chunk files are created in it as `<name>.tmp`, synced,
    /// renamed, and the directory synced, before their upper copy is unlinked.
    pub dir: Arc<dyn Directory>,
    /// Its name in messages (a URL for object storage).
    pub name: String,
}

impl LowerLayer {
    /// The store files `files` of the store at `path` with this lower layer under their directory.
    pub(crate) fn over(&self, files: StoreFiles, path: &Path) -> StoreFiles {
        StoreFiles {
            dir: Arc::new(LayeredDirectory::new(
                files.dir,
                self.dir.clone(),
                path.display().to_string(),
                self.name.clone(),
            )),
            ..files
        }
    }
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
    pub(crate) fn list_of(dir: &dyn Directory) -> io::Result<Vec<String>> {
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

    fn file_len(&self, name: &str) -> io::Result<u64> {
        match self.upper.file_len(name) {
            Err(e) if e.kind() == ErrorKind::NotFound => self.lower.file_len(name),
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

    /// Falls through to the lower directory: only for the files a GC of this store retires (names
    /// derived from its published state, in a lower directory whose marker names this store).
    fn remove(&self, name: &str) -> io::Result<()> {
        match self.upper.remove(name) {
            Err(e) if e.kind() == ErrorKind::NotFound => self.lower.remove(name),
            other => other,
        }
    }

    fn list_upper(&self) -> io::Result<Vec<String>> {
        self.upper.list()
    }

    fn remove_upper(&self, name: &str) -> io::Result<()> {
        self.upper.remove(name)
    }

    fn sync(&self) -> io::Result<()> {
        self.upper.sync()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.upper.rename(from, to)
    }

    fn writer_absent(&self) -> Option<bool> {
        self.upper.writer_absent()
    }

    fn layers(&self) -> Option<Layers<'_>> {
        Some((&self.upper, &self.lower))
    }

    fn map_budget(&self) -> Option<Arc<crate::io::map_budget::MapBudget>> {
        self.upper.map_budget()
    }
}

/// The store files of a store opened at `path` with the lower directory `lower` on disk. A writer
/// creates the lower directory when absent (and syncs its parent). The lower directory may not be
/// the store directory, and must serve this store ([`crate::io::dirs::check_lower`]: its marker
/// names the store, or a writer adopts a new one); otherwise [`StoreError::ForeignLower`].
pub(crate) fn with_lower(
    mut files: StoreFiles,
    path: &Path,
    lower: &Path,
    mmap: Option<Arc<crate::io::map_budget::MapBudget>>,
    writable: bool,
) -> Result<StoreFiles> {
    let dir_error = |op, source| StoreError::Directory { path: lower.into(), op, source };
    if writable && !lower.exists() {
        crate::io::dirs::create_dir_durably(lower).map_err(|e| dir_error("create", e))?;
    }
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(path), std::fs::canonicalize(lower))
        && a == b
    {
        return Err(StoreError::ArchiveRefused(format!(
            "the lower directory {} is the store directory itself",
            lower.display()
        )));
    }
    crate::io::dirs::check_lower(path, lower, writable)?;
    files.dir = Arc::new(LayeredDirectory::new(
        files.dir,
        Arc::new(DiskDirectory::new(lower, mmap)),
        path.display().to_string(),
        lower.display().to_string(),
    ));
    Ok(files)
}
