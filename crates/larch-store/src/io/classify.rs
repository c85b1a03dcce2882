//! What a directory holds, as the writer, the readers and recovery see it: nothing, a store, the
//! remains of an interrupted initialisation, a pack without its control file, or something else.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::index;
use crate::format::names::{self, CHUNK_HEADER_LEN};
use std::io::ErrorKind;
use std::path::Path;

/// What a directory holds, as both writers and readers see it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DirKind {
    /// No such directory.
    Missing,
    /// An empty directory (or one holding only a version-1 `lock` file): a writer creates a store.
    Empty,
    /// A `control` file: a store (perhaps damaged).
    Store,
    /// `pack` and/or `commits` that hold at most their headers, no `control`: an initialisation
    /// that crashed; it holds no data, and a writer initialises it again.
    Interrupted,
    /// A `pack` holding data but no `control`.
    NoControl(u64),
    /// Anything else.
    Foreign(String),
}

/// Classifies `path` (see [`DirKind`]).
pub(crate) fn classify(path: &Path) -> Result<DirKind> {
    let dir_error = |op, source| StoreError::Directory { path: path.into(), op, source };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(DirKind::Missing),
        Err(e) => return Err(dir_error("stat", e)),
    };
    if !metadata.is_dir() {
        return Ok(DirKind::Foreign("not a directory".into()));
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| dir_error("list", e))? {
        let entry = entry.map_err(|e| dir_error("list", e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    if names.iter().any(|name| name == FileKind::Control.file_name()) {
        return Ok(DirKind::Store);
    }
    let ours = [FileKind::Pack.file_name(), FileKind::Index.file_name(), FileKind::Lock.file_name()];
    let is_ours = |name: &String| {
        ours.contains(&name.as_str())
            || name == crate::io::dirs::STORE_ID_FILE
            || names::parse_chunk_name(name).is_some()
            || names::parse_segment_name(name).is_some()
    };
    if let Some(other) = names.iter().find(|name| !is_ours(name)) {
        return Ok(DirKind::Foreign(format!(
            "the directory is not empty and holds no store (it holds {other:?})"
        )));
    }
    let len_of = |kind: FileKind| -> Result<u64> {
        match std::fs::metadata(path.join(kind.file_name())) {
            Ok(metadata) => Ok(metadata.len()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
            Err(e) => Err(StoreError::io(kind, 0, "stat", e)),
        }
    };
    let (legacy, commits) = (len_of(FileKind::Pack)?, len_of(FileKind::Index)?);
    // Record bytes of the chunk files (beyond their headers).
    let mut chunk_data = 0u64;
    let mut chunks = 0usize;
    for name in names.iter().filter(|name| names::parse_chunk_name(name).is_some()) {
        chunks += 1;
        let len =
            std::fs::metadata(path.join(name)).map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?;
        chunk_data += len.len().saturating_sub(CHUNK_HEADER_LEN);
    }
    // A collected store's segments (its control file lost): records too, for `larch recover`.
    for name in names.iter().filter(|name| names::parse_segment_name(name).is_some()) {
        chunks += 1;
        let len = std::fs::metadata(path.join(name))
            .map_err(|e| StoreError::io(FileKind::Segment, 0, "stat", e))?;
        chunk_data += len.len();
    }
    let has = |kind: FileKind| names.iter().any(|name| name == kind.file_name());
    if !has(FileKind::Pack) && !has(FileKind::Index) && chunks == 0 {
        return Ok(DirKind::Empty);
    }
    if legacy <= PACK_HEADER_LEN && chunk_data == 0 && commits <= index::INDEX_HEADER_LEN {
        return Ok(DirKind::Interrupted);
    }
    Ok(DirKind::NoControl(legacy + chunk_data))
}
