//! Byte encoding of pack records (docs/format.md §3): framing with a checksum, child pointers,
//! compact names, inline contents, directory, inode and commit bodies.

use crate::error::{FileKind, Result, StoreError};
use larch_core::schema::{INODE_MAX_DEPTH, INODE_VALUES_MAX, STABLE_HASH_MAX};
use larch_core::{
    CommitInfo, ContentsRef, Entry, Hash, InodeTree, Name, NodeBody, NodeRef, ObjectKey, SharedBytes, StoreId,
};
use larch_varint::encode as write_leb128;

/// Magic of the pack header.
pub const PACK_MAGIC: &[u8; 8] = b"LARCHPAK";
/// Format version written and read by this build.
pub const FORMAT_VERSION: u32 = 2;
/// Length of the pack header; the first record starts here.
pub const PACK_HEADER_LEN: u64 = 16;
/// Contents of at most this many bytes are stored inline in their parent record (a writer's
/// choice: readers accept both forms for any length). 256 covers the public keys, balances,
/// counters and most small contract values of Tezos accounts, so reading one costs no second
/// record (docs/format.md §3.5).
pub const INLINE_MAX: usize = 256;
/// The largest record body accepted (by readers, and by the writer, which refuses a larger one
/// with [`StoreError::TooLarge`] before writing it).
pub const MAX_BODY_LEN: u64 = 1 << 30;
/// The smallest commit record, framing included (no parents, empty author and message, a
/// one-byte `back`): a pack of `n` bytes holds at most `n / MIN_COMMIT_RECORD` commits.
pub const MIN_COMMIT_RECORD: u64 = 50;
/// The most parents a commit record may have.
pub const MAX_PARENTS: usize = 1024;

/// Kinds of pack records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RecordKind {
    /// A contents value of its own.
    Contents,
    /// A directory of at most 256 entries.
    Flat,
    /// An inode leaf.
    Values,
    /// An inode tree.
    Tree,
    /// A commit.
    Commit,
    /// A flat directory or `Values` inode given as changes to an earlier version (`patch.rs`).
    PatchEntries,
    /// A `Tree` inode given as changes to an earlier version (`patch.rs`).
    PatchTree,
}

impl RecordKind {
    /// The kind byte.
    pub fn byte(self) -> u8 {
        match self {
            RecordKind::Contents => 1,
            RecordKind::Flat => 2,
            RecordKind::Values => 3,
            RecordKind::Tree => 4,
            RecordKind::Commit => 5,
            RecordKind::PatchEntries => 6,
            RecordKind::PatchTree => 7,
        }
    }

    /// The kind of a kind byte.
    pub fn from_byte(byte: u8) -> Option<RecordKind> {
        Some(match byte {
            1 => RecordKind::Contents,
            2 => RecordKind::Flat,
            3 => RecordKind::Values,
            4 => RecordKind::Tree,
            5 => RecordKind::Commit,
            6 => RecordKind::PatchEntries,
            7 => RecordKind::PatchTree,
            _ => return None,
        })
    }

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Contents => "contents",
            RecordKind::Flat => "directory",
            RecordKind::Values => "inode-values",
            RecordKind::Tree => "inode-tree",
            RecordKind::Commit => "commit",
            RecordKind::PatchEntries => "entries-patch",
            RecordKind::PatchTree => "inode-tree-patch",
        }
    }
}

/// The pack header bytes.
pub fn pack_header() -> [u8; PACK_HEADER_LEN as usize] {
    let mut header = [0u8; PACK_HEADER_LEN as usize];
    header[..8].copy_from_slice(PACK_MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header
}

/// Appends a framed record (kind, length, body, checksum) to `out`.
pub fn frame(out: &mut Vec<u8>, kind: RecordKind, body: &[u8]) {
    let start = out.len();
    out.push(kind.byte());
    write_leb128(out, body.len() as u64);
    out.extend_from_slice(body);
    let crc = crc32fast::hash(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The total length (framing included) of the record whose first bytes (at least its kind byte
/// and length) are `head`, at global offset `offset`; refuses an unknown kind or a body over
/// [`MAX_BODY_LEN`].
pub(crate) fn record_len(head: &[u8], offset: u64) -> Result<u64> {
    let mut cursor = Cursor::new(head, FileKind::Pack, offset);
    let kind = cursor.u8()?;
    if RecordKind::from_byte(kind).is_none() {
        return Err(cursor.error(format!("unknown record kind {kind}")));
    }
    let len = cursor.leb()?;
    if len > MAX_BODY_LEN {
        return Err(cursor.error(format!("record body of {len} bytes")));
    }
    Ok(cursor.position() as u64 + len + 4)
}

/// A bounds-checked cursor over a record body; errors name the pack offset of the record.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: FileKind,
    offset: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor over `bytes`, which belong to the record at `offset` of `file`.
    pub fn new(bytes: &'a [u8], file: FileKind, offset: u64) -> Cursor<'a> {
        Cursor { bytes, pos: 0, file, offset }
    }

    /// A corruption error at this record.
    pub fn error(&self, reason: impl Into<String>) -> StoreError {
        StoreError::corrupt(self.file, self.offset, reason)
    }

    /// How many bytes were consumed.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.error("length overflow"))?;
        let slice = self.bytes.get(self.pos..end).ok_or_else(|| self.error("truncated record body"))?;
        self.pos = end;
        Ok(slice)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?.first().copied().unwrap_or_default())
    }

    /// An unsigned LEB128 integer, in its shortest form ([`larch_varint::decode`]).
    #[inline]
    pub fn leb(&mut self) -> Result<u64> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        match larch_varint::decode(rest) {
            Ok((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            Err(larch_varint::Error::Truncated) => Err(self.error("truncated record body")),
            Err(larch_varint::Error::NonMinimal) => Err(self.error("over-long LEB128 integer")),
            // A tenth byte of 0 or 1 that goes on: more than ten bytes; any other, too large.
            Err(larch_varint::Error::Overflow) if rest.get(9).is_some_and(|byte| byte & 0x7e == 0) => {
                Err(self.error("LEB128 integer longer than 10 bytes"))
            }
            Err(larch_varint::Error::Overflow) => Err(self.error("LEB128 integer overflows 64 bits")),
        }
    }

    /// A LEB128 length, bounded by the remaining bytes.
    pub fn length(&mut self) -> Result<usize> {
        let len = self.leb()?;
        usize::try_from(len)
            .ok()
            .filter(|len| *len <= self.bytes.len() - self.pos)
            .ok_or_else(|| self.error(format!("length {len} exceeds the record")))
    }

    /// A 32-byte hash.
    pub fn hash(&mut self) -> Result<Hash> {
        let bytes = self.take(32)?;
        Hash::from_slice(bytes).map_err(|_| self.error("bad hash"))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        let bytes = self.take(8)?;
        let array: [u8; 8] = bytes.try_into().map_err(|_| self.error("truncated integer"))?;
        Ok(u64::from_le_bytes(array))
    }

    /// A child pointer: the child's hash and its absolute offset.
    pub fn pointer(&mut self) -> Result<(Hash, u64)> {
        let hash = self.hash()?;
        let back = self.leb()?;
        match self.offset.checked_sub(back) {
            Some(child) if back > 0 && child >= PACK_HEADER_LEN => Ok((hash, child)),
            _ => Err(self.error(format!("child pointer back {back} leaves the pack"))),
        }
    }

    /// A commit's parent pointer: like [`Cursor::pointer`], but `back` = 0 marks an absent parent
    /// (a commit not in this store), decoded as `None`.
    pub fn parent_pointer(&mut self) -> Result<(Hash, Option<u64>)> {
        let hash = self.hash()?;
        let back = self.leb()?;
        if back == 0 {
            return Ok((hash, None));
        }
        match self.offset.checked_sub(back) {
            Some(child) if child >= PACK_HEADER_LEN => Ok((hash, Some(child))),
            _ => Err(self.error(format!("parent pointer back {back} leaves the pack"))),
        }
    }

    /// A child pointer as a key of `store`.
    pub fn key_pointer(&mut self, store: StoreId) -> Result<(Hash, ObjectKey)> {
        let (hash, offset) = self.pointer()?;
        Ok((hash, ObjectKey::new(store, offset)))
    }
}

/// Whether a name is stored hex-packed: an even number ≥ 2 of lowercase hex digits.
pub fn is_hex_name(name: &[u8]) -> bool {
    name.len() >= 2
        && name.len().is_multiple_of(2)
        && name.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Appends the lowercase hex name whose hex-packed bytes are `raw` to `out`.
fn push_hex_name(out: &mut Vec<u8>, raw: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(raw.len() * 2);
    for byte in raw {
        out.push(DIGITS[usize::from(byte >> 4)]);
        out.push(DIGITS[usize::from(byte & 15)]);
    }
}

const TAG_NODE: u8 = 0;
const TAG_INLINE: u8 = 1;
const TAG_CONTENTS: u8 = 2;
const TAG_HEX: u8 = 4;
const TAG_REMOVED: u8 = 3;

/// What the encoder writes for one entry's target.
pub enum EncodedTarget<'a> {
    /// A pointer to a node record.
    Node(Hash, u64),
    /// Contents inline.
    Inline(&'a [u8]),
    /// A pointer to a contents record.
    Contents(Hash, u64),
}

pub(crate) fn write_pointer(out: &mut Vec<u8>, self_offset: u64, hash: &Hash, child: u64) {
    out.extend_from_slice(hash.as_bytes());
    write_leb128(out, self_offset.saturating_sub(child));
}

/// Appends one entry of a flat directory or `Values` body.
pub fn encode_entry(out: &mut Vec<u8>, self_offset: u64, name: &[u8], target: &EncodedTarget<'_>) {
    let hex = is_hex_name(name);
    let tag = match target {
        EncodedTarget::Node(..) => TAG_NODE,
        EncodedTarget::Inline(_) => TAG_INLINE,
        EncodedTarget::Contents(..) => TAG_CONTENTS,
    } | if hex { TAG_HEX } else { 0 };
    out.reserve(name.len() + 48);
    out.push(tag);
    if hex {
        write_leb128(out, (name.len() / 2) as u64);
        let digit = |b: u8| if b <= b'9' { b.wrapping_sub(b'0') } else { b.wrapping_sub(b'a' - 10) };
        let mut packed = [0u8; 64];
        for chunk in name.chunks(128) {
            let len = chunk.len() / 2;
            for (slot, pair) in packed.iter_mut().zip(chunk.chunks_exact(2)) {
                if let [high, low] = pair {
                    *slot = (digit(*high) << 4) | digit(*low);
                }
            }
            out.extend_from_slice(packed.get(..len).unwrap_or_default());
        }
    } else {
        write_leb128(out, name.len() as u64);
        out.extend_from_slice(name);
    }
    match target {
        EncodedTarget::Node(hash, child) | EncodedTarget::Contents(hash, child) => {
            write_pointer(out, self_offset, hash, *child)
        }
        EncodedTarget::Inline(bytes) => {
            write_leb128(out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
    }
}

/// Appends the head of a `Tree` inode body; children follow with [`encode_tree_child`].
pub fn encode_tree_head(out: &mut Vec<u8>, depth: u8, length: u64, count: usize) {
    out.push(depth);
    write_leb128(out, length);
    out.push(count as u8);
}

/// Appends one child of a `Tree` inode body.
pub fn encode_tree_child(out: &mut Vec<u8>, self_offset: u64, bucket: u8, hash: &Hash, child: u64) {
    out.push(bucket);
    write_pointer(out, self_offset, hash, child);
}

/// Statistics of one decoded entry list, for fsck.
#[derive(Clone, Copy, Debug, Default)]
pub struct EntryCounts {
    /// Inline contents values.
    pub inline: u64,
    /// Bytes of inline contents values.
    pub inline_bytes: u64,
    /// Hex-packed names.
    pub hex_names: u64,
}

fn decode_entries(
    cursor: &mut Cursor<'_>,
    max: usize,
    counts: &mut EntryCounts,
    store: StoreId,
) -> Result<Vec<(Name, Entry)>> {
    let count = cursor.leb()?;
    if count > max as u64 {
        return Err(cursor.error(format!("{count} entries, at most {max} allowed")));
    }
    with_decoded_names(|names| {
        for _ in 0..count {
            if !decode_entry(cursor, counts, names, store)? {
                return Err(cursor.error("a removal where an entry was expected"));
            }
            if names.previous().is_some_and(|previous| previous >= names.last()) {
                return Err(cursor.error("entries not sorted by name (or a name repeated)"));
            }
        }
        names.finish(cursor, |name, target| match target {
            Some(entry) => Ok((name, entry)),
            None => Err(cursor.error("a removal where an entry was expected")),
        })
    })
}

thread_local! {
    /// The decoding scratch of this thread ([`with_decoded_names`]).
    static NAMES_SCRATCH: std::cell::RefCell<DecodedNames> = const {
        std::cell::RefCell::new(DecodedNames { bytes: Vec::new(), spans: Vec::new(), targets: Vec::new() })
    };
}

/// A scratch holding more bytes than this is given back to the allocator after use (one huge
/// record does not keep its buffer for the thread's lifetime; the spans and targets are bounded
/// by the entries a record may hold).
const SCRATCH_KEEP_BYTES: usize = 1 << 20;

/// Runs `f` with an empty [`DecodedNames`]: the thread's scratch, reused from one record to the
/// next (a record's names, spans and targets then cost no allocation of their own: only the shared
/// buffer and the entries that [`DecodedNames::finish`] returns), or a fresh one if the scratch is
/// in use.
pub(crate) fn with_decoded_names<T>(f: impl FnOnce(&mut DecodedNames) -> T) -> T {
    NAMES_SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut names) => {
            names.clear();
            let out = f(&mut names);
            if names.bytes.capacity() > SCRATCH_KEEP_BYTES {
                *names = DecodedNames::default();
            } else {
                names.clear();
            }
            out
        }
        Err(_) => f(&mut DecodedNames::default()),
    })
}

/// The names, inline values and targets of the entries of one record, decoded into one buffer:
/// the names and values become [`Name`]s and [`InlineValue`](larch_core::InlineValue)s sharing
/// one allocation ([`SharedBytes`]).
#[derive(Default)]
pub(crate) struct DecodedNames {
    bytes: Vec<u8>,
    /// Where each name lies in `bytes`, in order.
    spans: Vec<(usize, usize)>,
    /// Each name's target, in order (`None`: a removal, in patches only).
    targets: Vec<Option<DecodedTarget>>,
}

impl DecodedNames {
    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.targets.clear();
    }

    fn span(&self, index: Option<usize>) -> Option<&[u8]> {
        let (start, end) = *self.spans.get(index?)?;
        self.bytes.get(start..end)
    }

    /// The bytes of the name decoded last.
    pub(crate) fn last(&self) -> &[u8] {
        self.span(self.spans.len().checked_sub(1)).unwrap_or_default()
    }

    /// The bytes of the name decoded before the last one, if any.
    pub(crate) fn previous(&self) -> Option<&[u8]> {
        self.span(self.spans.len().checked_sub(2))
    }

    /// The decoded entries, each made by `make` of its name and its target (`None`: a removal),
    /// in order: the names and inline values are pieces of one new shared buffer.
    pub(crate) fn finish<T>(
        &mut self,
        cursor: &Cursor<'_>,
        mut make: impl FnMut(Name, Option<Entry>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let buffer = SharedBytes::new(&self.bytes);
        let mut out = Vec::with_capacity(self.spans.len());
        for (&(start, end), target) in self.spans.iter().zip(self.targets.drain(..)) {
            let name = buffer.name(start..end).ok_or_else(|| cursor.error("bad names"))?;
            let target = target.map(|target| target.resolve(&buffer, cursor)).transpose()?;
            out.push(make(name, target)?);
        }
        Ok(out)
    }
}

/// A decoded entry's target, before the record's shared buffer exists.
pub(crate) enum DecodedTarget {
    /// A target that needs no buffer.
    Entry(Entry),
    /// An inline value at this span of the buffer.
    Inline(usize, usize),
}

impl DecodedTarget {
    /// The entry, its inline value a piece of `buffer`.
    pub(crate) fn resolve(self, buffer: &SharedBytes, cursor: &Cursor<'_>) -> Result<Entry> {
        match self {
            DecodedTarget::Entry(entry) => Ok(entry),
            DecodedTarget::Inline(start, end) => buffer
                .value(start..end)
                .map(|value| Entry::Contents(ContentsRef::Inline(value)))
                .ok_or_else(|| cursor.error("bad inline value")),
        }
    }
}

/// Decodes one entry, its name, inline value and target going to `names`: `true`; or (tag
/// target 3, in patches only) the removal of a name: `false`.
pub(crate) fn decode_entry(
    cursor: &mut Cursor<'_>,
    counts: &mut EntryCounts,
    names: &mut DecodedNames,
    store: StoreId,
) -> Result<bool> {
    let tag = cursor.u8()?;
    if tag & !(TAG_HEX | 3) != 0 {
        return Err(cursor.error(format!("bad entry tag {tag:#04x}")));
    }
    let stored_len = cursor.length()?;
    let stored = cursor.take(stored_len)?;
    let start = names.bytes.len();
    if tag & TAG_HEX != 0 {
        if stored.is_empty() {
            return Err(cursor.error("empty hex name"));
        }
        counts.hex_names += 1;
        push_hex_name(&mut names.bytes, stored);
    } else {
        names.bytes.extend_from_slice(stored);
    }
    names.spans.push((start, names.bytes.len()));
    let target = match tag & 3 {
        TAG_NODE => {
            let (hash, key) = cursor.key_pointer(store)?;
            Some(DecodedTarget::Entry(Entry::Node(NodeRef::Stored { hash, key })))
        }
        TAG_INLINE => {
            let len = cursor.length()?;
            let bytes = cursor.take(len)?;
            counts.inline += 1;
            counts.inline_bytes += len as u64;
            let start = names.bytes.len();
            names.bytes.extend_from_slice(bytes);
            Some(DecodedTarget::Inline(start, names.bytes.len()))
        }
        TAG_CONTENTS => {
            let (hash, key) = cursor.key_pointer(store)?;
            Some(DecodedTarget::Entry(Entry::Contents(ContentsRef::Stored { hash, key })))
        }
        _ => None,
    };
    let is_entry = target.is_some();
    names.targets.push(target);
    Ok(is_entry)
}

/// Appends the removal of `name` (patches only): the name with tag target 3 and no target.
pub fn encode_removal(out: &mut Vec<u8>, name: &[u8]) {
    let start = out.len();
    encode_entry(out, 0, name, &EncodedTarget::Inline(&[]));
    // Rewrite the tag's target bits to "removed" and drop the empty inline value's length byte.
    if let Some(tag) = out.get_mut(start) {
        *tag |= TAG_REMOVED;
    }
    out.pop();
}

/// Whether `length` entries may lie below a `Tree` inode at `depth`: the trie is canonical, so a
/// directory root (depth 0) has more than 256 entries (else it is flat) and an inner inode more
/// than 32 (else it is a `Values` leaf). (That `length` is the sum of the children's lengths is
/// checked by fsck, which reads them.)
pub fn check_tree_length(depth: u8, length: u64) -> std::result::Result<(), String> {
    let least = if depth == 0 { STABLE_HASH_MAX } else { INODE_VALUES_MAX } as u64 + 1;
    if length < least {
        return Err(format!("an inode tree at depth {depth} with {length} entries (at least {least})"));
    }
    Ok(())
}

/// Decodes the body of a node record (`Flat`, `Values` or `Tree`); its child pointers become
/// keys of `store`.
pub fn decode_node_body(
    kind: RecordKind,
    body: &[u8],
    offset: u64,
    counts: &mut EntryCounts,
    store: StoreId,
) -> Result<NodeBody> {
    let mut cursor = Cursor::new(body, FileKind::Pack, offset);
    let decoded = match kind {
        RecordKind::Flat => NodeBody::Flat(decode_entries(&mut cursor, STABLE_HASH_MAX, counts, store)?),
        RecordKind::Values => NodeBody::Values(decode_entries(&mut cursor, INODE_VALUES_MAX, counts, store)?),
        RecordKind::Tree => {
            let (depth, length, count) = decode_tree_head(&mut cursor)?;
            let mut children = Vec::with_capacity(usize::from(count));
            let mut previous: Option<u8> = None;
            for _ in 0..count {
                let bucket = decode_bucket(&mut cursor, previous)?;
                previous = Some(bucket);
                let (hash, key) = cursor.key_pointer(store)?;
                children.push((bucket, NodeRef::Stored { hash, key }));
            }
            NodeBody::Tree(InodeTree { depth, length, children })
        }
        other => return Err(cursor.error(format!("a {} record where a node was expected", other.name()))),
    };
    if !cursor.at_end() {
        return Err(cursor.error("trailing bytes in record body"));
    }
    Ok(decoded)
}

/// The head of a `Tree` inode body: its depth, its length (checked against the depth) and its
/// number of children (1 to 32).
pub(crate) fn decode_tree_head(cursor: &mut Cursor<'_>) -> Result<(u8, u64, u8)> {
    let depth = cursor.u8()?;
    if depth >= INODE_MAX_DEPTH {
        return Err(cursor.error(format!("inode depth {depth} too deep")));
    }
    let length = cursor.leb()?;
    check_tree_length(depth, length).map_err(|reason| cursor.error(reason))?;
    let count = cursor.u8()?;
    if count == 0 || count > 32 {
        return Err(cursor.error(format!("inode with {count} children")));
    }
    Ok((depth, length, count))
}

/// A `Tree` inode's next bucket index: below 32 and after `previous`.
pub(crate) fn decode_bucket(cursor: &mut Cursor<'_>, previous: Option<u8>) -> Result<u8> {
    let bucket = cursor.u8()?;
    if bucket >= 32 || previous.is_some_and(|p| p >= bucket) {
        return Err(cursor.error(format!("bad bucket index {bucket}")));
    }
    Ok(bucket)
}

/// A decoded commit record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitData {
    /// Hash of the root directory.
    pub tree_hash: Hash,
    /// Offset of the root directory record.
    pub tree_offset: u64,
    /// Parents: hash and commit record offset, in commit order. The offset is `None` for an
    /// *absent* parent: a commit that is not in this store (the commit was imported from a
    /// snapshot or another store without its history; docs/format.md §3.6).
    pub parents: Vec<(Hash, Option<u64>)>,
    /// Date, author, message.
    pub info: CommitInfo,
}

impl CommitData {
    /// The parents' hashes.
    pub fn parent_hashes(&self) -> Vec<Hash> {
        self.parents.iter().map(|(hash, _)| *hash).collect()
    }

    /// The hashes of the parents that are absent from the store (recorded without an offset).
    pub fn absent_parents(&self) -> Vec<Hash> {
        self.parents.iter().filter(|(_, offset)| offset.is_none()).map(|(hash, _)| *hash).collect()
    }

    /// The commit hash this record describes.
    pub fn hash(&self) -> Hash {
        larch_core::schema::commit_hash(&self.tree_hash, &self.parent_hashes(), &self.info)
    }
}

/// Appends the body of a commit record at `self_offset`.
pub fn encode_commit(out: &mut Vec<u8>, self_offset: u64, commit: &CommitData) {
    write_pointer(out, self_offset, &commit.tree_hash, commit.tree_offset);
    write_leb128(out, commit.parents.len() as u64);
    for (hash, offset) in &commit.parents {
        match offset {
            Some(offset) => write_pointer(out, self_offset, hash, *offset),
            None => {
                // An absent parent: its hash and `back` = 0, which no real pointer uses.
                out.extend_from_slice(hash.as_bytes());
                write_leb128(out, 0);
            }
        }
    }
    out.extend_from_slice(&commit.info.date.to_le_bytes());
    write_leb128(out, commit.info.author.len() as u64);
    out.extend_from_slice(commit.info.author.as_bytes());
    write_leb128(out, commit.info.message.len() as u64);
    out.extend_from_slice(commit.info.message.as_bytes());
}

/// Decodes the body of the commit record at `offset`.
pub fn decode_commit(body: &[u8], offset: u64) -> Result<CommitData> {
    let mut cursor = Cursor::new(body, FileKind::Pack, offset);
    let (tree_hash, tree_offset) = cursor.pointer()?;
    let count = cursor.leb()?;
    if count > MAX_PARENTS as u64 {
        return Err(cursor.error(format!("{count} parents")));
    }
    let parents = (0..count).map(|_| cursor.parent_pointer()).collect::<Result<Vec<_>>>()?;
    let date = cursor.u64()? as i64;
    let text = |cursor: &mut Cursor<'_>| -> Result<String> {
        let len = cursor.length()?;
        let bytes = cursor.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| cursor.error("commit info is not UTF-8"))
    };
    let author = text(&mut cursor)?;
    let message = text(&mut cursor)?;
    if !cursor.at_end() {
        return Err(cursor.error("trailing bytes in commit record"));
    }
    Ok(CommitData { tree_hash, tree_offset, parents, info: CommitInfo { date, author, message } })
}

#[cfg(test)]
mod tests;
