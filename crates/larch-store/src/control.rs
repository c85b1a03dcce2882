//! The control file (docs/format.md §2): the published state, one checksummed record.

use crate::codec::FORMAT_VERSION;
use crate::error::{FileKind, Result, StoreError};
use larch_core::Hash;
use std::collections::BTreeMap;

/// Magic of the control file.
pub const CONTROL_MAGIC: &[u8; 8] = b"LARCHCTL";
const FIXED_LEN: usize = 44;

/// Where a branch points: the commit hash and its record offset.
pub type BranchTarget = (Hash, u64);

/// The published state of a store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlState {
    /// Incremented at every publish.
    pub generation: u64,
    /// Published length of the pack.
    pub pack_end: u64,
    /// Published length of the commit index.
    pub index_end: u64,
    /// Branch name → commit.
    pub branches: BTreeMap<String, BranchTarget>,
}

impl ControlState {
    /// The file bytes of this state.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_LEN + 4 + self.branches.len() * 64);
        out.extend_from_slice(CONTROL_MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&[0; 4]); // length, patched below
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.pack_end.to_le_bytes());
        out.extend_from_slice(&self.index_end.to_le_bytes());
        out.extend_from_slice(&(self.branches.len() as u32).to_le_bytes());
        for (name, (hash, offset)) in &self.branches {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(hash.as_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        let total = (out.len() + 4) as u32;
        if let Some(slot) = out.get_mut(12..16) {
            slot.copy_from_slice(&total.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes the control file bytes. `Ok(None)` when the magic is absent (not a store).
    pub fn decode(bytes: &[u8]) -> Result<Option<ControlState>> {
        let corrupt =
            |offset: usize, reason: &str| StoreError::corrupt(FileKind::Control, offset as u64, reason);
        if bytes.get(..8) != Some(CONTROL_MAGIC.as_slice()) {
            return Ok(None);
        }
        let u32_at = |at: usize| -> Result<u32> {
            let field = bytes.get(at..at + 4).ok_or_else(|| corrupt(at, "truncated"))?;
            Ok(u32::from_le_bytes(field.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        let u64_at = |at: usize| -> Result<u64> {
            let field = bytes.get(at..at + 8).ok_or_else(|| corrupt(at, "truncated"))?;
            Ok(u64::from_le_bytes(field.try_into().map_err(|_| corrupt(at, "truncated"))?))
        };
        let total = u32_at(12)? as usize;
        if total != bytes.len() || total < FIXED_LEN + 4 {
            return Err(corrupt(12, &format!("length field {total}, file has {} bytes", bytes.len())));
        }
        let body = bytes.get(..total - 4).ok_or_else(|| corrupt(0, "truncated"))?;
        if crc32fast::hash(body) != u32_at(total - 4)? {
            return Err(corrupt(total - 4, "checksum mismatch"));
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
            branches: BTreeMap::new(),
        };
        let count = u32_at(40)?;
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
        Ok(Some(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_bit_flip_is_detected() {
        let mut state = ControlState { generation: 7, pack_end: 1234, index_end: 60, ..Default::default() };
        state.branches.insert("main".into(), (Hash([3; 32]), 99));
        let bytes = state.encode();
        assert_eq!(ControlState::decode(&bytes).unwrap(), Some(state));
        for bit in 64..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(ControlState::decode(&flipped).is_err(), "bit {bit} undetected");
        }
        assert!(ControlState::decode(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(ControlState::decode(b"hello").unwrap(), None);
    }
}
