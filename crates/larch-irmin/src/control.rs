//! `store.control` (versions 3 to 5) and a lower volume's `volume.control`, decoded into one
//! normalised view (spec `irmin-formats.md` §4.4, §4.13; Irmin's `control_file_intf.ml`).

use crate::bytes::{Cursor, adler32};
use crate::error::{IrminError, Result};
use std::path::Path;

/// Irmin refuses control files larger than this (`control_file.ml`).
pub const MAX_CONTROL_BYTES: u64 = 4096;

/// The GC status of a store, as the control file records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Migrated from a V1/V2 `store.pack`: chunk 0 and the dict keep a 16-byte dead header.
    FromV1V2 {
        /// The end of the legacy data at the upgrade.
        entry_offset_at_upgrade_to_v3: u64,
    },
    /// Never GCed (minimal indexing).
    NoGcYet,
    /// Never GCed, every object indexed.
    UsedNonMinimalIndexing,
    /// GCed: objects below `suffix_start_offset` live in the prefix (or a lower volume).
    Gced {
        /// Global offset where the suffix starts.
        suffix_start_offset: u64,
        /// GC generation: names `store.<g>.prefix` and `store.<g>.mapping`.
        generation: u64,
        /// Offset of the last GC's target commit.
        latest_gc_target_offset: u64,
        /// Dead bytes at the start of the first suffix chunk.
        suffix_dead_bytes: u64,
        /// Valid length of the mapping file, when known (V5).
        mapping_end_poff: Option<u64>,
    },
}

/// The upper control file, normalised to the V5 fields (V3/V4 upgraded as Irmin does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    /// 3, 4 or 5.
    pub version: u8,
    /// Bytes of valid data in `store.dict` (after any dead header).
    pub dict_end_poff: u64,
    /// Valid bytes of the last (appendable) suffix chunk.
    pub appendable_chunk_poff: u64,
    /// Index of the first suffix chunk.
    pub chunk_start_idx: u64,
    /// Number of suffix chunks.
    pub chunk_num: u64,
    /// Number of lower volumes (V5).
    pub volume_num: u64,
    /// GC status.
    pub status: Status,
}

fn version_of(data: &[u8], file: &Path) -> Result<u8> {
    let raw =
        data.get(..8).ok_or_else(|| IrminError::corrupt(file, 0, "control file shorter than its version"))?;
    match raw {
        b"00000003" => Ok(3),
        b"00000004" => Ok(4),
        b"00000005" => Ok(5),
        _ => Err(IrminError::UnsupportedVersion {
            file: file.to_path_buf(),
            version: String::from_utf8_lossy(raw).into_owned(),
        }),
    }
}

fn check_checksum(data: &[u8], checksum_at: usize, stored: u64, file: &Path) -> Result<()> {
    let mut payload = data.get(8..).unwrap_or_default().to_vec();
    if let Some(field) = payload.get_mut(checksum_at - 8..checksum_at) {
        field.fill(0);
    }
    let computed = u64::from(adler32(&payload));
    if computed != stored {
        return Err(IrminError::Checksum { file: file.to_path_buf(), stored, computed });
    }
    Ok(())
}

impl Control {
    /// Decodes the bytes of `store.control` (named `file` in errors).
    pub fn decode(data: &[u8], file: &Path) -> Result<Control> {
        if data.len() as u64 > MAX_CONTROL_BYTES {
            return Err(IrminError::corrupt(
                file,
                0,
                format!("control file of {} bytes (max 4096)", data.len()),
            ));
        }
        let version = version_of(data, file)?;
        let mut cursor = Cursor::new(data, 0, file);
        cursor.raw(8, "version")?;
        let dict_end_poff = cursor.int63("dict_end_poff")?;
        let appendable_chunk_poff = cursor.int63("suffix end")?;
        if version == 3 {
            let tag_at = cursor.offset();
            let status = match cursor.varint("status tag")? {
                0 => Status::FromV1V2 {
                    entry_offset_at_upgrade_to_v3: cursor.int63("entry_offset_at_upgrade")?,
                },
                1 => Status::NoGcYet,
                2 => Status::UsedNonMinimalIndexing,
                3 => {
                    let suffix_start_offset = cursor.int63("suffix_start_offset")?;
                    let generation = cursor.varint("generation")?;
                    Status::Gced {
                        suffix_start_offset,
                        generation,
                        latest_gc_target_offset: suffix_start_offset,
                        suffix_dead_bytes: 0,
                        mapping_end_poff: None,
                    }
                }
                tag => return Err(IrminError::corrupt(file, tag_at, format!("unknown status tag {tag}"))),
            };
            let chunk_start_idx = match status {
                Status::Gced { generation, .. } => generation,
                _ => 0,
            };
            return Ok(Control {
                version,
                dict_end_poff,
                appendable_chunk_poff,
                chunk_start_idx,
                chunk_num: 1,
                volume_num: 0,
                status,
            });
        }
        if version == 4 {
            cursor.byte("upgraded_from_v3_to_v4")?;
        } else {
            match cursor.byte("upgraded_from option")? {
                0 => {}
                // Repr encodes `Some` with the byte 0xff.
                0xff => {
                    cursor.varint("upgraded_from")?;
                }
                other => return Err(cursor.fail(format!("option tag {other}"))),
            }
        }
        let checksum_at = cursor.position();
        let checksum = cursor.int63("checksum")?;
        let chunk_start_idx = cursor.varint("chunk_start_idx")?;
        let chunk_num = cursor.varint("chunk_num")?;
        let volume_num = if version == 5 { cursor.varint("volume_num")? } else { 0 };
        let tag_at = cursor.offset();
        let status = match cursor.varint("status tag")? {
            0 => Status::FromV1V2 { entry_offset_at_upgrade_to_v3: cursor.int63("entry_offset_at_upgrade")? },
            1 => Status::NoGcYet,
            2 => Status::UsedNonMinimalIndexing,
            3 => {
                let suffix_start_offset = cursor.int63("suffix_start_offset")?;
                let generation = cursor.varint("generation")?;
                let latest_gc_target_offset = cursor.int63("latest_gc_target_offset")?;
                let suffix_dead_bytes = cursor.int63("suffix_dead_bytes")?;
                let mapping_end_poff = if version == 5 {
                    match cursor.byte("mapping_end_poff option")? {
                        0 => None,
                        0xff => Some(cursor.int63("mapping_end_poff")?),
                        other => return Err(cursor.fail(format!("option tag {other}"))),
                    }
                } else {
                    None
                };
                Status::Gced {
                    suffix_start_offset,
                    generation,
                    latest_gc_target_offset,
                    suffix_dead_bytes,
                    mapping_end_poff,
                }
            }
            tag => return Err(IrminError::corrupt(file, tag_at, format!("unknown status tag {tag}"))),
        };
        check_checksum(data, checksum_at, checksum, file)?;
        if chunk_num == 0 {
            return Err(IrminError::corrupt(file, 0, "chunk_num is 0"));
        }
        Ok(Control {
            version,
            dict_end_poff,
            appendable_chunk_poff,
            chunk_start_idx,
            chunk_num,
            volume_num,
            status,
        })
    }

    /// Where the suffix starts and how many dead bytes open its first chunk (0, 0 unless GCed).
    pub fn suffix_start(&self) -> (u64, u64) {
        match self.status {
            Status::Gced { suffix_start_offset, suffix_dead_bytes, .. } => {
                (suffix_start_offset, suffix_dead_bytes)
            }
            _ => (0, 0),
        }
    }

    /// Whether the store was migrated from V1/V2 (16-byte dead headers in chunk 0 and the dict).
    pub fn legacy_headers(&self) -> bool {
        matches!(self.status, Status::FromV1V2 { .. })
    }
}

/// A lower volume's `volume.control`: the global range it covers and its mapping's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeControl {
    /// First global offset covered.
    pub start_offset: u64,
    /// End (exclusive) of the covered range.
    pub end_offset: u64,
    /// Valid bytes of `volume.mapping`.
    pub mapping_end_poff: u64,
}

impl VolumeControl {
    /// Decodes the bytes of a `volume.control`.
    pub fn decode(data: &[u8], file: &Path) -> Result<VolumeControl> {
        if data.len() as u64 > MAX_CONTROL_BYTES {
            return Err(IrminError::corrupt(file, 0, "volume control file larger than 4096 bytes"));
        }
        if version_of(data, file)? != 5 {
            return Err(IrminError::UnsupportedVersion {
                file: file.to_path_buf(),
                version: "volume, not 00000005".into(),
            });
        }
        let mut cursor = Cursor::new(data, 0, file);
        cursor.raw(8, "version")?;
        let start_offset = cursor.int63("start_offset")?;
        let end_offset = cursor.int63("end_offset")?;
        let mapping_end_poff = cursor.int63("mapping_end_poff")?;
        let checksum_at = cursor.position();
        let checksum = cursor.int63("checksum")?;
        check_checksum(data, checksum_at, checksum, file)?;
        if end_offset < start_offset {
            return Err(IrminError::corrupt(file, 8, "volume ends before it starts"));
        }
        Ok(VolumeControl { start_offset, end_offset, mapping_end_poff })
    }
}
