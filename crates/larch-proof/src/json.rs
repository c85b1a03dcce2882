//! Irmin's repr JSON form of a tree proof (`Irmin.Type.to_json_string (Tree.Proof.t
//! Tree.Proof.tree_t)`, spec §4), read and written, and of a stream proof ([`read_stream`],
//! [`write_stream`]). Behind the `json` feature (needs `std`).
//!
//! Hashes are base58check `Co…` strings; steps and values are JSON strings when they are UTF-8 and
//! `{"base64": …}` otherwise; record fields holding an empty list are omitted (and read as empty);
//! numbers may be written as floats. Both ways go through serde (`serde_json`), and both are
//! bounded by [`MAX_JSON_DEPTH`] nested arrays and objects: deeper is [`JsonError::TooDeep`], never
//! a deep recursion.

use crate::hash::{HASH_LEN, Hash, Kind};
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Tree};
use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use core::fmt;
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, SerializeTuple, Serializer};
use serde_json::Value;

/// The most arrays and objects nested in a proof's JSON, read or written: 127, what `serde_json`'s
/// parser accepts (its recursion limit is 128). A directory level takes 3 (`{"Node": [[step,
/// …]]}`), an inode level 4, so real proofs (a few dozen levels) are far below it.
pub const MAX_JSON_DEPTH: usize = 127;

/// Why a text is not a repr JSON proof, or a proof cannot be written as one.
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
    /// The JSON nests (or would nest) more than `limit` arrays and objects ([`MAX_JSON_DEPTH`]).
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(err) => write!(f, "invalid JSON: {err}"),
            JsonError::Shape { expected, at } => write!(f, "invalid proof JSON: expected {expected} at {at}"),
            JsonError::TooDeep { limit } => {
                write!(f, "proof JSON nested deeper than {limit} arrays and objects")
            }
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
    let value: Value = serde_json::from_str(text).map_err(|err| {
        // serde_json reports its recursion limit as a syntax error; nothing else says "recursion".
        if err.is_syntax() && err.to_string().starts_with("recursion limit exceeded") {
            JsonError::TooDeep { limit: MAX_JSON_DEPTH }
        } else {
            JsonError::Syntax(err)
        }
    })?;
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

/// Writes a proof as Irmin's repr JSON (compact, Irmin's field order; `version` is not written),
/// through serde. A proof whose JSON would nest more than [`MAX_JSON_DEPTH`] arrays and objects is
/// [`JsonError::TooDeep`]: [`read`] could not read it back, and no recursion goes deeper than that.
pub fn write(proof: &Proof) -> Result<String, JsonError> {
    // Writing into a string fails only where a value's depth check does.
    serde_json::to_string(&ProofJson(proof)).map_err(|_| JsonError::TooDeep { limit: MAX_JSON_DEPTH })
}

/// The depth inside a JSON array or object opened at `depth` (the containers around it), or an
/// error past [`MAX_JSON_DEPTH`].
fn open<E: ser::Error>(depth: usize) -> Result<usize, E> {
    let inner = depth + 1;
    if inner > MAX_JSON_DEPTH {
        return Err(E::custom("proof nested deeper than the JSON limit"));
    }
    Ok(inner)
}

/// `{"name": value}`, Irmin's form of a variant, opened at `depth`.
fn tagged<S: Serializer>(s: S, depth: usize, name: &str, value: &impl Serialize) -> Result<S::Ok, S::Error> {
    open::<S::Error>(depth)?;
    let mut map = s.serialize_map(Some(1))?;
    map.serialize_entry(name, value)?;
    map.end()
}

/// The whole proof (depth 0).
struct ProofJson<'a>(&'a Proof);

impl Serialize for ProofJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = open::<S::Error>(0)?;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("before", &KindedJson(&self.0.before, inner))?;
        map.serialize_entry("after", &KindedJson(&self.0.after, inner))?;
        map.serialize_entry("state", &TreeJson(&self.0.state, inner))?;
        map.end()
    }
}

/// A `Co…` hash: a JSON string.
struct HashJson<'a>(&'a Hash);

impl Serialize for HashJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hash_to_b58(self.0))
    }
}

/// Unit metadata: `{}`, at the given depth.
struct MetaJson(usize);

impl Serialize for MetaJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        open::<S::Error>(self.0)?;
        s.serialize_map(Some(0))?.end()
    }
}

/// `[a, b]` at the given depth (`a` and `b` are one deeper).
struct PairJson<A, B>(A, B, usize);

impl<A: Serialize, B: Serialize> Serialize for PairJson<A, B> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        open::<S::Error>(self.2)?;
        let mut tuple = s.serialize_tuple(2)?;
        tuple.serialize_element(&self.0)?;
        tuple.serialize_element(&self.1)?;
        tuple.end()
    }
}

/// A step or a value: a string when UTF-8, else `{"base64": …}`.
struct BytesJson<'a>(&'a [u8], usize);

impl Serialize for BytesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match core::str::from_utf8(self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => tagged(s, self.1, "base64", &BASE64.encode(self.0)),
        }
    }
}

struct KindedJson<'a>(&'a KindedHash, usize);

impl Serialize for KindedJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (kh, depth) = (self.0, self.1);
        match kh.kind {
            Kind::Node => tagged(s, depth, "Node", &HashJson(&kh.hash)),
            Kind::Contents => {
                tagged(s, depth, "Contents", &PairJson(HashJson(&kh.hash), MetaJson(depth + 2), depth + 1))
            }
        }
    }
}

/// `[[step, tree], …]`.
struct EntriesJson<'a>(&'a Entries, usize);

impl Serialize for EntriesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = open::<S::Error>(self.1)?;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (step, sub) in self.0 {
            seq.serialize_element(&PairJson(BytesJson(step, inner + 1), TreeJson(sub, inner + 1), inner))?;
        }
        seq.end()
    }
}

/// `{"length": n, "proofs": [[index, inode_tree], …]}` (`proofs` omitted when empty).
struct InodeJson<'a>(&'a Inode, usize);

impl Serialize for InodeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = open::<S::Error>(self.1)?;
        let proofs = &self.0.proofs;
        let mut map = s.serialize_map(Some(if proofs.is_empty() { 1 } else { 2 }))?;
        map.serialize_entry("length", &self.0.length)?;
        if !proofs.is_empty() {
            map.serialize_entry("proofs", &InodeProofsJson(proofs, inner))?;
        }
        map.end()
    }
}

struct InodeProofsJson<'a>(&'a [(u8, InodeTree)], usize);

impl Serialize for InodeProofsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = open::<S::Error>(self.1)?;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (index, sub) in self.0 {
            seq.serialize_element(&PairJson(index, InodeTreeJson(sub, inner + 1), inner))?;
        }
        seq.end()
    }
}

/// `{"length": n, "segments": […], "proof": inode_tree}` (`segments` omitted when empty).
struct ExtenderJson<'a>(&'a Extender, usize);

impl Serialize for ExtenderJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = open::<S::Error>(self.1)?;
        let ext = self.0;
        let mut map = s.serialize_map(Some(if ext.segments.is_empty() { 2 } else { 3 }))?;
        map.serialize_entry("length", &ext.length)?;
        if !ext.segments.is_empty() {
            open::<S::Error>(inner)?;
            map.serialize_entry("segments", &ext.segments)?;
        }
        map.serialize_entry("proof", &InodeTreeJson(&ext.proof, inner))?;
        map.end()
    }
}

struct TreeJson<'a>(&'a Tree, usize);

impl Serialize for TreeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let depth = self.1;
        let inner = depth + 1;
        match self.0 {
            Tree::Contents(data) => tagged(
                s,
                depth,
                "Contents",
                &PairJson(BytesJson(data, inner + 1), MetaJson(inner + 1), inner),
            ),
            Tree::BlindedContents(hash) => {
                tagged(s, depth, "Blinded_contents", &PairJson(HashJson(hash), MetaJson(inner + 1), inner))
            }
            Tree::Node(entries) => tagged(s, depth, "Node", &EntriesJson(entries, inner)),
            Tree::BlindedNode(hash) => tagged(s, depth, "Blinded_node", &HashJson(hash)),
            Tree::Inode(inode) => tagged(s, depth, "Inode", &InodeJson(inode, inner)),
            Tree::Extender(ext) => tagged(s, depth, "Extender", &ExtenderJson(ext, inner)),
        }
    }
}

struct InodeTreeJson<'a>(&'a InodeTree, usize);

impl Serialize for InodeTreeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let depth = self.1;
        let inner = depth + 1;
        match self.0 {
            InodeTree::Blinded(hash) => tagged(s, depth, "Blinded_inode", &HashJson(hash)),
            InodeTree::Values(entries) => tagged(s, depth, "Inode_values", &EntriesJson(entries, inner)),
            InodeTree::Tree(inode) => tagged(s, depth, "Inode_tree", &InodeJson(inode, inner)),
            InodeTree::Extender(ext) => tagged(s, depth, "Inode_extender", &ExtenderJson(ext, inner)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stream proofs.

/// Reads a stream proof from Irmin's repr JSON (`Irmin.Type.to_json_string (Tree.Proof.t
/// Tree.Proof.stream_t)`): `{"before": KH, "after": KH, "state": [ELT, …]}` (a `Seq.t` is a
/// JSON array in repr), an element being `{"Contents": VALUE}`, `{"Node": [[STEP, KH], …]}`,
/// `{"Inode": {"length": n, "proofs": [[index, "Co…"], …]}}` or `{"Inode_extender": {"length":
/// n, "segments": […], "proof": "Co…"}}` (empty list fields omitted, as in tree proofs). The
/// version, which the JSON does not carry, is [`STREAM_VERSION`](crate::STREAM_VERSION).
pub fn read_stream(text: &str) -> Result<crate::StreamProof, JsonError> {
    let value: Value = serde_json::from_str(text).map_err(|err| {
        if err.is_syntax() && err.to_string().starts_with("recursion limit exceeded") {
            JsonError::TooDeep { limit: MAX_JSON_DEPTH }
        } else {
            JsonError::Syntax(err)
        }
    })?;
    let object = value.as_object().ok_or_else(|| shape("an object", "$"))?;
    let field = |name: &'static str| object.get(name).ok_or_else(|| shape(name, "$"));
    let elts = field("state")?
        .as_array()
        .ok_or_else(|| shape("an element list", "$.state"))?
        .iter()
        .enumerate()
        .map(|(k, elt)| stream_elt(elt, &alloc::format!("$.state[{k}]")))
        .collect::<Result<_, _>>()?;
    Ok(crate::StreamProof {
        version: crate::STREAM_VERSION,
        before: kinded(field("before")?, "$.before")?,
        after: kinded(field("after")?, "$.after")?,
        elts,
    })
}

fn stream_elt(value: &Value, at: &str) -> Result<crate::Elt, JsonError> {
    use crate::Elt;
    Ok(match variant(value, at)? {
        ("Contents", v) => Elt::Contents(bytes(v, at)?),
        ("Node", v) => Elt::Node(
            v.as_array()
                .ok_or_else(|| shape("an entry list", at))?
                .iter()
                .map(|item| {
                    let (step, kh) = pair(item, at)?;
                    Ok((bytes(step, at)?, kinded(kh, at)?))
                })
                .collect::<Result<_, JsonError>>()?,
        ),
        ("Inode", v) => {
            let object = v.as_object().ok_or_else(|| shape("an inode record", at))?;
            let proofs = list_field(object, "proofs")
                .iter()
                .map(|item| {
                    let (index, h) = pair(item, at)?;
                    Ok((small(index, at)?, hash(h, at)?))
                })
                .collect::<Result<_, JsonError>>()?;
            Elt::Inode { length: int(object.get("length"), at)?, proofs }
        }
        ("Inode_extender", v) => {
            let object = v.as_object().ok_or_else(|| shape("an extender record", at))?;
            let segments =
                list_field(object, "segments").iter().map(|s| small(s, at)).collect::<Result<_, _>>()?;
            let proof = hash(object.get("proof").ok_or_else(|| shape("proof", at))?, at)?;
            Elt::InodeExtender { length: int(object.get("length"), at)?, segments, proof }
        }
        _ => return Err(shape("a stream element constructor", at)),
    })
}

/// A JSON string literal (serde_json's escaping).
fn json_str(out: &mut String, text: &str) -> Result<(), JsonError> {
    out.push_str(&serde_json::to_string(text).map_err(JsonError::Syntax)?);
    Ok(())
}

fn put_kinded(out: &mut String, kh: &KindedHash) -> Result<(), JsonError> {
    match kh.kind {
        Kind::Node => {
            out.push_str("{\"Node\":");
            json_str(out, &hash_to_b58(&kh.hash))?;
            out.push('}');
        }
        Kind::Contents => {
            out.push_str("{\"Contents\":[");
            json_str(out, &hash_to_b58(&kh.hash))?;
            out.push_str(",{}]}");
        }
    }
    Ok(())
}

fn put_bytes(out: &mut String, data: &[u8]) -> Result<(), JsonError> {
    match core::str::from_utf8(data) {
        Ok(text) => json_str(out, text),
        Err(_) => {
            out.push_str("{\"base64\":");
            json_str(out, &BASE64.encode(data))?;
            out.push('}');
            Ok(())
        }
    }
}

fn put_list<T>(
    out: &mut String,
    items: &[T],
    mut f: impl FnMut(&mut String, &T) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    out.push('[');
    for (k, item) in items.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        f(out, item)?;
    }
    out.push(']');
    Ok(())
}

/// Writes a stream proof as Irmin's repr JSON (the form [`read_stream`] reads; compact, Irmin's
/// field order; `version` is not written). Elements do not nest, so no depth limit applies.
pub fn write_stream(proof: &crate::StreamProof) -> Result<String, JsonError> {
    use crate::Elt;
    use core::fmt::Write;
    let mut out = String::from("{\"before\":");
    put_kinded(&mut out, &proof.before)?;
    out.push_str(",\"after\":");
    put_kinded(&mut out, &proof.after)?;
    out.push_str(",\"state\":");
    put_list(&mut out, &proof.elts, |out, elt| {
        match elt {
            Elt::Contents(data) => {
                out.push_str("{\"Contents\":");
                put_bytes(out, data)?;
            }
            Elt::Node(entries) => {
                out.push_str("{\"Node\":");
                put_list(out, entries, |out, (step, kh)| {
                    out.push('[');
                    put_bytes(out, step)?;
                    out.push(',');
                    put_kinded(out, kh)?;
                    out.push(']');
                    Ok(())
                })?;
            }
            Elt::Inode { length, proofs } => {
                let _ = write!(out, "{{\"Inode\":{{\"length\":{length}");
                if !proofs.is_empty() {
                    out.push_str(",\"proofs\":");
                    put_list(out, proofs, |out, (index, h)| {
                        let _ = write!(out, "[{index},");
                        json_str(out, &hash_to_b58(h))?;
                        out.push(']');
                        Ok(())
                    })?;
                }
                out.push('}');
            }
            Elt::InodeExtender { length, segments, proof } => {
                let _ = write!(out, "{{\"Inode_extender\":{{\"length\":{length}");
                if !segments.is_empty() {
                    out.push_str(",\"segments\":");
                    put_list(out, segments, |out, segment| {
                        let _ = write!(out, "{segment}");
                        Ok(())
                    })?;
                }
                out.push_str(",\"proof\":");
                json_str(out, &hash_to_b58(proof))?;
                out.push('}');
            }
        }
        out.push('}');
        Ok(())
    })?;
    out.push('}');
    Ok(out)
}
