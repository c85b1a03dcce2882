//! Streaming an Octez snapshot archive (POSIX tar): the small members are read into memory and
//! checked, the `context/` directory's files are written to disk, every other member is skipped.

use crate::block_data::{self, BlockData};
use crate::error::{OctezError, Result};
use crate::metadata::{self, Metadata};
use std::cell::Cell;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// The snapshot version larch reads (Octez's current and only supported one).
pub const SUPPORTED_VERSION: u64 = 9;
/// The member holding the version.
pub const VERSION_MEMBER: &str = "snapshot_version.json";
/// The member holding the metadata.
pub const METADATA_MEMBER: &str = "metadata.json";
/// The member holding the block data.
pub const BLOCK_DATA_MEMBER: &str = "block_data";
/// The directory holding the context (a one-commit irmin-pack store).
pub const CONTEXT_DIR: &str = "context";

/// Largest accepted sizes of the members read into memory.
const VERSION_MAX: u64 = 4096;
const METADATA_MAX: u64 = 1 << 20;
const BLOCK_DATA_MAX: u64 = 256 << 20;

/// What an archive held, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The snapshot version (9).
    pub version: u64,
    /// `metadata.json`.
    pub metadata: Metadata,
    /// What larch reads of `block_data`.
    pub block: BlockData,
    /// Files of the context written.
    pub context_files: u64,
    /// Bytes of those files.
    pub context_bytes: u64,
    /// Bytes of the archive read.
    pub archive_bytes: u64,
}

/// Counts the bytes read and whether the input ended while more was asked for.
struct Tracked<R> {
    inner: R,
    pos: Rc<Cell<u64>>,
    eof: Rc<Cell<bool>>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.eof.set(true);
        }
        self.pos.set(self.pos.get() + n as u64);
        Ok(n)
    }
}

/// The path below `context/` of a member name, if it is one; `Some(empty)` for the directory.
fn context_path(name: &str) -> Option<Result<PathBuf>> {
    let name = name.strip_prefix("./").unwrap_or(name);
    let rest = if name == CONTEXT_DIR { "" } else { name.strip_prefix("context/")? };
    let mut out = PathBuf::new();
    for component in Path::new(rest).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => {
                return Some(Err(OctezError::Corrupt {
                    member: name.into(),
                    offset: 0,
                    what: "a context path leaving the context directory".into(),
                }));
            }
        }
    }
    Some(Ok(out))
}

/// A member whose data ends before its size: the archive was cut inside it.
fn cut_short(member: &str, data_at: u64, read: u64, size: u64) -> OctezError {
    OctezError::Archive {
        member: member.to_string(),
        offset: data_at + read,
        what: "reading",
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the member ends after {read} of its {size} bytes"),
        ),
    }
}

fn write_error<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> OctezError + 'a {
    move |source| OctezError::Write { path: path.to_path_buf(), op, source }
}

/// Reads the archive `input`, writing the files of its `context/` directory into `context_dir`
/// (an existing, empty directory). Checks: the version is [`SUPPORTED_VERSION`]; the metadata
/// and block data decode; the metadata's block hash, level and timestamp are the block header's;
/// every required member is there once; the archive is complete (tar checksums, sizes, the
/// end-of-archive marker). The context itself is checked by importing it.
pub fn read_archive<R: Read>(input: R, context_dir: &Path) -> Result<Snapshot> {
    let pos = Rc::new(Cell::new(0u64));
    let eof = Rc::new(Cell::new(false));
    let tracked = Tracked {
        inner: std::io::BufReader::with_capacity(1 << 20, input),
        pos: pos.clone(),
        eof: eof.clone(),
    };
    let mut archive = tar::Archive::new(tracked);
    let archive_error = |member: &str, what: &'static str, offset: u64| {
        let member = member.to_string();
        move |source| OctezError::Archive { member, offset, what, source }
    };
    let mut version = None;
    let mut metadata_bytes: Option<Vec<u8>> = None;
    let mut block_bytes: Option<Vec<u8>> = None;
    let (mut context_files, mut context_bytes, mut context_seen) = (0u64, 0u64, false);
    let entries = archive.entries().map_err(archive_error("(header)", "reading the archive", 0))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| archive_error("(header)", "reading a member header", pos.get())(e))?;
        let header_at = entry.raw_header_position();
        let data_at = entry.raw_file_position();
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let size = entry.size();
        let kind = entry.header().entry_type();
        let small = |limit: u64| -> Result<()> {
            if size > limit {
                return Err(OctezError::Corrupt {
                    member: name.clone(),
                    offset: 0,
                    what: format!("{size} bytes, more than the {limit} accepted"),
                });
            }
            Ok(())
        };
        let bare = name.strip_prefix("./").unwrap_or(&name);
        let slot = match bare {
            VERSION_MEMBER => Some((&mut version, VERSION_MAX)),
            METADATA_MEMBER => Some((&mut metadata_bytes, METADATA_MAX)),
            BLOCK_DATA_MEMBER => Some((&mut block_bytes, BLOCK_DATA_MAX)),
            _ => None,
        };
        if let Some((slot, limit)) = slot {
            if slot.is_some() {
                return Err(OctezError::Duplicate { member: name, offset: header_at });
            }
            small(limit)?;
            // Grown as the bytes arrive: a header may claim more than the archive holds.
            let mut bytes = Vec::with_capacity(size.min(1 << 16) as usize);
            entry.read_to_end(&mut bytes).map_err(archive_error(
                &name,
                "reading",
                data_at + bytes.len() as u64,
            ))?;
            if bytes.len() as u64 != size {
                return Err(cut_short(&name, data_at, bytes.len() as u64, size));
            }
            if bare == VERSION_MEMBER {
                let found = metadata::version(&bytes, &name)?;
                if found != SUPPORTED_VERSION {
                    return Err(OctezError::UnsupportedVersion { found, supported: SUPPORTED_VERSION });
                }
            }
            *slot = Some(bytes);
            continue;
        }
        let Some(relative) = context_path(&name) else { continue };
        let relative = relative?;
        context_seen = true;
        let target = context_dir.join(&relative);
        match kind {
            tar::EntryType::Directory => {
                std::fs::create_dir_all(&target).map_err(write_error(&target, "create directory"))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous if !relative.as_os_str().is_empty() => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(write_error(parent, "create directory"))?;
                }
                let file = std::fs::File::create_new(&target).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        OctezError::Duplicate { member: name.clone(), offset: header_at }
                    } else {
                        OctezError::Write { path: target.clone(), op: "create", source: e }
                    }
                })?;
                let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
                let mut buffer = vec![0u8; 1 << 16];
                let mut done = 0u64;
                loop {
                    let n =
                        entry.read(&mut buffer).map_err(archive_error(&name, "reading", data_at + done))?;
                    if n == 0 {
                        break;
                    }
                    out.write_all(buffer.get(..n).unwrap_or_default())
                        .map_err(write_error(&target, "write"))?;
                    done += n as u64;
                }
                if done != size {
                    return Err(cut_short(&name, data_at, done, size));
                }
                out.flush().map_err(write_error(&target, "write"))?;
                context_files += 1;
                context_bytes += size;
            }
            other => {
                return Err(OctezError::Corrupt {
                    member: name,
                    offset: 0,
                    what: format!("unsupported member type {other:?} in the context directory"),
                });
            }
        }
    }
    let end = pos.get();
    if eof.get() {
        return Err(OctezError::Truncated { end });
    }
    // The rest: the second end-of-archive block and the record's padding (read, so that a pipe
    // is drained and the size reported is the archive's).
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(archive_error("(end)", "reading", end))?;
    let end = pos.get();
    let version = version.ok_or(OctezError::Missing { member: VERSION_MEMBER, end })?;
    let version = metadata::version(&version, VERSION_MEMBER)?;
    let metadata_bytes = metadata_bytes.ok_or(OctezError::Missing { member: METADATA_MEMBER, end })?;
    let block_bytes = block_bytes.ok_or(OctezError::Missing { member: BLOCK_DATA_MEMBER, end })?;
    if !context_seen || context_files == 0 {
        return Err(OctezError::Missing { member: CONTEXT_DIR, end });
    }
    let metadata = metadata::decode(&metadata_bytes)?;
    let block = block_data::decode(&block_bytes)?;
    metadata::check_against(&metadata, &block)?;
    Ok(Snapshot { version, metadata, block, context_files, context_bytes, archive_bytes: end })
}

/// Reads a snapshot exported as a directory (`octez-node snapshot export --export-format raw`):
/// the same members as files of `dir`, checked as [`read_archive`] checks them; the context is
/// `dir/context`, read in place (nothing is written). `archive_bytes` is 0.
pub fn read_directory(dir: &Path) -> Result<Snapshot> {
    let read = |member: &'static str, limit: u64| -> Result<Vec<u8>> {
        let path = dir.join(member);
        let size = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta.len(),
            Ok(_) => {
                return Err(OctezError::Corrupt {
                    member: member.into(),
                    offset: 0,
                    what: "not a file".into(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(OctezError::Missing { member, end: 0 });
            }
            Err(source) => return Err(OctezError::Write { path, op: "metadata", source }),
        };
        if size > limit {
            return Err(OctezError::Corrupt {
                member: member.into(),
                offset: 0,
                what: format!("{size} bytes, more than the {limit} accepted"),
            });
        }
        std::fs::read(&path).map_err(|source| OctezError::Write { path, op: "read", source })
    };
    let version = metadata::version(&read(VERSION_MEMBER, VERSION_MAX)?, VERSION_MEMBER)?;
    if version != SUPPORTED_VERSION {
        return Err(OctezError::UnsupportedVersion { found: version, supported: SUPPORTED_VERSION });
    }
    let metadata = metadata::decode(&read(METADATA_MEMBER, METADATA_MAX)?)?;
    let block = block_data::decode(&read(BLOCK_DATA_MEMBER, BLOCK_DATA_MAX)?)?;
    metadata::check_against(&metadata, &block)?;
    let (mut context_files, mut context_bytes) = (0u64, 0u64);
    let mut pending = vec![dir.join(CONTEXT_DIR)];
    while let Some(next) = pending.pop() {
        let entries = match std::fs::read_dir(&next) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(OctezError::Missing { member: CONTEXT_DIR, end: 0 });
            }
            Err(source) => return Err(OctezError::Write { path: next, op: "list", source }),
        };
        for entry in entries {
            let entry =
                entry.map_err(|source| OctezError::Write { path: next.clone(), op: "list", source })?;
            let meta = entry.metadata().map_err(|source| OctezError::Write {
                path: entry.path(),
                op: "metadata",
                source,
            })?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                context_files += 1;
                context_bytes += meta.len();
            }
        }
    }
    if context_files == 0 {
        return Err(OctezError::Missing { member: CONTEXT_DIR, end: 0 });
    }
    Ok(Snapshot { version, metadata, block, context_files, context_bytes, archive_bytes: 0 })
}
