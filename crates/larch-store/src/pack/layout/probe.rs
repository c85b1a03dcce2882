//! A chunk file opened and its header checked ([`Probe`], [`open_chunk`]), and the check that
//! the chunks of a layout continue one another and hold their ranges ([`check_chunks`]).

use super::ChunkExtent;
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::names::{CHUNK_HEADER_LEN, LEGACY_PACK, chunk_name, decode_chunk_header};
use crate::io::storage::{Directory, Storage};
use crate::pack::handles::{ChunkFile, FilePool};
use std::io::{self, ErrorKind};
use std::sync::Arc;

/// A chunk file just opened and its header checked: what the layout learns of it.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(super) seq: u32,
    pub(super) start: u64,
    pub(super) data_at: u64,
    pub(super) legacy: bool,
    /// The file's length when opened.
    pub(super) len: u64,
}

impl Probe {
    /// Whether this chunk may follow `last` in a layout discovered from the files alone: it starts
    /// inside or at the end of what `last`'s file holds.
    pub(super) fn follows(&self, last: &Probe) -> bool {
        self.start >= last.start && self.start <= last.start + last.len.saturating_sub(last.data_at)
    }

    pub(super) fn name(&self) -> String {
        if self.legacy { LEGACY_PACK.to_string() } else { chunk_name(self.seq) }
    }

    /// The chunk of a layout over `file`, pinned open (`pin`: the writer's head) or in `pool`.
    pub(super) fn into_extent(
        self,
        dir: &Arc<dyn Directory>,
        pool: &Arc<FilePool>,
        file: Arc<dyn Storage>,
        pin: bool,
    ) -> ChunkExtent {
        let identity = (self.seq, self.start, self.legacy);
        ChunkExtent {
            seq: self.seq,
            start: self.start,
            data_at: self.data_at,
            legacy: self.legacy,
            file: ChunkFile::new(dir.clone(), pool.clone(), identity, file, pin),
        }
    }
}

/// Opens chunk `seq` (seq 0: `chunk.000000`, else a format-2 `pack`) and checks its header.
pub(crate) fn open_chunk(dir: &dyn Directory, seq: u32, writable: bool) -> Result<(Probe, Arc<dyn Storage>)> {
    let name = chunk_name(seq);
    // The directory's message names where it looked (both layers in archive mode).
    let missing = |name: &str, e: &io::Error| StoreError::MissingFile {
        file: FileKind::Pack,
        what: "chunk",
        name: name.to_string(),
        detail: e.to_string(),
    };
    let opened = match dir.open(&name, writable) {
        Err(e) if e.kind() == ErrorKind::NotFound && seq == 0 => match dir.open(LEGACY_PACK, false) {
            Ok(file) => {
                let failed = |op, source| StoreError::OpenFile { name: LEGACY_PACK.to_string(), op, source };
                let mut header = [0u8; PACK_HEADER_LEN as usize];
                file.read_at(0, &mut header).map_err(|e| failed("read header", e))?;
                crate::format::names::check_pack_header(&header)?;
                let len = file.len().map_err(|e| failed("stat", e))?;
                let probe =
                    Probe { seq: 0, start: PACK_HEADER_LEN, data_at: PACK_HEADER_LEN, legacy: true, len };
                return Ok((probe, file));
            }
            Err(legacy) if legacy.kind() == ErrorKind::NotFound => return Err(missing(&name, &e)),
            Err(source) => {
                return Err(StoreError::OpenFile { name: LEGACY_PACK.to_string(), op: "open", source });
            }
        },
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(missing(&name, &e)),
        // Out of descriptors (`EMFILE`), say: the error names the file.
        other => other.map_err(|source| StoreError::OpenFile { name: name.clone(), op: "open", source })?,
    };
    let mut header = [0u8; CHUNK_HEADER_LEN as usize];
    opened.read_at(0, &mut header).map_err(|e| match e.kind() {
        ErrorKind::UnexpectedEof => {
            StoreError::corrupt(FileKind::Pack, 0, format!("{name}: truncated header"))
        }
        // Unlinked since it was opened (a remote lower layer's object deleted by a GC).
        ErrorKind::NotFound => missing(&name, &e),
        _ => StoreError::OpenFile { name: name.clone(), op: "read header", source: e },
    })?;
    let (found, start) = decode_chunk_header(&header, &name)?;
    if found != seq {
        return Err(StoreError::corrupt(FileKind::Pack, 16, format!("{name}: header says chunk {found}")));
    }
    let len =
        opened.len().map_err(|source| StoreError::OpenFile { name: name.clone(), op: "stat", source })?;
    Ok((Probe { seq, start, data_at: CHUNK_HEADER_LEN, legacy: false, len }, opened))
}

/// Checks that `chunks` (increasing seq) continue one another and that each file holds its range;
/// the last one must hold up to `end`.
pub(super) fn check_chunks(chunks: &[Probe], end: u64) -> Result<()> {
    for (i, chunk) in chunks.iter().enumerate() {
        let range_end = chunks.get(i + 1).map_or(end, |next| next.start);
        if let Some(next) = chunks.get(i + 1)
            && (next.seq != chunk.seq + 1 || next.start < chunk.start || next.legacy)
        {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                next.start,
                format!(
                    "{} (start {}) does not follow {} (start {})",
                    next.name(),
                    next.start,
                    chunk.name(),
                    chunk.start
                ),
            ));
        }
        if range_end < chunk.start {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                range_end,
                format!("{} starts at {} past the published end {range_end}", chunk.name(), chunk.start),
            ));
        }
        let needed = chunk.data_at + (range_end - chunk.start);
        let len = chunk.len;
        if len < needed {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                chunk.start + len.saturating_sub(chunk.data_at),
                format!("{} ends before its published length ({len} of {needed} bytes)", chunk.name()),
            ));
        }
    }
    Ok(())
}
