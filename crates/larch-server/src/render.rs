//! Building response bodies: Octez's `raw_context` JSON with its depth cut-off, listings, commits.
//! Bodies are written straight into a byte buffer, counting entries and bytes against the limits
//! as they grow.

use crate::error::ApiError;
use larch_core::{Kind, Tree};
use larch_store::CommitDetails;

const NO_PATH: &[&[u8]] = &[];

/// A response rendered on a tokio worker thread holds at most this many entries: a larger one (a
/// big directory, a deep subtree; up to seconds of cold reads) is rendered again on the blocking
/// pool, so that it does not stall the small requests queued on the same worker.
pub(crate) const INLINE_ENTRIES: u64 = 2048;

/// What a response may still hold.
pub(crate) struct Budget {
    nodes: u64,
    max_nodes: u64,
    max_bytes: usize,
    inline_nodes: Option<u64>,
}

impl Budget {
    /// At most `max_nodes` entries and `max_bytes` bytes; with `inline`, more than
    /// [`INLINE_ENTRIES`] entries fail with [`ApiError::offload`].
    pub fn new(max_nodes: u64, max_bytes: usize, inline: bool) -> Budget {
        Budget { nodes: 0, max_nodes, max_bytes, inline_nodes: inline.then_some(INLINE_ENTRIES) }
    }

    /// Accounts for `count` more entries.
    fn take(&mut self, count: u64) -> Result<(), ApiError> {
        self.nodes = self.nodes.saturating_add(count);
        if self.nodes > self.max_nodes {
            return Err(ApiError::too_large(format!(
                "the response would hold more than {} entries; ask a smaller depth, or page with list's offset and length",
                self.max_nodes
            )));
        }
        if self.inline_nodes.is_some_and(|limit| self.nodes > limit) {
            return Err(ApiError::offload());
        }
        Ok(())
    }

    fn check_bytes(&self, out: &[u8]) -> Result<(), ApiError> {
        if out.len() > self.max_bytes {
            return Err(ApiError::too_large(format!(
                "the response would be larger than {} bytes; ask a smaller depth or a deeper path",
                self.max_bytes
            )));
        }
        Ok(())
    }
}

/// The name of a tree's kind in Octez's terms (`Context.Tree.kind`: `` `Value | `Tree ``).
pub(crate) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Contents => "value",
        Kind::Node => "tree",
    }
}

/// Appends the lower-case hex of `bytes`.
pub(crate) fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)]);
        out.push(DIGITS[usize::from(byte & 0x0f)]);
    }
}

/// Appends `bytes` as a JSON string (invalid UTF-8 replaced by U+FFFD).
pub(crate) fn push_json_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &*text);
}

/// Octez's `raw_context` of `tree` cut at `depth`: `null` at depth 0, a value as a hex string, a
/// directory as an object of its entries each read at `depth - 1`. The recursion is at most
/// `depth` deep, which the caller bounds by [`crate::Limits::max_depth`].
pub(crate) fn raw_context(
    tree: &Tree,
    depth: u32,
    out: &mut Vec<u8>,
    budget: &mut Budget,
) -> Result<(), ApiError> {
    budget.take(1)?;
    if depth == 0 {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    match tree.kind() {
        Kind::Contents => {
            let contents = tree.find(NO_PATH).map_err(|e| ApiError::tree(&e))?;
            out.push(b'"');
            push_hex(out, contents.as_deref().map_or(&[][..], |c| c.as_bytes()));
            out.push(b'"');
            budget.check_bytes(out)
        }
        Kind::Node => {
            let length = tree.length(NO_PATH).map_err(|e| ApiError::tree(&e))?;
            // Refuse before loading a huge directory's entries.
            budget.take(length)?;
            budget.nodes -= length;
            // By name, as Octez's raw context RPC folds (`~order:`Sorted`) into a map.
            let entries = tree.list_sorted(NO_PATH, 0, None).map_err(|e| ApiError::tree(&e))?;
            out.push(b'{');
            for (index, (name, child)) in entries.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                push_json_string(out, name.as_bytes());
                out.push(b':');
                raw_context(child, depth - 1, out, budget)?;
            }
            out.push(b'}');
            budget.check_bytes(out)
        }
    }
}

/// The entries of the directory `tree` in Irmin's order (Octez's `Context.list`: a commit's
/// directory in its inode layout, docs/list-order.md), from `offset`, at most `length` of them, as
/// `[{"name", "kind", "hash"}…]`.
pub(crate) fn list(
    tree: &Tree,
    offset: u64,
    length: Option<u64>,
    out: &mut Vec<u8>,
    budget: &mut Budget,
) -> Result<(), ApiError> {
    let total = tree.length(NO_PATH).map_err(|e| ApiError::tree(&e))?;
    let available = total.saturating_sub(offset);
    let count = length.map_or(available, |length| length.min(available));
    budget.take(count)?;
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let entries = tree.list(NO_PATH, offset, Some(count)).map_err(|e| ApiError::tree(&e))?;
    out.push(b'[');
    for (index, (name, child)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        push_json_string(out, name.as_bytes());
        out.extend_from_slice(b",\"kind\":\"");
        out.extend_from_slice(kind_name(child.kind()).as_bytes());
        out.extend_from_slice(b"\",\"hash\":\"");
        out.extend_from_slice(child.hash().to_base58().as_bytes());
        out.extend_from_slice(b"\"}");
    }
    out.push(b']');
    budget.check_bytes(out)
}

/// A commit as JSON: hashes in base58 (`Co…`, as Octez prints context hashes), the date as
/// RFC 3339 (as Octez prints timestamps) and as Unix seconds.
pub(crate) fn commit_json(details: &CommitDetails) -> serde_json::Value {
    serde_json::json!({
        "hash": details.hash.to_base58(),
        "tree": details.tree_hash.to_base58(),
        "date": rfc3339(details.info.date),
        "timestamp": details.info.date,
        "author": details.info.author,
        "message": details.info.message,
        "parents": details.parents.iter().map(|p| p.to_base58()).collect::<Vec<_>>(),
    })
}

/// `seconds` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub(crate) fn rfc3339(seconds: i64) -> String {
    larch_core::schema::rfc3339_utc(seconds)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_rfc3339() {
        // Octez's genesis block of mainnet: 2018-06-30T16:07:32Z.
        assert_eq!(rfc3339(1_530_374_852), "2018-06-30T16:07:32Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn raw_context_cuts_at_depth_and_counts_entries() {
        let mut tree = Tree::empty();
        tree.add(&["a", "x"], vec![1u8]).unwrap();
        tree.add(&["a", "y", "z"], vec![2u8]).unwrap();
        tree.add(&["b"], vec![0xffu8, 0]).unwrap();
        let render = |depth, max_nodes| {
            let mut out = Vec::new();
            raw_context(&tree, depth, &mut out, &mut Budget::new(max_nodes, 1 << 20, false))
                .map(|()| String::from_utf8(out).unwrap())
        };
        assert_eq!(render(0, 100).unwrap(), "null");
        assert_eq!(render(1, 100).unwrap(), r#"{"a":null,"b":null}"#);
        assert_eq!(render(2, 100).unwrap(), r#"{"a":{"x":null,"y":null},"b":"ff00"}"#);
        assert_eq!(render(3, 100).unwrap(), r#"{"a":{"x":"01","y":{"z":null}},"b":"ff00"}"#);
        assert_eq!(render(9, 100).unwrap(), r#"{"a":{"x":"01","y":{"z":"02"}},"b":"ff00"}"#);
        // root, a, x, y, z, b: 6 entries.
        assert!(render(9, 6).is_ok());
        assert_eq!(render(9, 5).unwrap_err().status, 413);
    }

    #[test]
    fn large_inline_renderings_are_offloaded() {
        let mut tree = Tree::empty();
        for i in 0..INLINE_ENTRIES + 10 {
            tree.add(&[format!("k{i}")], vec![1u8]).unwrap();
        }
        let mut out = Vec::new();
        let err = raw_context(&tree, 1, &mut out, &mut Budget::new(100_000, 1 << 30, true)).unwrap_err();
        assert!(err.is_offload());
        out.clear();
        raw_context(&tree, 1, &mut out, &mut Budget::new(100_000, 1 << 30, false)).unwrap();
        assert!(out.starts_with(b"{\"k0\":null,"));
        // Above the response limit: 413 at once, inline or not.
        let err = raw_context(&tree, 1, &mut out, &mut Budget::new(1000, 1 << 30, true)).unwrap_err();
        assert_eq!(err.status, 413);
    }
}
