//! Pack entries (spec §4.10): `hash ‖ kind magic ‖ [varint length] ‖ value`, decoded with every
//! length checked against the run of the pack that holds the entry.

use crate::bytes::Cursor;
use crate::dict::Dict;
use crate::error::{IrminError, Result};
use crate::layout::Layout;
use larch_core::Hash;
use larch_core::schema::INODE_MAX_DEPTH;
use std::path::PathBuf;

/// Bytes of a hash and a kind magic.
const HASH_AND_KIND: usize = 33;
/// The longest entry prefix: hash, magic and a 9-byte varint.
const MAX_PREFIX: usize = HASH_AND_KIND + 9;
/// Entries without a length header (V1 kinds) are decoded from a window of at most this size.
const V1_WINDOW: usize = 1 << 20;

/// How an entry refers to another object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address {
    /// By global pack offset.
    Offset(u64),
    /// By hash only (not locatable with minimal indexing).
    Hash(Hash),
}

/// Whether a directory entry names a contents value or a sub-directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A contents value.
    Contents,
    /// A directory.
    Node,
}

/// The value of an inode entry.
#[derive(Clone, Debug)]
pub enum InodeValue {
    /// A leaf: directory entries in ascending step order.
    Values(Vec<(Vec<u8>, Target, Address)>),
    /// An inner inode: the non-empty buckets.
    Tree {
        /// Depth (0 at a directory root).
        depth: u8,
        /// Total entries below.
        length: u64,
        /// (bucket, child inode), ascending bucket.
        pointers: Vec<(u8, Address)>,
    },
}

/// A commit's fields.
#[derive(Clone, Debug)]
pub struct RawCommit {
    /// The root node.
    pub node: Address,
    /// The parents, as stored.
    pub parents: Vec<Address>,
    /// Date (Unix seconds).
    pub date: i64,
    /// Author bytes.
    pub author: Vec<u8>,
    /// Message bytes.
    pub message: Vec<u8>,
}

/// A decoded value.
#[derive(Clone, Debug)]
pub enum Value {
    /// `B`: a contents value.
    Contents(Vec<u8>),
    /// `C`, `D` or `P`: a commit.
    Commit(RawCommit),
    /// `R`, `O`, `N`, `I`: an inode; `root` says whether it is a directory's root.
    Inode {
        /// A directory root (`R`, or V1 `N` values / depth-0 tree).
        root: bool,
        /// The inode's value.
        value: InodeValue,
    },
}

/// One decoded entry.
#[derive(Clone, Debug)]
pub struct Decoded {
    /// Global offset.
    pub offset: u64,
    /// The hash Irmin stored.
    pub hash: Hash,
    /// The kind magic.
    pub kind: u8,
    /// Whole entry length.
    pub length: u64,
    /// The file it was read from.
    pub file: PathBuf,
    /// The value.
    pub value: Value,
}

/// The hash and kind of the entry at `offset`, and the file it lies in.
pub(crate) fn header(layout: &Layout, offset: u64) -> Result<(Hash, u8, usize)> {
    let span = layout.read_upto(offset, HASH_AND_KIND)?;
    let path = layout.file_path(span.file);
    let mut cursor = Cursor::new(&span.bytes, span.file_offset, path);
    let hash = cursor.hash("entry hash")?;
    let kind = cursor.byte("entry kind")?;
    Ok((hash, kind, span.file))
}

fn has_length(kind: u8) -> bool {
    matches!(kind, b'B' | b'D' | b'P' | b'R' | b'O')
}

/// Decodes the whole entry at `offset`.
pub(crate) fn decode(layout: &Layout, dict: &Dict, offset: u64, lower_only: bool) -> Result<Decoded> {
    let head = layout.read_in(offset, MAX_PREFIX, lower_only)?;
    let path = layout.file_path(head.file).to_path_buf();
    let mut cursor = Cursor::new(&head.bytes, head.file_offset, &path);
    let hash = cursor.hash("entry hash")?;
    let kind = cursor.byte("entry kind")?;
    let span = if has_length(kind) {
        let body = cursor.varint("entry length")?;
        let total = (cursor.position() as u64)
            .checked_add(body)
            .filter(|total| *total <= head.available)
            .ok_or_else(|| {
                IrminError::corrupt(
                    &path,
                    head.file_offset,
                    format!(
                        "entry length {body} runs past the end of its file range ({} bytes left)",
                        head.available
                    ),
                )
            })?;
        let total = usize::try_from(total)
            .map_err(|_| IrminError::corrupt(&path, head.file_offset, "entry too large"))?;
        if total <= head.bytes.len() { head } else { layout.read_in(offset, total, lower_only)? }
    } else {
        layout.read_in(offset, V1_WINDOW, lower_only)?
    };
    let mut cursor = Cursor::new(&span.bytes, span.file_offset, &path);
    cursor.raw(HASH_AND_KIND, "entry prefix")?;
    let end = if has_length(kind) {
        let body = usize::try_from(cursor.varint("entry length")?).unwrap_or(usize::MAX);
        cursor.position().saturating_add(body)
    } else {
        span.bytes.len()
    };
    let bytes = span.bytes.get(..end.min(span.bytes.len())).unwrap_or_default();
    let mut cursor = Cursor::new(bytes, span.file_offset, &path);
    cursor.raw(HASH_AND_KIND, "entry prefix")?;
    if has_length(kind) {
        cursor.varint("entry length")?;
    }
    let value = match kind {
        b'B' => Value::Contents(cursor.raw(cursor.remaining(), "contents")?.to_vec()),
        b'D' | b'P' => {
            let node = address(&mut cursor)?;
            Value::Commit(commit_rest(&mut cursor, node, address)?)
        }
        b'C' => {
            let node = Address::Hash(cursor.hash("commit node")?);
            Value::Commit(commit_rest(&mut cursor, node, |c| Ok(Address::Hash(c.hash("parent")?)))?)
        }
        b'R' | b'O' | b'N' | b'I' => {
            let value = inode_value(&mut cursor, dict)?;
            let root = match (kind, &value) {
                (b'R', _) => true,
                (b'O', _) => false,
                (_, InodeValue::Values(_)) => kind == b'N',
                (_, InodeValue::Tree { depth, .. }) => *depth == 0,
            };
            Value::Inode { root, value }
        }
        other => {
            return Err(IrminError::corrupt(
                &path,
                span.file_offset + 32,
                format!("unknown entry kind {other:#04x}"),
            ));
        }
    };
    if has_length(kind) && cursor.remaining() != 0 {
        return Err(cursor.fail(format!("{} bytes left after the entry's value", cursor.remaining())));
    }
    Ok(Decoded { offset, hash, kind, length: cursor.position() as u64, file: path.clone(), value })
}

fn address(cursor: &mut Cursor<'_>) -> Result<Address> {
    let at = cursor.offset();
    match cursor.varint("address tag")? {
        0 => Ok(Address::Offset(cursor.int63("address offset")?)),
        1 => Ok(Address::Hash(cursor.hash("address hash")?)),
        tag => Err(cursor.fail(format!("address tag {tag} at {at}"))),
    }
}

fn commit_rest(
    cursor: &mut Cursor<'_>,
    node: Address,
    parent: impl Fn(&mut Cursor<'_>) -> Result<Address>,
) -> Result<RawCommit> {
    let count = cursor.varint_at_most(cursor.remaining() as u64, "parent count")?;
    let parents = (0..count).map(|_| parent(cursor)).collect::<Result<Vec<_>>>()?;
    let date = cursor.int64("date")?;
    let author = cursor.string("author")?.to_vec();
    let message = cursor.string("message")?.to_vec();
    Ok(RawCommit { node, parents, date, author, message })
}

fn inode_value(cursor: &mut Cursor<'_>, dict: &Dict) -> Result<InodeValue> {
    let at = cursor.offset();
    match cursor.varint("inode tag")? {
        0 => {
            let count = cursor.varint_at_most(cursor.remaining() as u64, "values count")?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let tag_at = cursor.offset();
                let tag = cursor.varint("value tag")?;
                if tag > 11 {
                    return Err(IrminError::corrupt(
                        cursor_path(cursor),
                        tag_at,
                        format!("unknown value tag {tag}"),
                    ));
                }
                let target = if tag % 3 == 2 { Target::Node } else { Target::Contents };
                let step = if tag < 6 {
                    let id_at = cursor.offset();
                    let id = cursor.varint_at_most(u64::from(u32::MAX), "dict id")?;
                    dict.get(id)
                        .ok_or_else(|| {
                            IrminError::corrupt(
                                cursor_path(cursor),
                                id_at,
                                format!("dict id {id} not in the dictionary ({} steps)", dict.len()),
                            )
                        })?
                        .to_vec()
                } else {
                    cursor.string("step")?.to_vec()
                };
                let by_offset = matches!(tag % 6, 0..=2);
                let addr = if by_offset {
                    Address::Offset(cursor.int63("child offset")?)
                } else {
                    Address::Hash(cursor.hash("child hash")?)
                };
                entries.push((step, target, addr));
            }
            Ok(InodeValue::Values(entries))
        }
        1 => {
            let depth_at = cursor.offset();
            let depth = cursor.varint("inode depth")?;
            if depth >= u64::from(INODE_MAX_DEPTH) {
                return Err(IrminError::corrupt(
                    cursor_path(cursor),
                    depth_at,
                    format!("inode depth {depth}"),
                ));
            }
            let length = cursor.varint("inode length")?;
            let count = cursor.varint_at_most(32, "pointer count")?;
            let mut pointers = Vec::with_capacity(count);
            for _ in 0..count {
                let index_at = cursor.offset();
                let index = cursor.varint("bucket index")?;
                let index = u8::try_from(index).ok().filter(|i| *i < 32).ok_or_else(|| {
                    IrminError::corrupt(cursor_path(cursor), index_at, format!("bucket index {index}"))
                })?;
                if pointers.last().is_some_and(|(last, _): &(u8, Address)| *last >= index) {
                    return Err(IrminError::corrupt(
                        cursor_path(cursor),
                        index_at,
                        "bucket indexes not ascending",
                    ));
                }
                pointers.push((index, address(cursor)?));
            }
            Ok(InodeValue::Tree { depth: depth as u8, length, pointers })
        }
        tag => Err(IrminError::corrupt(cursor_path(cursor), at, format!("inode tag {tag}"))),
    }
}

fn cursor_path(cursor: &Cursor<'_>) -> PathBuf {
    cursor.path().to_path_buf()
}
