//! `store.dict`: the path-step dictionary (spec §4.7): `int32 BE length ‖ bytes` records, the
//! n-th with id n; only the first `dict_end_poff` bytes (after any dead header) are valid.

use crate::bytes::Cursor;
use crate::error::{IrminError, Result};
use crate::layout::DataFile;
use std::path::Path;

/// The decoded dictionary: one buffer and the end of each step in it.
#[derive(Debug)]
pub(crate) struct Dict {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Dict {
    pub(crate) fn open(path: &Path, header: u64, valid: u64) -> Result<Dict> {
        let file = DataFile::open(path.to_path_buf())?;
        if header.checked_add(valid).is_none_or(|end| end > file.len) {
            return Err(IrminError::corrupt(
                path,
                file.len,
                format!("dict_end_poff {valid} past the file's size {}", file.len),
            ));
        }
        let len = usize::try_from(valid).map_err(|_| IrminError::corrupt(path, 0, "dict too large"))?;
        let raw = file.read(header, len)?;
        let mut cursor = Cursor::new(&raw, header, path);
        let mut bytes = Vec::with_capacity(raw.len());
        let mut ends = Vec::new();
        while cursor.remaining() > 0 {
            let at = cursor.offset();
            let n = cursor.int32("dict record length")?;
            let n = usize::try_from(n).map_err(|_| IrminError::corrupt(path, at, "dict record too long"))?;
            if n > cursor.remaining() {
                return Err(IrminError::corrupt(
                    path,
                    at,
                    format!("dict record of {n} bytes, {} left", cursor.remaining()),
                ));
            }
            bytes.extend_from_slice(cursor.raw(n, "dict record")?);
            ends.push(bytes.len());
        }
        Ok(Dict { bytes, ends })
    }

    /// The step with id `id`.
    pub(crate) fn get(&self, id: usize) -> Option<&[u8]> {
        let end = *self.ends.get(id)?;
        let start = if id == 0 { 0 } else { *self.ends.get(id - 1)? };
        self.bytes.get(start..end)
    }

    /// Number of steps.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}
