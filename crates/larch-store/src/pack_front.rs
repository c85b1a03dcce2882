//! A small per-thread front of the decoded-node cache: the nodes a thread looked up last, in a
//! direct-mapped table indexed by offset. A hit costs one slot read and a reference count, where
//! the shared cache costs a hash, a shard lock and two or three memory accesses far apart (a
//! third of a microsecond per lookup on the default trace, for ~8 million lookups).
//!
//! Records never change at an offset (the pack is append-only, and a garbage collection keeps
//! the offsets of what it keeps), so a slot is never stale; it holds its node alive until it is
//! overwritten (at most [`SLOTS`] nodes per thread and store, beyond the shared cache's budget).

use larch_core::{Node, StoreId};
use std::cell::RefCell;
use std::sync::Arc;

/// Slots per thread: a power of two.
const SLOTS: usize = 1 << 14;

struct Slot {
    store: StoreId,
    offset: u64,
    node: Arc<Node>,
    chain: u8,
    hash_prefix: u64,
}

thread_local! {
    static FRONT: RefCell<Vec<Option<Slot>>> = const { RefCell::new(Vec::new()) };
}

fn index(offset: u64) -> usize {
    // Fibonacci hashing: offsets of neighbouring records spread over the table.
    (offset.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// The node cached for `store` at `offset` on this thread: a [`CacheItem`](crate::pack) built
/// from the slot (the node, its patch chain length, its hash prefix).
pub(crate) fn get(store: StoreId, offset: u64) -> Option<super::pack::CacheItem> {
    FRONT
        .try_with(|front| {
            let front = front.try_borrow().ok()?;
            let slot = front.get(index(offset))?.as_ref()?;
            (slot.store == store && slot.offset == offset)
                .then(|| super::pack::CacheItem::node(slot.node.clone(), slot.chain, slot.hash_prefix))
        })
        .ok()
        .flatten()
}

/// Remembers `node` as the node of `store` at `offset` on this thread.
pub(crate) fn put(store: StoreId, offset: u64, node: &Arc<Node>, chain: u8, hash_prefix: u64) {
    let _ = FRONT.try_with(|front| {
        if let Ok(mut front) = front.try_borrow_mut() {
            if front.is_empty() {
                front.resize_with(SLOTS, || None);
            }
            if let Some(slot) = front.get_mut(index(offset)) {
                // The node it replaces is dropped after the borrow (its drop may recurse).
                let old = slot.replace(Slot { store, offset, node: node.clone(), chain, hash_prefix });
                drop(front);
                drop(old);
            }
        }
    });
}
