//! The published state a reader of a control file stands on, as a value (which files and which
//! lengths it needs) and as a control file of its own holding only that state. Read replicas
//! (`larch-remote`, `docs/object-storage.md` *Read replicas*) publish it: a replica's reader
//! opened on that image stands exactly on the state whose files were published, whatever the
//! writer's other slot holds.

use crate::error::Result;
use crate::format::control::{CONFIRM_AT, CONTROL_LEN, ControlFileState, encode_confirm};
use crate::format::names::chunk_name;
use larch_core::Hash;

/// The branch whose commit is the head (`Repo::head`'s, `DEFAULT_BRANCH`).
const MAIN_BRANCH: &str = "main";

/// A store's published state as a reader in another process sees it (the newest slot the
/// writer confirmed durable, else the oldest valid one: `docs/format.md` §2).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishedState {
    /// The slot's generation.
    pub generation: u64,
    /// Its lineage (changes when the timeline went back to an older state).
    pub lineage: u64,
    /// The published end of the pack (a global offset).
    pub pack_end: u64,
    /// The published length of `commits`.
    pub index_end: u64,
    /// The oldest live chunk.
    pub first_chunk: u32,
    /// The chunk being appended.
    pub head_chunk: u32,
    /// The head chunk's global start: its file holds `32 + pack_end − head_start` published bytes.
    pub head_start: u64,
    /// The GC segment files and chunks kept in place the state names, with their lengths as the
    /// slot gives them: `None` for a chunk kept in place before the last of its entry (the slot
    /// names only the last one's length; a kept chunk's file never changes, so its length on disk
    /// is the one).
    pub segments: Vec<(String, Option<u64>)>,
    /// The commit of branch `main`, if set.
    pub head: Option<Hash>,
    /// A control file (8,212 bytes) whose slot 0 is this state, slot 1 empty, and whose
    /// confirmation covers it: a reader opened on it stands on this state.
    pub image: Vec<u8>,
}

impl PublishedState {
    /// The names of the chunk files the state names, oldest first (`first_chunk..=head_chunk`).
    pub fn chunk_names(&self) -> Vec<String> {
        (self.first_chunk..=self.head_chunk).map(chunk_name).collect()
    }

    /// The published length of the head chunk's file (its 32-byte header and its records).
    pub fn head_chunk_len(&self) -> u64 {
        crate::format::names::CHUNK_HEADER_LEN + self.pack_end.saturating_sub(self.head_start)
    }
}

/// The state a reader of the control file `bytes` stands on; `None` when no slot is valid (a
/// write in progress tore it, or the store has none).
pub fn published_state(bytes: &[u8]) -> Result<Option<PublishedState>> {
    let control = ControlFileState::decode(bytes)?;
    let Some(state) = control.visible().and_then(|slot| control.state(slot)).cloned() else {
        return Ok(None);
    };
    let encoded = state.encode()?;
    let mut image = vec![0u8; CONTROL_LEN as usize];
    if let Some(slot) = image.get_mut(..encoded.len()) {
        slot.copy_from_slice(&encoded);
    }
    if let Some(confirm) = image.get_mut(CONFIRM_AT as usize..) {
        confirm.copy_from_slice(&encode_confirm(state.generation));
    }
    Ok(Some(PublishedState {
        generation: state.generation,
        lineage: state.lineage,
        pack_end: state.pack_end,
        index_end: state.index_end,
        first_chunk: state.first_chunk,
        head_chunk: state.head_chunk,
        head_start: state.head_start,
        segments: state
            .segments
            .iter()
            .flat_map(|entry| {
                let names = entry.file_names();
                let last = names.len().saturating_sub(1);
                names
                    .into_iter()
                    .enumerate()
                    .map(move |(i, name)| (name, (i == last).then_some(entry.file_len)))
            })
            .collect(),
        head: state.branches.get(MAIN_BRANCH).map(|(hash, _)| *hash),
        image,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::control::{ControlState, PAGE};

    fn state(generation: u64, pack_end: u64) -> ControlState {
        let mut state = ControlState {
            generation,
            pack_end,
            index_end: 104,
            index_synced: 60,
            head_chunk: 2,
            head_start: 0x1000,
            ..Default::default()
        };
        state.branches.insert("main".into(), (Hash([generation as u8; 32]), 0x1000));
        state
    }

    #[test]
    fn the_image_holds_the_slot_a_reader_stands_on_and_only_it() -> Result<()> {
        // Slot 0: generation 5, confirmed; slot 1: generation 6, written, not yet confirmed.
        let mut bytes = vec![0u8; CONTROL_LEN as usize];
        let (old, new) = (state(5, 0x1234).encode()?, state(6, 0x2000).encode()?);
        bytes[..old.len()].copy_from_slice(&old);
        bytes[PAGE as usize..PAGE as usize + new.len()].copy_from_slice(&new);
        bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(5));
        let published = published_state(&bytes)?.ok_or(crate::StoreError::Corrupt {
            file: crate::FileKind::Control,
            offset: 0,
            reason: "no state".into(),
        })?;
        assert_eq!(
            (published.generation, published.pack_end, published.head),
            (5, 0x1234, Some(Hash([5; 32])))
        );
        assert_eq!(published.chunk_names(), ["chunk.000000", "chunk.000001", "chunk.000002"]);
        assert_eq!(published.head_chunk_len(), 32 + 0x234);
        // The image: one slot, confirmed; the newest and the visible slot are that state.
        let image = ControlFileState::decode(&published.image)?;
        assert_eq!((image.newest(), image.visible(), image.confirmed), (Some(0), Some(0), Some(5)));
        assert_eq!(image.state(0), Some(&state(5, 0x1234)));
        assert_eq!(image.state(1), None);
        // Once confirmed, the newer slot is the one published.
        bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(6));
        assert_eq!(published_state(&bytes)?.map(|p| p.generation), Some(6));
        // Chunks kept in place under one entry: each named, the last with the slot's length.
        let mut collected = state(7, 0x2000);
        collected.gc_generation = 1;
        collected.keep_from = 0x1100;
        collected.index_keep_from = 60;
        collected.first_chunk = 3;
        collected.head_chunk = 4;
        collected.segments = vec![
            crate::format::control::SegmentRef::kept_chunks_entry(0, 3, 16, 0x1000, 99)
                .ok_or(crate::StoreError::TooLarge("no entry".into()))?,
        ];
        let mut bytes = vec![0u8; CONTROL_LEN as usize];
        let encoded = collected.encode()?;
        bytes[..encoded.len()].copy_from_slice(&encoded);
        bytes[CONFIRM_AT as usize..].copy_from_slice(&encode_confirm(7));
        let published = published_state(&bytes)?.map(|p| p.segments);
        let expected = [("chunk.000000", None), ("chunk.000001", None), ("chunk.000002", Some(99))]
            .map(|(name, len)| (name.to_string(), len));
        assert_eq!(published, Some(expected.to_vec()));
        // A control file with no valid slot publishes nothing.
        assert_eq!(published_state(&[0u8; CONTROL_LEN as usize])?, None);
        Ok(())
    }
}
