//! Irmin's repr JSON form of a tree proof (`Irmin.Type.to_json_string (Tree.Proof.t
//! Tree.Proof.tree_t)`, spec §4), read and written. Behind the `json` feature (needs `std`).
//!
//! Hashes are base58check `Co…` strings; steps and values are JSON strings when they are UTF-8 and
//! `{"base64": …}` otherwise; record fields holding an empty list are omitted (and read as empty);
//! numbers may be written as floats. Reading is bounded by `serde_json`'s nesting limit (128).

use crate::hash::{HASH_LEN, Hash, Kind};
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Tree};
use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use core::fmt;
use serde_json::Value;

/// Why a text is not a repr JSON proof.
#[derive(Debug)]
#[non_exhaustive]
pub enum JsonError {
    /// Not JSON.
    Syntax(serde_json::Error),
    /// JSON, but not the shape of a proof.
    Shape {
        /// What was expected.
        expected: &'static str,
        /// The JSON path where it was expected.
        at: String,
    },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(err) => write!(f, "invalid JSON: {err}"),
            JsonError::Shape { expected, at } => write!(f, "invalid proof JSON: expected {expected} at {at}"),
        }
    }
}

impl std::error::Error for JsonError {}

fn shape(expected: &'static str, at: &str) -> JsonError {
    JsonError::Shape { expected, at: at.to_string() }
}

/// The 2-byte prefix of a context hash before base58check (`Co…`).
const CONTEXT_HASH_PREFIX: [u8; 2] = [0x4f, 0xc7];

/// The `Co…` base58check form of a hash.
pub fn hash_to_b58(hash: &Hash) -> String {
    let mut payload = [0u8; 2 + HASH_LEN];
    payload[..2].copy_from_slice(&CONTEXT_HASH_PREFIX);
    payload[2..].copy_from_slice(&hash.0);
    bs58::encode(payload).with_check().into_string()
}

/// Parses a `Co…` base58check hash.
pub fn hash_of_b58(text: &str) -> Option<Hash> {
    let decoded = bs58::decode(text).with_check(None).into_vec().ok()?;
    let (prefix, body) = decoded.split_first_chunk::<2>()?;
    if *prefix != CONTEXT_HASH_PREFIX {
        return None;
    }
    Some(Hash(body.try_into().ok()?))
}

/// Reads a proof from Irmin's repr JSON.
pub fn read(text: &str) -> Result<Proof, JsonError> {
    let value: Value = serde_json::from_str(text).map_err(JsonError::Syntax)?;
    let object = value.as_object().ok_or_else(|| shape("an object", "$"))?;
    let field = |name: &'static str| object.get(name).ok_or_else(|| shape(name, "$"));
    Ok(Proof {
        version: 0,
        before: kinded(field("before")?, "$.before")?,
        after: kinded(field("after")?, "$.after")?,
        state: tree(field("state")?, "$.state")?,
    })
}

fn variant<'a>(value: &'a Value, at: &str) -> Result<(&'a str, &'a Value), JsonError> {
    match value.as_object() {
        Some(object) if object.len() == 1 => {
            object.iter().next().map(|(k, v)| (k.as_str(), v)).ok_or_else(|| shape("a variant", at))
        }
        _ => Err(shape("a one-field variant object", at)),
    }
}

fn hash(value: &Value, at: &str) -> Result<Hash, JsonError> {
    value.as_str().and_then(hash_of_b58).ok_or_else(|| shape("a Co… context hash", at))
}

fn unit_meta(value: Option<&Value>, at: &str) -> Result<(), JsonError> {
    match value {
        Some(Value::Object(object)) if object.is_empty() => Ok(()),
        _ => Err(shape("unit metadata {}", at)),
    }
}

fn pair<'a>(value: &'a Value, at: &str) -> Result<(&'a Value, &'a Value), JsonError> {
    match value.as_array().map(Vec::as_slice) {
        Some([a, b]) => Ok((a, b)),
        _ => Err(shape("a pair", at)),
    }
}

fn bytes(value: &Value, at: &str) -> Result<Vec<u8>, JsonError> {
    match value {
        Value::String(text) => Ok(text.as_bytes().to_vec()),
        Value::Object(object) if object.len() == 1 => object
            .get("base64")
            .and_then(Value::as_str)
            .and_then(|text| BASE64.decode(text).ok())
            .ok_or_else(|| shape("{\"base64\": …}", at)),
        _ => Err(shape("a string", at)),
    }
}

fn int(value: Option<&Value>, at: &str) -> Result<u64, JsonError> {
    let value = value.ok_or_else(|| shape("an integer field", at))?;
    if let Some(n) = value.as_u64() {
        return Ok(n);
    }
    match value.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 9.0e18 => Ok(f as u64),
        _ => Err(shape("a non-negative integer", at)),
    }
}

fn small(value: &Value, at: &str) -> Result<u8, JsonError> {
    u8::try_from(int(Some(value), at)?).map_err(|_| shape("an index below 256", at))
}

fn kinded(value: &Value, at: &str) -> Result<KindedHash, JsonError> {
    match variant(value, at)? {
        ("Node", h) => Ok(KindedHash { kind: Kind::Node, hash: hash(h, at)? }),
        ("Contents", v) => {
            let (h, meta) = pair(v, at)?;
            unit_meta(Some(meta), at)?;
            Ok(KindedHash { kind: Kind::Contents, hash: hash(h, at)? })
        }
        _ => Err(shape("Node or Contents", at)),
    }
}

fn entries(value: &Value, at: &str) -> Result<Entries, JsonError> {
    let list = value.as_array().ok_or_else(|| shape("an entry list", at))?;
    list.iter()
        .map(|item| {
            let (step, sub) = pair(item, at)?;
            Ok((bytes(step, at)?, tree(sub, at)?))
        })
        .collect()
}

fn list_field<'a>(object: &'a serde_json::Map<String, Value>, name: &str) -> &'a [Value] {
    object.get(name).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn inode(value: &Value, at: &str) -> Result<Inode, JsonError> {
    let object = value.as_object().ok_or_else(|| shape("an inode record", at))?;
    let proofs = list_field(object, "proofs")
        .iter()
        .map(|item| {
            let (index, sub) = pair(item, at)?;
            Ok((small(index, at)?, inode_tree(sub, at)?))
        })
        .collect::<Result<_, JsonError>>()?;
    Ok(Inode { length: int(object.get("length"), at)?, proofs })
}

fn extender(value: &Value, at: &str) -> Result<Extender, JsonError> {
    let object = value.as_object().ok_or_else(|| shape("an extender record", at))?;
    let segments = list_field(object, "segments").iter().map(|s| small(s, at)).collect::<Result<_, _>>()?;
    let proof = object.get("proof").ok_or_else(|| shape("proof", at))?;
    Ok(Extender { length: int(object.get("length"), at)?, segments, proof: Box::new(inode_tree(proof, at)?) })
}

fn tree(value: &Value, at: &str) -> Result<Tree, JsonError> {
    Ok(match variant(value, at)? {
        ("Contents", v) => {
            let (data, meta) = pair(v, at)?;
            unit_meta(Some(meta), at)?;
            Tree::Contents(bytes(data, at)?)
        }
        ("Blinded_contents", v) => {
            let (h, meta) = pair(v, at)?;
            unit_meta(Some(meta), at)?;
            Tree::BlindedContents(hash(h, at)?)
        }
        ("Node", v) => Tree::Node(entries(v, at)?),
        ("Blinded_node", h) => Tree::BlindedNode(hash(h, at)?),
        ("Inode", v) => Tree::Inode(inode(v, at)?),
        ("Extender", v) => Tree::Extender(extender(v, at)?),
        _ => return Err(shape("a tree constructor", at)),
    })
}

fn inode_tree(value: &Value, at: &str) -> Result<InodeTree, JsonError> {
    Ok(match variant(value, at)? {
        ("Blinded_inode", h) => InodeTree::Blinded(hash(h, at)?),
        ("Inode_values", v) => InodeTree::Values(entries(v, at)?),
        ("Inode_tree", v) => InodeTree::Tree(inode(v, at)?),
        ("Inode_extender", v) => InodeTree::Extender(extender(v, at)?),
        _ => return Err(shape("an inode_tree constructor", at)),
    })
}

/// Writes a proof as Irmin's repr JSON (compact, Irmin's field order; `version` is not written).
pub fn write(proof: &Proof) -> String {
    let mut out = String::new();
    out.push_str("{\"before\":");
    write_kinded(&mut out, &proof.before);
    out.push_str(",\"after\":");
    write_kinded(&mut out, &proof.after);
    out.push_str(",\"state\":");
    write_tree(&mut out, &proof.state);
    out.push('}');
    out
}

fn write_hash(out: &mut String, hash: &Hash) {
    out.push('"');
    out.push_str(&hash_to_b58(hash));
    out.push('"');
}

fn write_kinded(out: &mut String, kh: &KindedHash) {
    match kh.kind {
        Kind::Node => {
            out.push_str("{\"Node\":");
            write_hash(out, &kh.hash);
            out.push('}');
        }
        Kind::Contents => {
            out.push_str("{\"Contents\":[");
            write_hash(out, &kh.hash);
            out.push_str(",{}]}");
        }
    }
}

fn write_bytes(out: &mut String, data: &[u8]) {
    match core::str::from_utf8(data) {
        Ok(text) => out.push_str(&serde_json::Value::String(text.to_string()).to_string()),
        Err(_) => {
            out.push_str("{\"base64\":\"");
            out.push_str(&BASE64.encode(data));
            out.push_str("\"}");
        }
    }
}

fn write_entries(out: &mut String, entries: &Entries) {
    out.push('[');
    for (i, (step, sub)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        write_bytes(out, step);
        out.push(',');
        write_tree(out, sub);
        out.push(']');
    }
    out.push(']');
}

fn write_inode(out: &mut String, inode: &Inode) {
    out.push_str(&alloc::format!("{{\"length\":{}", inode.length));
    if !inode.proofs.is_empty() {
        out.push_str(",\"proofs\":[");
        for (i, (index, sub)) in inode.proofs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&alloc::format!("[{index},"));
            write_inode_tree(out, sub);
            out.push(']');
        }
        out.push(']');
    }
    out.push('}');
}

fn write_extender(out: &mut String, ext: &Extender) {
    out.push_str(&alloc::format!("{{\"length\":{}", ext.length));
    if !ext.segments.is_empty() {
        let segments: Vec<String> = ext.segments.iter().map(|s| s.to_string()).collect();
        out.push_str(&alloc::format!(",\"segments\":[{}]", segments.join(",")));
    }
    out.push_str(",\"proof\":");
    write_inode_tree(out, &ext.proof);
    out.push('}');
}

fn write_tree(out: &mut String, tree: &Tree) {
    match tree {
        Tree::Contents(data) => {
            out.push_str("{\"Contents\":[");
            write_bytes(out, data);
            out.push_str(",{}]}");
        }
        Tree::BlindedContents(hash) => {
            out.push_str("{\"Blinded_contents\":[");
            write_hash(out, hash);
            out.push_str(",{}]}");
        }
        Tree::Node(entries) => {
            out.push_str("{\"Node\":");
            write_entries(out, entries);
            out.push('}');
        }
        Tree::BlindedNode(hash) => {
            out.push_str("{\"Blinded_node\":");
            write_hash(out, hash);
            out.push('}');
        }
        Tree::Inode(inode) => {
            out.push_str("{\"Inode\":");
            write_inode(out, inode);
            out.push('}');
        }
        Tree::Extender(ext) => {
            out.push_str("{\"Extender\":");
            write_extender(out, ext);
            out.push('}');
        }
    }
}

fn write_inode_tree(out: &mut String, tree: &InodeTree) {
    match tree {
        InodeTree::Blinded(hash) => {
            out.push_str("{\"Blinded_inode\":");
            write_hash(out, hash);
            out.push('}');
        }
        InodeTree::Values(entries) => {
            out.push_str("{\"Inode_values\":");
            write_entries(out, entries);
            out.push('}');
        }
        InodeTree::Tree(inode) => {
            out.push_str("{\"Inode_tree\":");
            write_inode(out, inode);
            out.push('}');
        }
        InodeTree::Extender(ext) => {
            out.push_str("{\"Inode_extender\":");
            write_extender(out, ext);
            out.push('}');
        }
    }
}
