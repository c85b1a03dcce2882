//! The tables an [`Encoder`](super::Encoder) fills, kept from one commit to the next.

use larch_core::Node;
use std::collections::HashMap;
use std::sync::Arc;

/// A hasher for pointer-identity keys (addresses: already well spread, no need for SipHash).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
    fn write_u64(&mut self, value: u64) {
        // Multiply, then fold the high half (which depends on every bit) into the low bits that
        // pick the bucket: addresses and offsets often share their low bits.
        let product = value.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = product ^ (product >> 32);
    }
}

type AddressMap = HashMap<usize, u64, std::hash::BuildHasherDefault<AddressHasher>>;

/// The tables an [`Encoder`] fills, kept by the writer from one commit to the next (cleared): a
/// commit then fills tables already grown instead of growing new ones (each doubling rehashes
/// and, past a few hundred KiB, faults fresh pages in; a large burst's commit spent a quarter of
/// its time there).
pub(crate) struct EncoderTables {
    /// Nodes being written, by address: their offsets.
    pub(super) pending_nodes: AddressMap,
    /// Contents being written, by address: their offsets.
    pub(super) pending_contents: AddressMap,
    /// Nodes written, or found equal to a stored version, with their offsets and the chain
    /// lengths of those records (if known): marked stored once the commit is published.
    pub marks: Vec<(Arc<Node>, u64, Option<u8>)>,
}

impl std::fmt::Debug for EncoderTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncoderTables")
            .field("node_capacity", &self.pending_nodes.capacity())
            .field("contents_capacity", &self.pending_contents.capacity())
            .finish_non_exhaustive()
    }
}

/// Tables that grew past this many entries (a setup block's commit) are not kept.
const KEEP_TABLE_ENTRIES: usize = 1 << 16;

/// Nodes the tables are made for before a commit needs them: a Tezos cycle's end writes ~17,000
/// (16,000 accounts and the leaves above them), and growing the tables to that size in its commit
/// rehashed them and faulted fresh pages in: ~15 ms of a first large burst's commit, which the
/// pipelined commits behind it wait for. About 1.8 MiB, touched as it fills.
pub(crate) const RESERVED_NODES: usize = 1 << 15;

impl EncoderTables {
    /// Empty tables with room for [`RESERVED_NODES`] nodes.
    pub fn new() -> EncoderTables {
        EncoderTables {
            pending_nodes: AddressMap::with_capacity_and_hasher(RESERVED_NODES, Default::default()),
            pending_contents: AddressMap::default(),
            marks: Vec::with_capacity(RESERVED_NODES),
        }
    }

    /// The number of nodes the tables hold without growing.
    #[cfg(test)]
    pub fn node_capacity(&self) -> usize {
        self.pending_nodes.capacity().min(self.marks.capacity())
    }

    /// The tables emptied for the next commit, if they are not too large to keep.
    pub fn recycled(mut self) -> Option<EncoderTables> {
        let largest =
            self.pending_nodes.capacity().max(self.pending_contents.capacity()).max(self.marks.capacity());
        if largest > KEEP_TABLE_ENTRIES {
            return None;
        }
        self.pending_nodes.clear();
        self.pending_contents.clear();
        self.marks.clear();
        Some(self)
    }
}
