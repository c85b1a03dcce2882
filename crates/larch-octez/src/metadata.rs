//! `snapshot_version.json` (`{"version": 9}`) and `metadata.json` (chain name, history mode,
//! block hash, level, timestamp), as Octez's `Version.encoding` and
//! `Snapshot_metadata.metadata_encoding` write them in JSON.

use crate::block_data::{BlockData, block_hash_b58};
use crate::error::{OctezError, Result};
use serde_json::Value;

/// What `metadata.json` says of the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The chain's name (`TEZOS_MAINNET`, ...).
    pub chain_name: String,
    /// The history mode, as written (`"rolling"`, `"full"`, or an object with extra cycles).
    pub mode: String,
    /// The block hash (base58 `B…`).
    pub block_hash: String,
    /// The block's level.
    pub level: i64,
    /// The block's timestamp (RFC 3339).
    pub timestamp: String,
}

fn corrupt(member: &str, what: impl Into<String>) -> OctezError {
    OctezError::Corrupt { member: member.into(), offset: 0, what: what.into() }
}

fn parse(bytes: &[u8], member: &str) -> Result<serde_json::Map<String, Value>> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(corrupt(member, "not a JSON object")),
        Err(e) => Err(OctezError::Corrupt {
            member: member.into(),
            // serde_json reports line and column; the byte offset is that of the line's start
            // plus the column.
            offset: byte_offset(bytes, e.line(), e.column()),
            what: format!("invalid JSON: {e}"),
        }),
    }
}

fn byte_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    let mut start = 0usize;
    for _ in 1..line {
        match bytes.get(start..).and_then(|rest| rest.iter().position(|b| *b == b'\n')) {
            Some(at) => start += at + 1,
            None => break,
        }
    }
    (start + column.saturating_sub(1)) as u64
}

/// The version of `snapshot_version.json`.
pub fn version(bytes: &[u8], member: &str) -> Result<u64> {
    let map = parse(bytes, member)?;
    map.get("version").and_then(Value::as_u64).ok_or_else(|| corrupt(member, "no integer field \"version\""))
}

/// Decodes `metadata.json`.
pub fn decode(bytes: &[u8]) -> Result<Metadata> {
    const MEMBER: &str = crate::archive::METADATA_MEMBER;
    let map = parse(bytes, MEMBER)?;
    let text = |field: &str| -> Result<String> {
        map.get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| corrupt(MEMBER, format!("no string field {field:?}")))
    };
    let mode = match map.get("mode") {
        Some(Value::String(mode)) => mode.clone(),
        Some(other @ Value::Object(_)) => other.to_string(),
        _ => return Err(corrupt(MEMBER, "no field \"mode\"")),
    };
    let level = map
        .get("level")
        .and_then(Value::as_i64)
        .ok_or_else(|| corrupt(MEMBER, "no integer field \"level\""))?;
    Ok(Metadata {
        chain_name: text("chain_name")?,
        mode,
        block_hash: text("block_hash")?,
        level,
        timestamp: text("timestamp")?,
    })
}

/// Checks that the metadata names the block `block_data` holds: same hash, level and timestamp.
pub fn check_against(metadata: &Metadata, block: &BlockData) -> Result<()> {
    let hash = block_hash_b58(&block.block_hash);
    if metadata.block_hash != hash {
        return Err(OctezError::Inconsistent {
            what: format!("metadata.json names block {}, block_data holds block {hash}", metadata.block_hash),
        });
    }
    if metadata.level != i64::from(block.level) {
        return Err(OctezError::Inconsistent {
            what: format!("metadata.json says level {}, the block header {}", metadata.level, block.level),
        });
    }
    let timestamp = larch_core::schema::rfc3339_utc(block.timestamp);
    if metadata.timestamp != timestamp {
        return Err(OctezError::Inconsistent {
            what: format!(
                "metadata.json says timestamp {}, the block header {timestamp}",
                metadata.timestamp
            ),
        });
    }
    Ok(())
}
