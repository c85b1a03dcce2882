//! The control file, the commit switch (docs/format.md §2): two checksummed slots written in place,
//! each on its own 4 KiB page, and a confirmation record on a third page. The newest valid slot is
//! the published state; a torn write can only damage the slot being written, never the other one.

use crate::codec::FORMAT_VERSION;
use crate::error::{FileKind, Result, StoreError};
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
const FIXED_LEN: usize = 52;

/// Where a branch points: the commit hash and its record offset.
pub type BranchTarget = (Hash, u64);

/// The published state of a store: the contents of one slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Branch name → commit.
    pub branches: BTreeMap<String, BranchTarget>,
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

    /// The state of slot `i`, if valid.
    pub fn state(&self, i: usize) -> Option<&ControlState> {
        self.slots.get(i).and_then(Slot::state)
    }

    /// Decodes the bytes of a control file. Fails only when a slot carries the larch magic with
    /// another format version (checked before anything else of the layout).
    pub fn decode(bytes: &[u8]) -> Result<ControlFileState> {
        for at in [0, PAGE as usize] {
            if bytes.get(at..at + 8) == Some(CONTROL_MAGIC.as_slice())
                && let Some(version) = bytes.get(at + 8..at + 12).and_then(|v| v.try_into().ok())
            {
                let version = u32::from_le_bytes(version);
                if version != FORMAT_VERSION {
                    return Err(StoreError::UnknownVersion {
                        file: FileKind::Control,
                        found: version,
                        supported: FORMAT_VERSION,
                    });
                }
            }
        }
        let page =
            |i: u64| bytes.get((i * PAGE) as usize..).map(|rest| &rest[..rest.len().min(PAGE as usize)]);
        let slots =
            [decode_slot(page(0).unwrap_or_default(), 0), decode_slot(page(1).unwrap_or_default(), PAGE)];
        let confirmed =
            bytes.get(CONFIRM_AT as usize..CONFIRM_AT as usize + CONFIRM_LEN).and_then(decode_confirm);
        Ok(ControlFileState { slots, confirmed })
    }
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

fn decode_slot(page: &[u8], base: u64) -> Slot {
    if page.iter().all(|byte| *byte == 0) {
        return Slot::Empty;
    }
    match ControlState::decode(page, base) {
        Ok(state) => Slot::Valid(state),
        Err(e) => Slot::Damaged(e.to_string()),
    }
}

impl ControlState {
    /// The slot bytes of this state (at most [`PAGE`]; the rest of the page stays zero). Fails with
    /// [`StoreError::TooLarge`] when the branches do not fit in a page.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(FIXED_LEN + 4 + self.branches.len() * 64);
        out.extend_from_slice(CONTROL_MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&[0; 4]); // length, patched below
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.pack_end.to_le_bytes());
        out.extend_from_slice(&self.index_end.to_le_bytes());
        out.extend_from_slice(&self.index_synced.to_le_bytes());
        out.extend_from_slice(&(self.branches.len() as u32).to_le_bytes());
        for (name, (hash, offset)) in &self.branches {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(hash.as_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
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

    /// Decodes a slot's page (`base`: its offset in the file, for error messages). The version must
    /// have been checked by the caller.
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
        if total > page.len() || total < FIXED_LEN + 4 {
            return Err(corrupt(12, &format!("length field {total}, page has {} bytes", page.len())));
        }
        let body = page.get(..total - 4).ok_or_else(|| corrupt(0, "truncated"))?;
        if crc32fast::hash(body) != u32_at(total - 4)? {
            return Err(corrupt(total - 4, "checksum mismatch"));
        }
        if page.get(total..).is_some_and(|rest| rest.iter().any(|byte| *byte != 0)) {
            return Err(corrupt(total, "bytes after the slot record are not zero"));
        }
        let version = u32_at(8)?;
        if version != FORMAT_VERSION {
            return Err(StoreError::UnknownVersion {
                file: FileKind::Control,
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let mut state = ControlState {
            generation: u64_at(16)?,
            pack_end: u64_at(24)?,
            index_end: u64_at(32)?,
            index_synced: u64_at(40)?,
            branches: BTreeMap::new(),
        };
        if state.index_synced > state.index_end {
            return Err(corrupt(40, "synced index length past the published one"));
        }
        let count = u32_at(48)?;
        let mut at = FIXED_LEN;
        for _ in 0..count {
            let len_bytes = body.get(at..at + 2).ok_or_else(|| corrupt(at, "truncated branch"))?;
            let len = match len_bytes {
                [low, high] => usize::from(u16::from_le_bytes([*low, *high])),
                _ => return Err(corrupt(at, "truncated branch")),
            };
            let name = body.get(at + 2..at + 2 + len).ok_or_else(|| corrupt(at, "truncated branch"))?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt(at, "branch name not UTF-8"))?;
            let hash_at = at + 2 + len;
            let hash = body.get(hash_at..hash_at + 32).ok_or_else(|| corrupt(hash_at, "truncated branch"))?;
            let hash = Hash::from_slice(hash).map_err(|_| corrupt(hash_at, "bad hash"))?;
            let offset = u64_at(hash_at + 32)?;
            state.branches.insert(name, (hash, offset));
            at = hash_at + 40;
        }
        if at != body.len() {
            return Err(corrupt(at, "trailing bytes"));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ControlState {
        let mut state = ControlState {
            generation: 7,
            pack_end: 1234,
            index_end: 60,
            index_synced: 16,
            ..Default::default()
        };
        state.branches.insert("main".into(), (Hash([3; 32]), 99));
        state
    }

    #[test]
    fn round_trip_and_every_bit_flip_is_detected() {
        let state = state();
        let bytes = state.encode().unwrap();
        assert_eq!(ControlState::decode(&bytes, 0).unwrap(), state);
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(ControlState::decode(&flipped, 0).is_err(), "bit {bit} undetected");
        }
        assert!(ControlState::decode(&bytes[..bytes.len() - 1], 0).is_err());
    }

    #[test]
    fn the_newest_valid_slot_wins_and_readers_wait_for_the_confirmation() {
        let mut older = state();
        older.generation = 6;
        let newer = state();
        let mut file = vec![0u8; CONTROL_LEN as usize];
        file[..older.encode().unwrap().len()].copy_from_slice(&older.encode().unwrap());
        let at = PAGE as usize;
        file[at..at + newer.encode().unwrap().len()].copy_from_slice(&newer.encode().unwrap());
        file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(6));
        let decoded = ControlFileState::decode(&file).unwrap();
        assert_eq!(decoded.newest(), Some(1));
        assert_eq!(decoded.visible(), Some(0), "not yet confirmed");
        file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(7));
        assert_eq!(ControlFileState::decode(&file).unwrap().visible(), Some(1));
        // A torn newer slot: the older one is used.
        file[at + 20] ^= 0xff;
        let decoded = ControlFileState::decode(&file).unwrap();
        assert!(matches!(decoded.slots[1], Slot::Damaged(_)));
        assert_eq!((decoded.newest(), decoded.visible()), (Some(0), Some(0)));
        // Another version is refused before anything else is looked at.
        file[at + 8] = 9;
        assert!(matches!(
            ControlFileState::decode(&file),
            Err(StoreError::UnknownVersion { file: FileKind::Control, found: 9, .. })
        ));
    }

    /// Golden bytes of a slot and of a confirmation (docs/format.md §2; checksums computed
    /// independently with Python's `zlib.crc32`). A change here is a format change.
    #[test]
    fn golden_bytes_of_a_slot_and_a_confirmation() {
        let mut state = ControlState {
            generation: 5,
            pack_end: 0x1234,
            index_end: 104,
            index_synced: 60,
            ..Default::default()
        };
        state.branches.insert("main".into(), (Hash([0xab; 32]), 0x1000));
        let expected = concat!(
            "4c4152434843544c", // magic LARCHCTL
            "02000000",         // version 2
            "66000000",         // length 102
            "0500000000000000", // generation 5
            "3412000000000000", // pack_end 0x1234
            "6800000000000000", // index_end 104
            "3c00000000000000", // index_synced 60
            "01000000",         // one branch
            "0400",             // name length 4
            "6d61696e",         // "main"
            "abababababababababababababababababababababababababababababababab",
            "0010000000000000", // commit record at 0x1000
            "562b73fa",         // crc32 of the 98 bytes before
        );
        let encoded = state.encode().unwrap();
        assert_eq!(hex_of(&encoded), expected);
        assert_eq!(hex_of(&encode_confirm(5)), "4c41524348434e460500000000000000bdc11bcc");
        // In a file: slot 1 holds it; slot 0 is empty; the confirmation is at 8192.
        let mut file = vec![0u8; CONTROL_LEN as usize];
        file[PAGE as usize..PAGE as usize + encoded.len()].copy_from_slice(&encoded);
        file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(5));
        let decoded = ControlFileState::decode(&file).unwrap();
        assert_eq!(decoded.slots, [Slot::Empty, Slot::Valid(state)]);
        assert_eq!((decoded.newest(), decoded.visible(), decoded.confirmed), (Some(1), Some(1), Some(5)));
    }

    fn hex_of(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// Structured mutations of a valid control file (bit flips, byte runs, truncations, lengths
    /// and counts set to extremes): decoding never panics, and a slot that still decodes as valid
    /// is one of the two written states (a mutation never forges a third state with a valid CRC, at
    /// this number of tries).
    #[test]
    fn mutated_control_files_never_panic_nor_forge_a_state() {
        use rand::Rng;
        let (mut rng, _) = larch_testkit::seeded_rng("mutated_control_files", 9);
        let newer = state();
        let mut older = state();
        older.generation = 6;
        older.branches.insert("side".into(), (Hash([4; 32]), 50));
        let mut file = vec![0u8; CONTROL_LEN as usize];
        let (a, b) = (older.encode().unwrap(), newer.encode().unwrap());
        file[..a.len()].copy_from_slice(&a);
        file[PAGE as usize..PAGE as usize + b.len()].copy_from_slice(&b);
        file[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(7));
        for _ in 0..20_000 {
            let mut bytes = file.clone();
            for _ in 0..rng.random_range(1..4) {
                let base = if rng.random_bool(0.5) { 0 } else { PAGE as usize };
                let at = base + rng.random_range(0..160);
                match rng.random_range(0..4) {
                    0 => bytes[at] ^= 1 << rng.random_range(0..8),
                    1 => bytes[at] = rng.random(),
                    2 => bytes[base + 12..base + 16].copy_from_slice(&rng.random::<u32>().to_le_bytes()),
                    _ => bytes[base + 48..base + 52].copy_from_slice(&u32::MAX.to_le_bytes()),
                }
            }
            if rng.random_bool(0.1) {
                bytes.truncate(rng.random_range(0..bytes.len()));
            }
            if let Ok(decoded) = ControlFileState::decode(&bytes) {
                for slot in &decoded.slots {
                    if let Slot::Valid(found) = slot {
                        assert!(found == &older || found == &newer, "forged {found:?}");
                    }
                }
            }
        }
    }
}
