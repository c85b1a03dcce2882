//! The control file, the commit switch (docs/format.md §2): two checksummed slots written in place,
//! each on its own 4 KiB page, and a confirmation record on a third page. The newest valid slot is
//! the published state; a torn write can only damage the slot being written, never the other one.

use crate::error::{FileKind, Result, StoreError};
use crate::format::index::{ENTRY_LEN, INDEX_HEADER_LEN};
use larch_core::Hash;
use std::collections::BTreeMap;

/// Magic of a control slot.
pub const CONTROL_MAGIC: &[u8; 8] = b"LARCHCTL";
/// Magic of the confirmation record.
pub const CONFIRM_MAGIC: &[u8; 8] = b"LARCHCNF";
/// Bytes of one page of the control file: each slot and the confirmation record has its own.
pub const PAGE: u64 = 4096;
/// Offset of the confirmation record.
pub const CONFIRM_AT: u64 = 2 * PAGE;
/// Length of the confirmation record.
pub const CONFIRM_LEN: usize = 20;
/// Length of the whole control file.
pub const CONTROL_LEN: u64 = CONFIRM_AT + CONFIRM_LEN as u64;
/// Format version of the slots this build writes (layout 3: the GC and chunk fields).
pub const SLOT_VERSION: u32 = 3;
/// The format-2 slot version, still read (a format-2 store: its `pack` is chunk 0).
pub const SLOT_VERSION_2: u32 = 2;
/// The version of a layout-3 slot one of whose entries keeps more than one chunk in place (the
/// same bytes as version 3 otherwise): builds that cannot read such an entry refuse the store as
/// of an unknown version instead of falling back to their older slot (`docs/format.md` §2).
pub const SLOT_VERSION_KEPT_RUN: u32 = 4;
/// Bit 0 of a layout-3 slot's flags: the store is in archive mode, chunk files may be in the lower
/// directory (`docs/format.md`).
pub const FLAG_ARCHIVE: u32 = 1;
/// Bit 1 of a layout-3 slot's flags: the record carries a non-zero lineage (`u64`, after the
/// branches: [`ControlState::lineage`]). Set by the encoder exactly when the lineage is not 0, so a
/// store never rewound keeps the bytes of earlier builds (`docs/format.md` §2).
pub const FLAG_LINEAGE: u32 = 2;
/// Bit 63 of a segment entry's generation: the entry names chunks kept in place by a GC
/// (`chunk.<seq>`, `seq` in the low 32 bits, and the `count − 1` chunks after it, the count less
/// one in bits 32–62) instead of a segment file `seg.<generation>` (docs/gc-design.md §13, *Chunks
/// kept in place*). Its footer CRC is 0.
pub const KEPT_CHUNK_BIT: u64 = 1 << 63;
/// Where a kept-chunks entry's count less one starts in its generation (bits 32–62).
const KEPT_COUNT_SHIFT: u32 = 32;
/// Bytes before the branch count in a layout-2 slot.
const FIXED_LEN_2: usize = 48;
/// Bytes before the segment list in a layout-3 slot.
const FIXED_LEN_3: usize = 96;
/// Bytes of one segment entry of a layout-3 slot.
const SEGMENT_LEN: usize = 36;
/// Most segments a slot may name.
pub const MAX_SEGMENTS: usize = 8;
/// The smallest slot: a layout-2 header, the branch count and the checksum.
const MIN_SLOT_LEN: usize = FIXED_LEN_2 + 8;

/// Where a branch points: the commit hash and its record offset.
pub type BranchTarget = (Hash, u64);

/// A GC segment named by a slot (`docs/gc-design.md` §3.4; none is written before GC exists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRef {
    /// GC generation of the slice that wrote it.
    pub generation: u64,
    /// Global start of the range it replaces.
    pub range_start: u64,
    /// Global end (exclusive) of that range.
    pub range_end: u64,
    /// Its file length.
    pub file_len: u64,
    /// The CRC of its footer.
    pub footer_crc: u32,
}

impl SegmentRef {
    /// The entry of chunk `seq` kept in place over `[range_start, range_end)`, its file `file_len`
    /// bytes long.
    pub fn kept_chunk_entry(seq: u32, range_start: u64, range_end: u64, file_len: u64) -> SegmentRef {
        SegmentRef {
            generation: KEPT_CHUNK_BIT | u64::from(seq),
            range_start,
            range_end,
            file_len,
            footer_crc: 0,
        }
    }

    /// The entry of the `count` chunks from `first_seq` on kept in place over `[range_start,
    /// range_end)`, the last one's file `last_file_len` bytes long; `None` when `count` is 0, above
    /// 2^31, or the last sequence number would overflow.
    pub fn kept_chunks_entry(
        first_seq: u32,
        count: u32,
        range_start: u64,
        range_end: u64,
        last_file_len: u64,
    ) -> Option<SegmentRef> {
        let less_one = count.checked_sub(1).filter(|less_one| *less_one < 1 << 31)?;
        first_seq.checked_add(less_one)?.checked_add(1)?;
        let mut entry = SegmentRef::kept_chunk_entry(first_seq, range_start, range_end, last_file_len);
        entry.generation |= u64::from(less_one) << KEPT_COUNT_SHIFT;
        Some(entry)
    }

    /// The first chunk this entry keeps in place, if it names chunks rather than a segment file.
    pub fn kept_chunk(&self) -> Option<u32> {
        self.kept_chunks().map(|seqs| seqs.start)
    }

    /// The chunks this entry keeps in place (increasing sequence numbers), if it names chunks
    /// rather than a segment file.
    pub fn kept_chunks(&self) -> Option<std::ops::Range<u32>> {
        if self.generation & KEPT_CHUNK_BIT == 0 {
            return None;
        }
        let first = (self.generation & u64::from(u32::MAX)) as u32;
        let less_one = ((self.generation & !KEPT_CHUNK_BIT) >> KEPT_COUNT_SHIFT) as u32;
        let last = first.checked_add(less_one)?;
        Some(first..last.checked_add(1)?)
    }

    /// The name of the file the entry names: `seg.<generation>` or, for chunks kept in place,
    /// the first one's `chunk.<seq>` ([`SegmentRef::file_names`] names them all).
    pub fn file_name(&self) -> String {
        match self.kept_chunk() {
            Some(seq) => crate::format::names::chunk_name(seq),
            None => crate::format::names::segment_name(self.generation),
        }
    }

    /// The entry's files in words: the file's name, or for several chunks kept in place the first
    /// and last ones' names and their count (`chunk.000000 to chunk.000344 (345 chunks)`).
    pub fn describe(&self) -> String {
        match self.kept_chunks() {
            Some(seqs) if seqs.len() > 1 => format!(
                "{} to {} ({} chunks)",
                crate::format::names::chunk_name(seqs.start),
                crate::format::names::chunk_name(seqs.end - 1),
                seqs.len()
            ),
            _ => self.file_name(),
        }
    }

    /// The names of every file the entry names: its segment file, or each chunk it keeps in place.
    pub fn file_names(&self) -> Vec<String> {
        match self.kept_chunks() {
            Some(seqs) => seqs.map(crate::format::names::chunk_name).collect(),
            None => vec![self.file_name()],
        }
    }
}

/// The published state of a store: the contents of one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlState {
    /// Incremented at every publish; the valid slot with the larger one wins.
    pub generation: u64,
    /// Published length of the pack.
    pub pack_end: u64,
    /// Published length of the commit index.
    pub index_end: u64,
    /// Length of the commit index known to be durable and checked against the pack; entries
    /// between it and `index_end` are checked (and rebuilt from the pack if damaged) on open.
    pub index_synced: u64,
    /// Number of GC slices published (0: never collected).
    pub gc_generation: u64,
    /// Record offset of the oldest kept commit (0: nothing collected).
    pub keep_from: u64,
    /// Position in `commits` of its entry (16 when nothing collected).
    pub index_keep_from: u64,
    /// Sequence number of the oldest live chunk.
    pub first_chunk: u32,
    /// Sequence number of the chunk being appended.
    pub head_chunk: u32,
    /// Global start of the head chunk (checked against its header).
    pub head_start: u64,
    /// Flags: bit 0 ([`FLAG_ARCHIVE`]) = chunk files may be in the lower directory; other bits 0.
    /// Bit 1 ([`FLAG_LINEAGE`]) is not kept here: it is derived from [`ControlState::lineage`].
    pub flags: u32,
    /// The lineage of the published timeline: 0 for a store never rewound, incremented by every
    /// publish that goes back to an older state (`larch recover --apply`, a writer's open that falls
    /// back to the older slot). Offsets and index positions of one lineage mean nothing in another:
    /// a reader that sees it change must reopen (`docs/store.md`, *Readers*).
    pub lineage: u64,
    /// GC segments, by increasing range (none in this build).
    pub segments: Vec<SegmentRef>,
    /// Branch name → commit.
    pub branches: BTreeMap<String, BranchTarget>,
}

impl Default for ControlState {
    /// A state with nothing published: one chunk (0) starting at 16, nothing collected.
    fn default() -> ControlState {
        ControlState {
            generation: 0,
            pack_end: 0,
            index_end: 0,
            index_synced: 0,
            gc_generation: 0,
            keep_from: 0,
            index_keep_from: INDEX_HEADER_LEN,
            first_chunk: 0,
            head_chunk: 0,
            head_start: crate::format::codec::PACK_HEADER_LEN,
            flags: 0,
            lineage: 0,
            segments: Vec::new(),
            branches: BTreeMap::new(),
        }
    }
}

/// What a slot holds, as decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A valid state.
    Valid(ControlState),
    /// Zero bytes (never written) or absent.
    Empty,
    /// Bytes that fail the magic, length or checksum (a torn or damaged write).
    Damaged(String),
}

impl Slot {
    /// The state, when valid.
    pub fn state(&self) -> Option<&ControlState> {
        match self {
            Slot::Valid(state) => Some(state),
            _ => None,
        }
    }
}

/// The control file, decoded: both slots and the confirmed generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlFileState {
    /// Slot 0 (bytes 0..4096) and slot 1 (bytes 4096..8192).
    pub slots: [Slot; 2],
    /// The generation the writer confirmed durable (`None` when the record is absent or damaged).
    pub confirmed: Option<u64>,
}

impl ControlFileState {
    /// The index of the valid slot with the largest generation, if any.
    pub fn newest(&self) -> Option<usize> {
        let gens = self.slots.iter().map(|slot| slot.state().map(|state| state.generation));
        gens.enumerate().filter_map(|(i, g)| g.map(|g| (i, g))).max_by_key(|(_, g)| *g).map(|(i, _)| i)
    }

    /// The slot a reader in another process uses: the newest valid slot whose generation the
    /// writer has confirmed durable, else the oldest valid slot (the confirmation is absent, damaged
    /// or read while being written: the older slot was synced before the newer one was written).
    pub fn visible(&self) -> Option<usize> {
        let mut valid: Vec<(usize, u64)> =
            (0..2).filter_map(|i| self.slots.get(i)?.state().map(|state| (i, state.generation))).collect();
        valid.sort_by_key(|(_, generation)| *generation);
        let confirmed = valid.iter().rfind(|(_, generation)| Some(*generation) <= self.confirmed);
        confirmed.or(valid.first()).map(|(i, _)| *i)
    }

    /// The largest generation of any valid slot or of the confirmation.
    pub fn max_generation(&self) -> u64 {
        let slots = self.slots.iter().filter_map(|slot| slot.state().map(|state| state.generation));
        slots.chain(self.confirmed).max().unwrap_or(0)
    }

    /// The largest lineage of any valid slot (0 when none has one).
    pub fn max_lineage(&self) -> u64 {
        self.slots.iter().filter_map(|slot| slot.state().map(|state| state.lineage)).max().unwrap_or(0)
    }

    /// The state of slot `i`, if valid.
    pub fn state(&self, i: usize) -> Option<&ControlState> {
        self.slots.get(i).and_then(Slot::state)
    }

    /// The generation the confirmation record covers when no valid slot holds it or a newer one:
    /// proof that a durable published state was lost (a slot the writer synced and confirmed was
    /// damaged since), `None` otherwise. A torn write of a slot never confirmed is not such a loss:
    /// the confirmation is written only after the slot's `fdatasync` (docs/store.md).
    pub fn lost_generation(&self) -> Option<u64> {
        let confirmed = self.confirmed?;
        let newest = self.slots.iter().filter_map(|slot| slot.state().map(|state| state.generation)).max();
        newest.is_none_or(|newest| newest < confirmed).then_some(confirmed)
    }

    /// Decodes the bytes of a control file. Fails only when a slot carries the larch magic with
    /// another format version *and* its own length and checksum check out (a store of another
    /// format); a slot failing its checksum is damaged whatever its version field says.
    pub fn decode(bytes: &[u8]) -> Result<ControlFileState> {
        let page =
            |i: u64| bytes.get((i * PAGE) as usize..).map(|rest| &rest[..rest.len().min(PAGE as usize)]);
        let mut slots = [Slot::Empty, Slot::Empty];
        for (i, slot) in slots.iter_mut().enumerate() {
            let base = i as u64 * PAGE;
            *slot = decode_slot(page(i as u64).unwrap_or_default(), base)?;
        }
        let confirmed =
            bytes.get(CONFIRM_AT as usize..CONFIRM_AT as usize + CONFIRM_LEN).and_then(decode_confirm);
        Ok(ControlFileState { slots, confirmed })
    }
}

/// Whether the confirmation bytes (at most [`CONFIRM_LEN`]) are neither all zero (never written)
/// nor a valid record: damaged.
pub fn confirm_damaged(bytes: &[u8]) -> bool {
    bytes.iter().any(|byte| *byte != 0) && decode_confirm(bytes).is_none()
}

/// Whether `page` holds a record framed like a slot of any format: a length field at 12 within
/// the page and a CRC-32 of the bytes before the record's last four matching them.
fn framed(page: &[u8]) -> bool {
    let word = |at: usize| page.get(at..at + 4).and_then(|w| w.try_into().ok()).map(u32::from_le_bytes);
    let Some(total) = word(12).map(|total| total as usize) else { return false };
    if total < 20 || total > page.len() {
        return false;
    }
    let (Some(body), Some(crc)) = (page.get(..total - 4), word(total - 4)) else { return false };
    crc32fast::hash(body) == crc
}

/// The bytes of the confirmation record of `generation`.
pub fn encode_confirm(generation: u64) -> [u8; CONFIRM_LEN] {
    let mut out = [0u8; CONFIRM_LEN];
    out[..8].copy_from_slice(CONFIRM_MAGIC);
    out[8..16].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32fast::hash(&out[..16]);
    out[16..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode_confirm(bytes: &[u8]) -> Option<u64> {
    if bytes.get(..8)? != CONFIRM_MAGIC.as_slice() {
        return None;
    }
    let generation = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    let crc = u32::from_le_bytes(bytes.get(16..20)?.try_into().ok()?);
    (crc32fast::hash(bytes.get(..16)?) == crc).then_some(generation)
}

/// Decodes one slot's page: [`StoreError::UnknownVersion`] only for a record whose framing (length
/// and checksum) is intact and whose version this build does not read.
fn decode_slot(page: &[u8], base: u64) -> Result<Slot> {
    if page.iter().all(|byte| *byte == 0) {
        return Ok(Slot::Empty);
    }
    let version = page.get(8..12).and_then(|v| v.try_into().ok()).map(u32::from_le_bytes);
    if let Some(found) = version
        && page.get(..8) == Some(CONTROL_MAGIC.as_slice())
        && found != SLOT_VERSION
        && found != SLOT_VERSION_2
        && found != SLOT_VERSION_KEPT_RUN
        && framed(page)
    {
        return Err(StoreError::UnknownVersion {
            file: FileKind::Control,
            found,
            supported: SLOT_VERSION_KEPT_RUN,
        });
    }
    match ControlState::decode(page, base) {
        Ok(state) => Ok(Slot::Valid(state)),
        Err(e) => Ok(Slot::Damaged(e.to_string())),
    }
}

impl ControlState {
    /// Whether an entry of the segment list keeps more than one chunk in place (the slot is then
    /// written as [`SLOT_VERSION_KEPT_RUN`]).
    pub fn keeps_a_run(&self) -> bool {
        self.segments.iter().any(|segment| segment.kept_chunks().is_some_and(|seqs| seqs.len() > 1))
    }

    /// The slot bytes of this state (at most [`PAGE`]; the rest of the page stays zero). Fails with
    /// [`StoreError::TooLarge`] when the branches do not fit in a page.
    pub fn encode(&self) -> Result<Vec<u8>> {
        if self.segments.len() > MAX_SEGMENTS {
            return Err(StoreError::TooLarge(format!("{} segments in a control slot", self.segments.len())));
        }
        let mut out = Vec::with_capacity(FIXED_LEN_3 + 4 + self.branches.len() * 64);
        out.extend_from_slice(CONTROL_MAGIC);
        let version = match self.keeps_a_run() {
            true => SLOT_VERSION_KEPT_RUN,
            false => SLOT_VERSION,
        };
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&[0; 4]); // length, patched below
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.pack_end.to_le_bytes());
        out.extend_from_slice(&self.index_end.to_le_bytes());
        out.extend_from_slice(&self.index_synced.to_le_bytes());
        out.extend_from_slice(&self.gc_generation.to_le_bytes());
        out.extend_from_slice(&self.keep_from.to_le_bytes());
        out.extend_from_slice(&self.index_keep_from.to_le_bytes());
        out.extend_from_slice(&self.first_chunk.to_le_bytes());
        out.extend_from_slice(&self.head_chunk.to_le_bytes());
        out.extend_from_slice(&self.head_start.to_le_bytes());
        let lineage_flag = if self.lineage == 0 { 0 } else { FLAG_LINEAGE };
        out.extend_from_slice(&((self.flags & !FLAG_LINEAGE) | lineage_flag).to_le_bytes());
        out.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        for segment in &self.segments {
            out.extend_from_slice(&segment.generation.to_le_bytes());
            out.extend_from_slice(&segment.range_start.to_le_bytes());
            out.extend_from_slice(&segment.range_end.to_le_bytes());
            out.extend_from_slice(&segment.file_len.to_le_bytes());
            out.extend_from_slice(&segment.footer_crc.to_le_bytes());
        }
        out.extend_from_slice(&(self.branches.len() as u32).to_le_bytes());
        for (name, (hash, offset)) in &self.branches {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(hash.as_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        if self.lineage != 0 {
            out.extend_from_slice(&self.lineage.to_le_bytes());
        }
        if out.len() + 4 > PAGE as usize {
            return Err(StoreError::TooLarge(format!(
                "{} branches need {} bytes, more than a control slot's {PAGE}",
                self.branches.len(),
                out.len() + 4
            )));
        }
        let total = (out.len() + 4) as u32;
        if let Some(slot) = out.get_mut(12..16) {
            slot.copy_from_slice(&total.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(out)
    }

    /// Decodes a slot's page (`base`: its offset in the file, for error messages). The version is
    /// checked after the length and checksum: a slot failing those is damaged, whatever its version
    /// field says.
    pub fn decode(page: &[u8], base: u64) -> Result<ControlState> {
        let corrupt = |offset: usize, reason: &str| {
            StoreError::corrupt(FileKind::Control, base + offset as u64, reason)
        };
        if page.get(..8) != Some(CONTROL_MAGIC.as_slice()) {
            return Err(corrupt(0, "bad magic"));
        }
        let u32_at = |at: usize| -> Result<u32> {
            let field = page.get(at..at + 4).ok_or_else(|| corrupt(at, "truncated"))?;
            Ok(u32::from_le_bytes(field.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        let u64_at = |at: usize| -> Result<u64> {
            let field = page.get(at..at + 8).ok_or_else(|| corrupt(at, "truncated"))?;
            Ok(u64::from_le_bytes(field.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        let total = u32_at(12)? as usize;
        if total > page.len() || total < MIN_SLOT_LEN {
            return Err(corrupt(12, &format!("length field {total}, page has {} bytes", page.len())));
        }
        let body = page.get(..total - 4).ok_or_else(|| corrupt(0, "truncated"))?;
        if crc32fast::hash(body) != u32_at(total - 4)? {
            return Err(corrupt(total - 4, "checksum mismatch"));
        }
        let version = u32_at(8)?;
        if version != SLOT_VERSION && version != SLOT_VERSION_2 && version != SLOT_VERSION_KEPT_RUN {
            return Err(StoreError::UnknownVersion {
                file: FileKind::Control,
                found: version,
                supported: SLOT_VERSION_KEPT_RUN,
            });
        }
        if page.get(total..).is_some_and(|rest| rest.iter().any(|byte| *byte != 0)) {
            return Err(corrupt(total, "bytes after the slot record are not zero"));
        }
        let mut state = ControlState {
            generation: u64_at(16)?,
            pack_end: u64_at(24)?,
            index_end: u64_at(32)?,
            index_synced: u64_at(40)?,
            ..ControlState::default()
        };
        if state.index_synced > state.index_end {
            return Err(corrupt(40, "synced index length past the published one"));
        }
        let mut at = FIXED_LEN_2;
        if version == SLOT_VERSION || version == SLOT_VERSION_KEPT_RUN {
            state.decode_layout(body, base)?;
            at = FIXED_LEN_3 + state.segments.len() * SEGMENT_LEN;
            if state.keeps_a_run() != (version == SLOT_VERSION_KEPT_RUN) {
                return Err(corrupt(
                    8,
                    &format!("slot version {version} with chunks kept in place that it does not fit"),
                ));
            }
        }
        let count = u32_at(at)?;
        at += 4;
        for _ in 0..count {
            let len_bytes = body.get(at..at + 2).ok_or_else(|| corrupt(at, "truncated branch"))?;
            let len = match len_bytes {
                [low, high] => usize::from(u16::from_le_bytes([*low, *high])),
                _ => return Err(corrupt(at, "truncated branch")),
            };
            if !(1..=255).contains(&len) {
                return Err(corrupt(at, &format!("a branch name of {len} bytes (1 to 255)")));
            }
            let name = body.get(at + 2..at + 2 + len).ok_or_else(|| corrupt(at, "truncated branch"))?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt(at, "branch name not UTF-8"))?;
            if state.branches.last_key_value().is_some_and(|(last, _)| *last >= name) {
                return Err(corrupt(at, "branches not sorted by name, or one twice"));
            }
            let hash_at = at + 2 + len;
            let hash = body.get(hash_at..hash_at + 32).ok_or_else(|| corrupt(hash_at, "truncated branch"))?;
            let hash = Hash::from_slice(hash).map_err(|_| corrupt(hash_at, "bad hash"))?;
            let offset = u64_at(hash_at + 32)?;
            state.branches.insert(name, (hash, offset));
            at = hash_at + 40;
        }
        if state.flags & FLAG_LINEAGE != 0 {
            state.flags &= !FLAG_LINEAGE;
            state.lineage = u64_at(at)?;
            if state.lineage == 0 {
                return Err(corrupt(at, "lineage flag with a lineage of 0"));
            }
            at += 8;
        }
        if at != body.len() {
            return Err(corrupt(at, "trailing bytes"));
        }
        Ok(state)
    }
}

impl ControlState {
    /// Decodes and validates the layout-3 fields (bytes 48 to the end of the segment list).
    fn decode_layout(&mut self, body: &[u8], base: u64) -> Result<()> {
        let corrupt = |offset: usize, reason: &str| {
            StoreError::corrupt(FileKind::Control, base + offset as u64, reason)
        };
        let bytes = |at: usize, len: usize| body.get(at..at + len).ok_or_else(|| corrupt(at, "truncated"));
        let u64_at = |at: usize| -> Result<u64> {
            Ok(u64::from_le_bytes(bytes(at, 8)?.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        let u32_at = |at: usize| -> Result<u32> {
            Ok(u32::from_le_bytes(bytes(at, 4)?.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        self.gc_generation = u64_at(48)?;
        self.keep_from = u64_at(56)?;
        self.index_keep_from = u64_at(64)?;
        self.first_chunk = u32_at(72)?;
        self.head_chunk = u32_at(76)?;
        self.head_start = u64_at(80)?;
        self.flags = u32_at(88)?;
        let count = u32_at(92)? as usize;
        if count > MAX_SEGMENTS {
            return Err(corrupt(92, &format!("{count} segments (at most {MAX_SEGMENTS})")));
        }
        for i in 0..count {
            let at = FIXED_LEN_3 + i * SEGMENT_LEN;
            self.segments.push(SegmentRef {
                generation: u64_at(at)?,
                range_start: u64_at(at + 8)?,
                range_end: u64_at(at + 16)?,
                file_len: u64_at(at + 24)?,
                footer_crc: u32_at(at + 32)?,
            });
        }
        let pack_start = crate::format::codec::PACK_HEADER_LEN;
        if self.flags & !(FLAG_ARCHIVE | FLAG_LINEAGE) != 0 {
            return Err(corrupt(88, &format!("unknown flags {:#x}", self.flags)));
        }
        if self.first_chunk > self.head_chunk {
            return Err(corrupt(72, "first chunk after the head chunk"));
        }
        if self.head_start < pack_start || self.head_start > self.pack_end {
            return Err(corrupt(80, "head chunk start outside the pack"));
        }
        if self.gc_generation == 0 && (self.keep_from != 0 || !self.segments.is_empty()) {
            return Err(corrupt(56, "collected space in a store never collected"));
        }
        if self.keep_from > self.pack_end {
            return Err(corrupt(56, "oldest kept commit past the pack's end"));
        }
        let entry = ENTRY_LEN as u64;
        if self.index_keep_from < INDEX_HEADER_LEN
            || self.index_keep_from > self.index_end
            || !(self.index_keep_from - INDEX_HEADER_LEN).is_multiple_of(entry)
            || (self.keep_from == 0) != (self.index_keep_from == INDEX_HEADER_LEN)
        {
            return Err(corrupt(64, "index position of the oldest kept commit out of range"));
        }
        let mut previous_end = pack_start;
        for (i, segment) in self.segments.iter().enumerate() {
            let at = FIXED_LEN_3 + i * SEGMENT_LEN;
            if segment.range_start < previous_end
                || segment.range_end <= segment.range_start
                || segment.range_end > self.head_start
            {
                return Err(corrupt(at, "segment ranges not increasing and disjoint below the head chunk"));
            }
            let kept_chunk_ok = segment.kept_chunks().is_some_and(|seqs| seqs.end <= self.first_chunk);
            if segment.generation & KEPT_CHUNK_BIT != 0 && (!kept_chunk_ok || segment.footer_crc != 0) {
                return Err(corrupt(at, "a chunk kept in place with a bad number or footer CRC"));
            }
            previous_end = segment.range_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
