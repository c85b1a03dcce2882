//! The `block_data` member (Octez `src/lib_store/unix/snapshots.ml`, `block_data_encoding`, in
//! Data_encoding's binary form; the bytes are described in `docs/octez.md`).

use crate::error::{OctezError, Result};
use larch_core::Hash;

/// What larch reads of `block_data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockData {
    /// The snapshot block's level (from its shell header).
    pub level: i32,
    /// Its timestamp, Unix seconds (shell header).
    pub timestamp: i64,
    /// The block hash: BLAKE2b-256 of the header's bytes.
    pub block_hash: Hash,
    /// The context hash the header records (for recent protocols, the predecessor's resulting
    /// context).
    pub header_context: Hash,
    /// The hash of the context that results from applying the block: the snapshot's context.
    pub resulting_context_hash: Hash,
    /// Operation lists of the block, and operations in all.
    pub operations: (u64, u64),
}

const MEMBER: &str = "block_data";

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn fail(&self, at: usize, what: impl Into<String>) -> OctezError {
        OctezError::Corrupt { member: MEMBER.into(), offset: at as u64, what: what.into() }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let at = self.pos;
        let end = at.checked_add(n).filter(|end| *end <= self.bytes.len());
        match end.and_then(|end| self.bytes.get(at..end).map(|s| (s, end))) {
            Some((slice, end)) => {
                self.pos = end;
                Ok(slice)
            }
            None => {
                Err(self
                    .fail(at, format!("truncated {what}: {n} bytes needed, {} left", self.bytes.len() - at)))
            }
        }
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?.first().copied().unwrap_or_default())
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let mut word = [0u8; 4];
        word.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_be_bytes(word))
    }

    fn i64(&mut self, what: &str) -> Result<i64> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(word))
    }

    fn hash(&mut self, what: &str) -> Result<Hash> {
        let mut out = [0u8; 32];
        out.copy_from_slice(self.take(32, what)?);
        Ok(Hash(out))
    }

    /// A `dynamic_size` field: a 4-byte big-endian length (at most 2^30 − 1) and the bytes.
    fn dynamic(&mut self, what: &str) -> Result<(usize, &'a [u8])> {
        let at = self.pos;
        let len = self.u32(what)?;
        if len >= 1 << 30 {
            return Err(self.fail(at, format!("{what}: length {len} is not a uint30")));
        }
        Ok((self.pos, self.take(len as usize, what)?))
    }

    /// An `opt` field: `00` for none, `ff` and the hash for some.
    fn opt_hash(&mut self, what: &str) -> Result<Option<Hash>> {
        let at = self.pos;
        match self.u8(what)? {
            0x00 => Ok(None),
            0xff => Ok(Some(self.hash(what)?)),
            tag => Err(self.fail(at, format!("{what}: option tag {tag:#04x}"))),
        }
    }
}

/// The shell header's level, timestamp and context (Octez `Block_header.shell_header_encoding`:
/// level int32, proto uint8, predecessor 32 bytes, timestamp int64, validation passes uint8,
/// operations hash 32 bytes, fitness (dynamic), context 32 bytes; then the protocol data).
fn shell_header(bytes: &[u8], base: usize) -> Result<(i32, i64, Hash)> {
    let mut reader = Reader { bytes, pos: 0 };
    let fix = |e: OctezError| match e {
        OctezError::Corrupt { member, offset, what } => OctezError::Corrupt {
            member,
            offset: offset + base as u64,
            what: format!("block header: {what}"),
        },
        other => other,
    };
    let level = reader.u32("level").map_err(fix)? as i32;
    reader.take(1 + 32, "proto level and predecessor").map_err(fix)?;
    let timestamp = reader.i64("timestamp").map_err(fix)?;
    reader.take(1 + 32, "validation passes and operations hash").map_err(fix)?;
    let (fitness_at, fitness) = reader.dynamic("fitness").map_err(fix)?;
    let mut elements = Reader { bytes: fitness, pos: 0 };
    while elements.pos < fitness.len() {
        elements.dynamic("fitness element").map_err(|e| match e {
            OctezError::Corrupt { member, offset, what } => OctezError::Corrupt {
                member,
                offset: offset + (base + fitness_at) as u64,
                what: format!("block header: {what}"),
            },
            other => other,
        })?;
    }
    let context = reader.hash("context").map_err(fix)?;
    Ok((level, timestamp, context))
}

/// Decodes `block_data`: operations (a list of lists of dynamic-size operations, each list
/// prefixed by its byte size), the block header and the predecessor's header (dynamic size), the
/// predecessor's max operations TTL (int31), two optional metadata hashes, and the resulting
/// context hash, which must end the member.
pub fn decode(bytes: &[u8]) -> Result<BlockData> {
    let mut reader = Reader { bytes, pos: 0 };
    let (ops_at, ops) = reader.dynamic("operations")?;
    let (mut lists, mut operations) = (0u64, 0u64);
    let mut outer = Reader { bytes: ops, pos: 0 };
    while outer.pos < ops.len() {
        let rebase = |e: OctezError, base: usize| match e {
            OctezError::Corrupt { member, offset, what } => {
                OctezError::Corrupt { member, offset: offset + base as u64, what }
            }
            other => other,
        };
        let (list_at, list) = outer.dynamic("operation list").map_err(|e| rebase(e, ops_at))?;
        lists += 1;
        let mut inner = Reader { bytes: list, pos: 0 };
        while inner.pos < list.len() {
            inner.dynamic("operation").map_err(|e| rebase(e, ops_at + list_at))?;
            operations += 1;
        }
    }
    let (header_at, header) = reader.dynamic("block header")?;
    let (level, timestamp, header_context) = shell_header(header, header_at)?;
    let (pred_at, predecessor) = reader.dynamic("predecessor header")?;
    shell_header(predecessor, pred_at)?;
    let ttl_at = reader.pos;
    if reader.u32("predecessor max operations TTL")? >= 1 << 30 {
        return Err(reader.fail(ttl_at, "predecessor max operations TTL is not an int31"));
    }
    reader.opt_hash("predecessor block metadata hash")?;
    reader.opt_hash("predecessor operations metadata hash")?;
    let resulting_context_hash = reader.hash("resulting context hash")?;
    if reader.pos != bytes.len() {
        return Err(reader.fail(
            reader.pos,
            format!("{} bytes after the resulting context hash", bytes.len() - reader.pos),
        ));
    }
    Ok(BlockData {
        level,
        timestamp,
        block_hash: Hash::of_bytes(header),
        header_context,
        resulting_context_hash,
        operations: (lists, operations),
    })
}

/// Base58check of a block hash (prefix `B`, bytes `01 34`), as Octez prints it.
pub fn block_hash_b58(hash: &Hash) -> String {
    let mut bytes = vec![1u8, 52];
    bytes.extend_from_slice(hash.as_bytes());
    bs58::encode(bytes).with_check().into_string()
}
