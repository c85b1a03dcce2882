//! Names (path steps) and the shared buffers that hold the names and small values decoded from
//! one record.

use super::Contents;
use crate::hash::Hash;
use crate::schema;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A step of a path: arbitrary bytes, ordered bytewise (OCaml `String.compare`).
///
/// A name is a piece of a shared buffer: a name built alone owns its buffer, and the names of a
/// node decoded from a store share one buffer ([`Name::split`]), so decoding, cloning and dropping
/// a node's names cost one allocation and touch one place in memory, not one per name.
///
/// A name also holds its first eight bytes (zero-padded) as an integer: most comparisons of two
/// names, and so most probes of a directory search, are decided by them without reading the
/// buffer (a cache line of its own, cold in a node just loaded).
#[derive(Clone)]
pub struct Name {
    buf: NameBuffer,
    start: u32,
    /// `u32::MAX`: the rest of the buffer (a name of 4 GiB or more, alone in its buffer).
    len: u32,
    /// [`name_prefix`] of the name's bytes.
    prefix: u64,
}

/// The shared buffer of names and inline values: a thin pointer (8 bytes, its length in the
/// allocation), so that a name takes 24 bytes and a directory entry 80, not 32 and 88.
type NameBuffer = triomphe::ThinArc<(), u8>;

/// The first eight bytes of `bytes`, zero-padded, as a big-endian integer: two names whose
/// prefixes differ compare as their prefixes do (a name that ends within the eight bytes is
/// padded with zeros, below any byte but zero; equal prefixes decide nothing).
#[inline]
pub(crate) fn name_prefix(bytes: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = bytes.len().min(8);
    if let (Some(head), Some(bytes)) = (head.get_mut(..n), bytes.get(..n)) {
        head.copy_from_slice(bytes);
    }
    u64::from_be_bytes(head)
}

impl Name {
    /// A name holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Name {
        Name {
            buf: NameBuffer::from_header_and_slice((), bytes),
            start: 0,
            len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            prefix: name_prefix(bytes),
        }
    }

    /// The names whose bytes are the consecutive pieces of `bytes` ending at `ends` (increasing,
    /// at most `bytes.len()`), sharing one allocation; `None` if `ends` are not so, or a piece
    /// starts past 4 GiB.
    pub fn split(bytes: &[u8], ends: &[usize]) -> Option<Vec<Name>> {
        let buf = NameBuffer::from_header_and_slice((), bytes);
        let mut start = 0usize;
        let mut names = Vec::with_capacity(ends.len());
        for &end in ends {
            if end < start || end > bytes.len() {
                return None;
            }
            let len = u32::try_from(end - start).ok().filter(|len| *len < u32::MAX)?;
            let prefix = name_prefix(bytes.get(start..end).unwrap_or_default());
            names.push(Name { buf: buf.clone(), start: u32::try_from(start).ok()?, len, prefix });
            start = end;
        }
        Some(names)
    }

    /// The piece `range` of `buf` as a name (sharing the buffer); `None` if the range is not
    /// within it or starts past 4 GiB.
    fn piece(buf: &NameBuffer, range: std::ops::Range<usize>) -> Option<Name> {
        if range.start > range.end || range.end > buf.slice.len() {
            return None;
        }
        let len = u32::try_from(range.end - range.start).ok().filter(|len| *len < u32::MAX)?;
        let prefix = name_prefix(buf.slice.get(range.clone()).unwrap_or_default());
        Some(Name { buf: buf.clone(), start: u32::try_from(range.start).ok()?, len, prefix })
    }

    /// The address of the name's buffer, for [`prefetch`](super::prefetch): triomphe's
    /// `ThinArc::ptr` is the start of its `ArcInner`, the reference count (only a hint relies on it).
    #[inline]
    pub(crate) fn buffer_address(&self) -> *const u8 {
        self.buf.ptr().cast::<u8>()
    }

    /// The address of the name's first eight bytes (what a search compares), for
    /// [`prefetch`](super::prefetch).
    #[inline]
    pub(crate) fn prefix_address(&self) -> *const u64 {
        std::ptr::from_ref(&self.prefix)
    }

    /// `self.cmp(key)` bytewise, `key_prefix` being [`name_prefix`] of `key`: decided by the
    /// prefixes when they differ, without reading the name's buffer.
    #[inline]
    pub(crate) fn cmp_bytes(&self, key: &[u8], key_prefix: u64) -> std::cmp::Ordering {
        match self.prefix.cmp(&key_prefix) {
            std::cmp::Ordering::Equal => compare_name_bytes(self.as_bytes(), key),
            decided => decided,
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        let start = self.start as usize;
        let piece = if self.len == u32::MAX {
            self.buf.slice.get(start..)
        } else {
            self.buf.slice.get(start..start + self.len as usize)
        };
        piece.unwrap_or_default()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        // The same piece of the same buffer (a name copied along with its node) is equal without
        // reading the bytes.
        self.prefix == other.prefix
            && ((self.buf.ptr() == other.buf.ptr() && self.start == other.start && self.len == other.len)
                || self.as_bytes() == other.as_bytes())
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.cmp_bytes(other.as_bytes(), other.prefix)
    }
}

/// `a.cmp(b)` (bytewise, a prefix first), eight bytes at a time and inline. Names are short (a
/// few to a few dozen bytes) and compared in every directory search: a call to the C library's
/// `memcmp` per probe cost more than the comparison itself (8.6% of the replay thread; this made
/// the default replay 1.05–1.07× faster, docs/benchmarks.md at c117370, "Issue 11, ninth round").
#[inline]
pub(crate) fn compare_name_bytes(mut a: &[u8], mut b: &[u8]) -> std::cmp::Ordering {
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        if x != y {
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
        (a, b) = (rest_a, rest_b);
    }
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl From<&[u8]> for Name {
    fn from(bytes: &[u8]) -> Name {
        Name::new(bytes)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text.as_bytes())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.as_bytes()) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => write!(f, "0x{}", hex::encode(self.as_bytes())),
        }
    }
}

/// One buffer holding the names and small contents values decoded from one record: each becomes
/// a piece of it ([`SharedBytes::name`], [`SharedBytes::value`]), so that decoding a node costs one
/// allocation for all of its names and inline values, not one per name or value.
#[derive(Clone)]
pub struct SharedBytes(NameBuffer);

impl SharedBytes {
    /// A buffer holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> SharedBytes {
        SharedBytes(NameBuffer::from_header_and_slice((), bytes))
    }

    /// The bytes at `range` as a name; `None` if `range` is not within the buffer or starts past
    /// 4 GiB.
    pub fn name(&self, range: std::ops::Range<usize>) -> Option<Name> {
        Name::piece(&self.0, range)
    }

    /// The bytes at `range` as a contents value; `None` as for [`name`](SharedBytes::name).
    pub fn value(&self, range: std::ops::Range<usize>) -> Option<InlineValue> {
        Name::piece(&self.0, range).map(|piece| InlineValue { piece })
    }
}

/// A small contents value held in a piece of a [`SharedBytes`] buffer (as decoded from a store,
/// inline in its parent's record): no allocation of its own, and no cached hash (the hash of a
/// value of at most a few dozen bytes is one BLAKE2b block, computed when asked).
#[derive(Clone, PartialEq, Eq)]
pub struct InlineValue {
    piece: Name,
}

impl InlineValue {
    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.piece.as_bytes()
    }

    /// The contents hash (computed at each call).
    pub fn hash(&self) -> Hash {
        schema::contents_hash(self.piece.as_bytes())
    }

    /// The address of the value's buffer, for [`prefetch`](super::prefetch).
    #[inline]
    pub(crate) fn buffer_address(&self) -> *const u8 {
        self.piece.buffer_address()
    }

    /// The value as [`Contents`] of its own.
    pub fn to_contents(&self) -> Arc<Contents> {
        Arc::new(Contents::from_slice(self.piece.as_bytes()))
    }
}

impl fmt::Debug for InlineValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InlineValue({} bytes)", self.piece.as_bytes().len())
    }
}
