//! Directories on disk: creating one durably (its entry synced in its parent, issue 39 item 8),
//! and the identities of archive mode (`docs/format.md` §3.1): a store's `larch-id` and its lower
//! directory's `larch-lower`, which names the store the lower directory serves, so that a lower
//! directory given by mistake (another store's directory, or the lower directory of another store)
//! is refused before anything in it is touched.

use crate::error::{Result, StoreError};
use crate::format::names::{LEGACY_PACK, parse_chunk_name};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// The store's identity file, in the store directory: `larch store <32 hex digits>\n`.
pub const STORE_ID_FILE: &str = "larch-id";

/// The lower directory's marker: `larch lower <32 hex digits>\n`, the identity of the store it
/// serves.
pub const LOWER_MARKER: &str = "larch-lower";

/// The first bytes of [`STORE_ID_FILE`].
const STORE_TAG: &str = "larch store ";

/// The first bytes of [`LOWER_MARKER`].
const LOWER_TAG: &str = "larch lower ";

/// A store's identity: 16 random bytes, drawn when archive mode first uses a lower directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreId(pub [u8; 16]);

impl fmt::Display for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl StoreId {
    /// A new random identity (the process's randomly keyed SipHash over the time, the process id
    /// and a counter: no two stores draw the same one in practice).
    fn draw() -> StoreId {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let mut bytes = [0u8; 16];
        for (half, out) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(nanos);
            hasher.write_u32(std::process::id());
            hasher.write_usize(half);
            out.copy_from_slice(&hasher.finish().to_le_bytes());
        }
        StoreId(bytes)
    }

    /// Parses `<tag><32 lowercase hex digits>\n`.
    fn parse(bytes: &[u8], tag: &str) -> Option<StoreId> {
        let text = std::str::from_utf8(bytes).ok()?;
        let hex = text.strip_prefix(tag)?.strip_suffix('\n')?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return None;
        }
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(StoreId(id))
    }
}

fn dir_error(path: &Path, op: &'static str, source: io::Error) -> StoreError {
    StoreError::Directory { path: path.into(), op, source }
}

/// `fsync` of the directory `path`.
fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Creates the directory `path` and its missing ancestors, and makes their entries durable: each
/// created directory's parent is synced, outermost first (a power loss soon after cannot lose the
/// directory, nor what is later synced in it). Nothing is synced when `path` already exists.
pub(crate) fn create_dir_durably(path: &Path) -> io::Result<()> {
    create_dir_with(path, &mut sync_dir)
}

/// [`create_dir_durably`] with the directory sync given (tests record it).
fn create_dir_with(path: &Path, sync: &mut dyn FnMut(&Path) -> io::Result<()>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = path;
    while !at.exists() {
        missing.push(at);
        match at.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => at = parent,
            _ => break,
        }
    }
    std::fs::create_dir_all(path)?;
    for created in missing.iter().rev() {
        let parent = created.parent().filter(|parent| !parent.as_os_str().is_empty());
        sync(parent.unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

/// Reads the identity file `name` of `dir` (`None` when absent).
fn read_id(dir: &Path, name: &str, tag: &str) -> Result<Option<StoreId>> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => StoreId::parse(&bytes, tag).map(Some).ok_or_else(|| {
            dir_error(
                &path,
                "read the identity",
                io::Error::new(ErrorKind::InvalidData, format!("{name} is not `{tag}<32 hex digits>`")),
            )
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(dir_error(&path, "read", e)),
    }
}

/// Writes the identity file `name` of `dir` unless one exists (the existing one wins), durably:
/// a temporary file, written and synced, is hard-linked to `name` (never replacing a file) and
/// removed, then the directory is synced. Returns the identity the file holds.
fn write_id(dir: &Path, name: &str, tag: &str, id: StoreId) -> Result<StoreId> {
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| dir_error(&tmp, "create", e))?;
    file.write_all(format!("{tag}{id}\n").as_bytes()).map_err(|e| dir_error(&tmp, "write", e))?;
    file.sync_all().map_err(|e| dir_error(&tmp, "sync", e))?;
    drop(file);
    let linked = std::fs::hard_link(&tmp, dir.join(name));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(dir_error(&dir.join(name), "link", e)),
    }
    sync_dir(dir).map_err(|e| dir_error(dir, "sync", e))?;
    read_id(dir, name, tag)?.ok_or_else(|| {
        dir_error(&dir.join(name), "read", io::Error::new(ErrorKind::NotFound, "vanished after its creation"))
    })
}

/// The identity of the store at `store` (`None` when it has none yet).
pub(crate) fn store_id(store: &Path) -> Result<Option<StoreId>> {
    read_id(store, STORE_ID_FILE, STORE_TAG)
}

/// The identity of the store at `store`; when it has none and `create`, a new one is drawn and
/// written durably (the first written wins).
pub(crate) fn ensure_store_id(store: &Path, create: bool) -> Result<Option<StoreId>> {
    match store_id(store)? {
        Some(id) => Ok(Some(id)),
        None if create => write_id(store, STORE_ID_FILE, STORE_TAG, StoreId::draw()).map(Some),
        None => Ok(None),
    }
}

/// Whether a lower directory without a marker may hold the file `name`: the files archive mode
/// puts there (chunk files, a format-2 `pack`, their `.tmp` copies) and a marker being written.
fn is_archive_file(name: &str) -> bool {
    let base = name.strip_suffix(".tmp").unwrap_or(name);
    base == LEGACY_PACK
        || parse_chunk_name(base).is_some()
        || name.strip_prefix(LOWER_MARKER).is_some_and(|rest| rest.starts_with('.') && rest.ends_with(".tmp"))
}

/// Checks that the lower directory `lower` serves the store at `store` (before anything in it is
/// read or removed). Its marker must name the store's identity. A lower directory without a marker
/// (new, or used by archive mode before markers existed) may hold only chunk files: a writer then
/// adopts it (gives the store an identity if it has none, writes the marker, both synced); a
/// reader uses it as it is. Anything else is refused with [`StoreError::ForeignLower`].
pub(crate) fn check_lower(store: &Path, lower: &Path, writable: bool) -> Result<()> {
    let refuse = |reason: String| StoreError::ForeignLower {
        store: PathBuf::from(store),
        lower: PathBuf::from(lower),
        reason,
    };
    let owner = read_id(lower, LOWER_MARKER, LOWER_TAG)?;
    let own = store_id(store)?;
    match (owner, own) {
        (Some(owner), Some(own)) if owner == own => Ok(()),
        (Some(owner), own) => Err(refuse(format!(
            "its {LOWER_MARKER} file says it serves the store {owner}; this store is {}",
            own.map_or_else(|| "another (it has no identity yet)".to_string(), |own| own.to_string())
        ))),
        (None, _) => {
            let names = match std::fs::read_dir(lower) {
                Ok(entries) => entries
                    .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
                    .collect::<io::Result<Vec<String>>>()
                    .map_err(|e| dir_error(lower, "list", e))?,
                Err(e) if e.kind() == ErrorKind::NotFound && !writable => Vec::new(),
                Err(e) => return Err(dir_error(lower, "list", e)),
            };
            if let Some(other) = names.iter().find(|name| !is_archive_file(name)) {
                return Err(refuse(format!(
                    "it has no {LOWER_MARKER} file and holds {other:?}, which is not a chunk file \
                     (another store's directory?)"
                )));
            }
            if writable {
                let own = match own {
                    Some(own) => own,
                    None => write_id(store, STORE_ID_FILE, STORE_TAG, StoreId::draw())?,
                };
                let claimed = write_id(lower, LOWER_MARKER, LOWER_TAG, own)?;
                if claimed != own {
                    return Err(refuse(format!(
                        "another store ({claimed}) claimed it at the same time; this store is {own}"
                    )));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn creating_a_directory_syncs_the_parent_of_each_directory_created() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a").join("b").join("store");
        let mut synced = Vec::new();
        create_dir_with(&path, &mut |dir| {
            synced.push(dir.to_path_buf());
            sync_dir(dir)
        })
        .unwrap();
        assert!(path.is_dir());
        let a = root.path().join("a");
        assert_eq!(synced, vec![root.path().to_path_buf(), a.clone(), a.join("b")]);
        // Already there: nothing to sync.
        synced.clear();
        create_dir_with(&path, &mut |dir| {
            synced.push(dir.to_path_buf());
            Ok(())
        })
        .unwrap();
        assert!(synced.is_empty());
        create_dir_durably(&root.path().join("c")).unwrap();
        assert!(root.path().join("c").is_dir());
    }

    #[test]
    fn identities_round_trip_and_the_first_written_wins() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (StoreId::draw(), StoreId::draw());
        assert_ne!(a, b);
        assert_eq!(StoreId::parse(format!("{STORE_TAG}{a}\n").as_bytes(), STORE_TAG), Some(a));
        assert_eq!(StoreId::parse(format!("{STORE_TAG}{a}").as_bytes(), STORE_TAG), None);
        assert_eq!(StoreId::parse(format!("{LOWER_TAG}{a}\n").as_bytes(), STORE_TAG), None);
        assert_eq!(write_id(dir.path(), LOWER_MARKER, LOWER_TAG, a).unwrap(), a);
        assert_eq!(write_id(dir.path(), LOWER_MARKER, LOWER_TAG, b).unwrap(), a);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![LOWER_MARKER]);
        assert_eq!(std::fs::read(dir.path().join(LOWER_MARKER)).unwrap().len(), 45);
    }
}
