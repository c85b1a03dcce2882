//! Where an object lives: the identity of the store that holds it and its position there.

use std::fmt;

/// The identity of one object store instance (a [`MemorySource`](crate::MemorySource), an open
/// disk store) within this process. A position ([`ObjectKey`]) is meaningful only to the store
/// that made it: keys carry the identity, so a store treats a key of another store as absent
/// (a writer copies the object, a source refuses the load) instead of misreading its offset.
///
/// Identities are drawn from a process-wide counter, so two live stores never share one (after
/// 2^32 - 1 stores opened in one process the counter wraps around).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreId(std::num::NonZeroU32);

impl StoreId {
    /// A new identity, different from every other one handed out in this process (until the
    /// counter wraps around).
    pub fn fresh() -> StoreId {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        loop {
            let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Some(id) = std::num::NonZeroU32::new(id) {
                return StoreId(id);
            }
        }
    }

    /// The identity as a number (for messages).
    pub fn get(self) -> u32 {
        self.0.get()
    }
}

impl fmt::Debug for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store#{}", self.0)
    }
}

impl fmt::Display for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store#{}", self.0)
    }
}

/// Where an object lives: the store that wrote it and its position there (a pack offset for the
/// disk store, an index for [`MemorySource`](crate::MemorySource)). Only the store named by
/// [`store`](ObjectKey::store) may interpret the position.
///
/// Laid out as three `u32`s (12 bytes, 4-aligned): a node's key cache then fits where a `u64`
/// offset's did (a `Node`, with its origin and chain length, stays at 112 bytes, an allocator
/// size class below 128), and the identity's zero niche keeps a `NodeRef` at 48 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    offset_low: u32,
    offset_high: u32,
    store: StoreId,
}

impl ObjectKey {
    /// The object at `offset` of `store`.
    #[inline]
    pub fn new(store: StoreId, offset: u64) -> ObjectKey {
        ObjectKey { offset_low: offset as u32, offset_high: (offset >> 32) as u32, store }
    }

    /// The store whose position this is.
    #[inline]
    pub fn store(self) -> StoreId {
        self.store
    }

    /// The position within [`store`](ObjectKey::store).
    #[inline]
    pub fn offset(self) -> u64 {
        (u64::from(self.offset_high) << 32) | u64::from(self.offset_low)
    }

    /// The position, if this key belongs to `store`.
    #[inline]
    pub fn offset_in(self, store: StoreId) -> Option<u64> {
        (self.store == store).then(|| self.offset())
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.offset(), self.store)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.offset(), self.store)
    }
}
