//! Contents values and references to them (held in memory, inline in a shared buffer, or stored).

use super::{InlineValue, ObjectKey};
use crate::hash::Hash;
use crate::schema;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// Values of at most this many bytes are held inside the [`Contents`] itself (most Tezos values:
/// balances, counters, flags), saving a heap allocation and a pointer chase per value. 22 keeps
/// `Contents` at 64 bytes, the size it has with a boxed value (a larger buffer would grow every
/// value, large ones included: +8 MiB of peak RSS with 32 on the default trace).
pub(super) const SMALL_CONTENTS: usize = 22;

enum Bytes {
    Small { len: u8, buf: [u8; SMALL_CONTENTS] },
    Large(Box<[u8]>),
}

impl Bytes {
    fn small(bytes: &[u8]) -> Option<Bytes> {
        let mut buf = [0u8; SMALL_CONTENTS];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Bytes::Small { len: u8::try_from(bytes.len()).ok()?, buf })
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Small { len, buf } => buf.get(..usize::from(*len)).unwrap_or_default(),
            Bytes::Large(bytes) => bytes,
        }
    }
}

/// A contents value with its lazily computed hash.
pub struct Contents {
    bytes: Bytes,
    pub(super) hash: OnceLock<Hash>,
}

impl Default for Contents {
    fn default() -> Contents {
        Contents::from_slice(&[])
    }
}

impl Contents {
    /// Contents holding `bytes` (kept in their own allocation: copying a small value in and
    /// freeing the box was measured to raise the peak RSS, the freed boxes fragmenting the heap).
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Contents {
        Contents { bytes: Bytes::Large(bytes.into()), hash: OnceLock::new() }
    }

    /// Contents holding a copy of `bytes` (no heap allocation for a small value).
    pub fn from_slice(bytes: &[u8]) -> Contents {
        let bytes = Bytes::small(bytes).unwrap_or_else(|| Bytes::Large(bytes.into()));
        Contents { bytes, hash: OnceLock::new() }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The contents hash, computed once.
    pub fn hash(&self) -> Hash {
        *self.hash.get_or_init(|| schema::contents_hash(self.bytes.as_slice()))
    }
}

impl Deref for Contents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes.as_slice()
    }
}

impl fmt::Debug for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Contents({} bytes)", self.bytes.as_slice().len())
    }
}

/// A reference to a contents value: in memory, or stored and loaded on demand.
#[derive(Clone, Debug)]
pub enum ContentsRef {
    /// Held in memory.
    Mem(Arc<Contents>),
    /// Held in memory in a piece of a buffer shared with its node's other names and values (a
    /// small value decoded from a store's record of its parent).
    Inline(InlineValue),
    /// Known by hash; its bytes are loaded from the source at `key`.
    Stored {
        /// The contents hash.
        hash: Hash,
        /// Where the source finds it.
        key: ObjectKey,
    },
}

impl ContentsRef {
    /// The contents hash (never needs a load).
    pub fn hash(&self) -> Hash {
        match self {
            ContentsRef::Mem(contents) => contents.hash(),
            ContentsRef::Inline(value) => value.hash(),
            ContentsRef::Stored { hash, .. } => *hash,
        }
    }

    /// The value's bytes if it is held in memory ([`Mem`](ContentsRef::Mem) or
    /// [`Inline`](ContentsRef::Inline)); `None` if it must be loaded.
    pub fn held_bytes(&self) -> Option<&[u8]> {
        match self {
            ContentsRef::Mem(contents) => Some(contents.as_bytes()),
            ContentsRef::Inline(value) => Some(value.as_bytes()),
            ContentsRef::Stored { .. } => None,
        }
    }

    /// Whether computing [`hash`](ContentsRef::hash) caches it (or needs no computation): false
    /// for an [`Inline`](ContentsRef::Inline) value, whose hash is computed at each call.
    pub fn hash_is_cached(&self) -> bool {
        !matches!(self, ContentsRef::Inline(_))
    }
}
