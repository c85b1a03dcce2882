//! The commit switch at work (docs/store.md): reading the control file, writing a slot and the
//! confirmation, and loading the commit index, whose entries past the durable part are checked
//! against the pack and rebuilt from it when a crash lost or damaged them.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::MIN_COMMIT_RECORD;
use crate::format::codec::{self, PACK_HEADER_LEN, RecordKind};
use crate::format::control::{self, CONFIRM_AT, CONTROL_LEN, ControlFileState, PAGE};
use crate::format::index;
use crate::format::names::check_pack_header;
use crate::io::storage::Storage;
use crate::pack::layout::Layout;
use crate::pack::reader::PackReader;
use larch_core::Hash;
use std::io::ErrorKind;
use std::sync::Arc;

/// Reads and decodes the control file (absent or short: the missing slots are empty).
pub(crate) fn read_control(control: &dyn Storage) -> Result<ControlFileState> {
    let len = match control.len() {
        Ok(len) => len,
        Err(e) if e.kind() == ErrorKind::NotFound => 0,
        Err(e) => return Err(StoreError::io(FileKind::Control, 0, "stat", e)),
    };
    let mut bytes = vec![0u8; len.min(CONTROL_LEN) as usize];
    control.read_at(0, &mut bytes).map_err(|e| StoreError::io(FileKind::Control, 0, "read", e))?;
    ControlFileState::decode(&bytes)
}

/// Writes `state` into slot `slot` (its whole page, zero-padded), without syncing.
pub(crate) fn write_slot(control: &dyn Storage, slot: usize, encoded: &[u8]) -> Result<()> {
    let mut page = vec![0u8; PAGE as usize];
    page.get_mut(..encoded.len())
        .ok_or_else(|| StoreError::TooLarge("control slot over a page".into()))?
        .copy_from_slice(encoded);
    let at = slot as u64 * PAGE;
    control.write_at(at, &page).map_err(|e| StoreError::io(FileKind::Control, at, "write", e))
}

/// Writes the confirmation of `generation`, without syncing.
pub(crate) fn write_confirm(control: &dyn Storage, generation: u64) -> Result<()> {
    control
        .write_at(CONFIRM_AT, &control::encode_confirm(generation))
        .map_err(|e| StoreError::io(FileKind::Control, CONFIRM_AT, "write", e))
}

/// A commit index loaded and checked against the pack.
pub(crate) struct LoadedIndex {
    /// The commits in index order: hash and record offset.
    pub entries: Vec<(Hash, u64)>,
    /// When entries had to be rebuilt from the pack: the index offset they start at and their
    /// bytes (a writer writes them back).
    pub rebuilt: Option<(u64, Vec<u8>)>,
}

/// Reads the entries of the commit index `index` in `[from, to)`. Entries below `trusted` are taken as they
/// are (checksums only); the others must name, in increasing order after `previous` (the offset of
/// the commit before `from`), a commit record of the pack below `pack_end` with their hash. From
/// the first one that does not (lost, torn, stale), the entries are rebuilt by scanning the pack's
/// records after the last good commit (or from `first_record`, the oldest record kept, when there is
/// none) up to `pack_end`.
pub(crate) fn load_entries(
    (index_file, layout): (&dyn Storage, &Arc<Layout>),
    from: u64,
    to: u64,
    trusted: u64,
    (previous, first_record): (Option<u64>, u64),
    pack_end: u64,
) -> Result<LoadedIndex> {
    let entry_len = index::ENTRY_LEN as u64;
    if to < from || !(to - from).is_multiple_of(entry_len) {
        return Err(StoreError::corrupt(FileKind::Control, 0, format!("bad index range [{from}, {to})")));
    }
    let expected = (to - from) / entry_len;
    // Memory at open is bounded by the pack: a commit record takes at least MIN_COMMIT_RECORD bytes,
    // so a state claiming more commits than its pack can hold is refused before anything is read.
    let claimed = (to - index::INDEX_HEADER_LEN) / entry_len;
    if claimed.saturating_mul(MIN_COMMIT_RECORD) > pack_end {
        return Err(StoreError::corrupt(
            FileKind::Control,
            0,
            format!(
                "the published state claims {claimed} commits, more than a pack of {pack_end} bytes can hold"
            ),
        ));
    }
    let file_len = index_file.len().map_err(|e| StoreError::io(FileKind::Index, 0, "stat", e))?;
    let trusted = trusted.clamp(from, to);
    if file_len < trusted {
        return Err(StoreError::corrupt(
            FileKind::Index,
            file_len,
            format!("file ends before its durable length {trusted}"),
        ));
    }
    // Bounded by what the file holds: the published range is checked against its length.
    let readable = to.min(file_len).max(from);
    let len =
        usize::try_from(readable - from).map_err(|_| StoreError::corrupt(FileKind::Index, from, "huge"))?;
    let mut bytes = vec![0; len];
    index_file.read_at(from, &mut bytes).map_err(|e| StoreError::io(FileKind::Index, from, "read", e))?;
    let trusted_len = (trusted - from) as usize;
    let mut entries = index::decode_entries(bytes.get(..trusted_len).unwrap_or_default(), from)?;
    let checker = PackReader::new(layout.clone(), pack_end, 0);
    let mut last = entries.last().map(|(_, offset)| *offset).or(previous);
    for (i, chunk) in bytes.get(trusted_len..).unwrap_or_default().chunks(index::ENTRY_LEN).enumerate() {
        let at = trusted + (i * index::ENTRY_LEN) as u64;
        let Ok(decoded) = index::decode_entries(chunk, at) else { break };
        let Some((hash, offset)) = decoded.first().copied() else { break };
        if last.is_some_and(|last| offset <= last) || offset >= pack_end {
            break;
        }
        match checker.commit(offset) {
            Ok(commit) if commit.hash() == hash => {}
            _ => break,
        }
        entries.push((hash, offset));
        last = Some(offset);
    }
    if entries.len() as u64 == expected {
        return Ok(LoadedIndex { entries, rebuilt: None });
    }
    // Rebuild the rest from the pack: every commit record after the last good one.
    let good = entries.len();
    let mut at = match last {
        Some(offset) => offset + checker.with_record(offset, |_, _| Ok(()))?.1,
        None => first_record.max(PACK_HEADER_LEN),
    };
    while at < pack_end {
        let (found, total) = checker.with_record(at, |kind, body| match kind {
            RecordKind::Commit => Ok(Some(codec::decode_commit(body, at)?.hash())),
            _ => Ok(None),
        })?;
        if let Some(hash) = found {
            entries.push((hash, at));
        }
        at += total;
    }
    if entries.len() as u64 != expected {
        return Err(StoreError::corrupt(
            FileKind::Index,
            from + good as u64 * entry_len,
            format!(
                "the published state names {expected} commits here, the pack holds {} up to its published end",
                entries.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity((entries.len() - good) * index::ENTRY_LEN);
    for (hash, offset) in entries.get(good..).unwrap_or_default() {
        index::encode_entry(&mut out, hash, *offset);
    }
    Ok(LoadedIndex { entries, rebuilt: Some((from + good as u64 * entry_len, out)) })
}

/// Checks the 16-byte header of the pack or the index, and that the file holds `published` bytes.
pub(crate) fn check_header(storage: &dyn Storage, kind: FileKind, published: u64) -> Result<()> {
    let len = storage.len().map_err(|e| StoreError::io(kind, 0, "stat", e))?;
    if len < published {
        return Err(StoreError::corrupt(
            kind,
            len,
            format!("file ends before its published length {published}"),
        ));
    }
    let mut header = [0u8; 16];
    storage.read_at(0, &mut header).map_err(|e| StoreError::io(kind, 0, "read", e))?;
    match kind {
        FileKind::Pack => check_pack_header(&header),
        _ => index::check_header(&header),
    }
}
