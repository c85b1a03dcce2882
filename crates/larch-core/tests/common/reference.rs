//! An independent reference implementation of the Tezos context hash, written from the spec's
//! appendix A (`partition`, `dir_hash`, the OCaml seeded hash) and working only on
//! (name, kind, hash) triples. It shares no code with larch-core's `schema`, `ocaml_hash` or `tree`
//! modules, so agreement between the two is evidence, not tautology.

#![allow(dead_code)]

use std::collections::BTreeMap;

/// A 32-byte hash.
pub type H32 = [u8; 32];

/// A whole tree as `path → value` bindings.
pub type Bindings = BTreeMap<Vec<Vec<u8>>, Vec<u8>>;

/// One directory entry: name, whether it is a sub-directory, child hash.
pub type Triple = (Vec<u8>, bool, H32);

/// BLAKE2b with a 32-byte digest.
pub fn blake(bytes: &[u8]) -> H32 {
    let digest = blake2b_simd::Params::new().hash_length(32).hash(bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_bytes());
    out
}

fn leb(mut n: u64, out: &mut Vec<u8>) {
    while n >= 128 {
        out.push(0x80 | (n & 0x7f) as u8);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Hash of contents `v`: `blake(u64be(len) ‖ v)`.
pub fn contents_hash(v: &[u8]) -> H32 {
    let mut b = (v.len() as u64).to_be_bytes().to_vec();
    b.extend_from_slice(v);
    blake(&b)
}

/// The flat (V1) pre-image of a directory.
pub fn flat_pre_image(entries: &[Triple]) -> Vec<u8> {
    let mut sorted = entries.to_vec();
    sorted.sort();
    let mut b = (sorted.len() as u64).to_be_bytes().to_vec();
    for (name, is_node, h) in &sorted {
        b.extend_from_slice(if *is_node { &[0u8; 8] } else { &[0xff, 0, 0, 0, 0, 0, 0, 0] });
        leb(name.len() as u64, &mut b);
        b.extend_from_slice(name);
        b.extend_from_slice(&32u64.to_be_bytes());
        b.extend_from_slice(h);
    }
    b
}

fn rotl(x: u32, r: u32) -> u32 {
    x.rotate_left(r)
}

fn mix(h: u32, w: u32) -> u32 {
    let w = rotl(w.wrapping_mul(0xcc9e2d51), 15).wrapping_mul(0x1b873593);
    rotl(h ^ w, 13).wrapping_mul(5).wrapping_add(0xe6546b64)
}

/// OCaml `Hashtbl.seeded_hash seed s` (appendix A's `ocaml_hash`).
pub fn ocaml_hash(seed: u32, s: &[u8]) -> u32 {
    let mut h = seed;
    let n = s.len();
    let full = n - n % 4;
    let mut i = 0;
    while i < full {
        h = mix(h, u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]));
        i += 4;
    }
    if !n.is_multiple_of(4) {
        let mut w = 0u32;
        for (k, byte) in s[full..].iter().enumerate() {
            w |= u32::from(*byte) << (8 * k);
        }
        h = mix(h, w);
    }
    h ^= n as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85ebca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2ae35);
    h ^= h >> 16;
    h & 0x3fffffff
}

/// One node of the canonical partition (spec §4.2.1), with its hash.
#[derive(Debug)]
pub enum Inode {
    /// A `Values` leaf: entries sorted by name.
    Values { hash: H32, entries: Vec<Triple> },
    /// A `Tree`: depth, total length, non-empty buckets by index.
    Tree { hash: H32, depth: u32, length: u64, children: Vec<(u32, Inode)> },
}

impl Inode {
    /// This inode's hash.
    pub fn hash(&self) -> H32 {
        match self {
            Inode::Values { hash, .. } | Inode::Tree { hash, .. } => *hash,
        }
    }
}

/// `partition(depth, entries)` with 32 buckets and Values capacity 32, hashing as it goes.
pub fn partition(depth: u32, entries: &[Triple]) -> Inode {
    if entries.len() <= 32 {
        let mut sorted = entries.to_vec();
        sorted.sort();
        let mut b = vec![0x00];
        leb(sorted.len() as u64, &mut b);
        for (name, is_node, h) in &sorted {
            leb(name.len() as u64, &mut b);
            b.extend_from_slice(name);
            b.push(if *is_node { 0 } else { 1 });
            b.extend_from_slice(h);
        }
        return Inode::Values { hash: blake(&b), entries: sorted };
    }
    let mut buckets: BTreeMap<u32, Vec<Triple>> = BTreeMap::new();
    for e in entries {
        buckets.entry(ocaml_hash(depth, &e.0) % 32).or_default().push(e.clone());
    }
    let mut b = vec![0x01];
    leb(u64::from(depth), &mut b);
    leb(entries.len() as u64, &mut b);
    leb(buckets.len() as u64, &mut b);
    let mut children = Vec::new();
    for (index, bucket) in buckets {
        let child = partition(depth + 1, &bucket);
        leb(u64::from(index), &mut b);
        b.extend_from_slice(&child.hash());
        children.push((index, child));
    }
    Inode::Tree { hash: blake(&b), depth, length: entries.len() as u64, children }
}

/// The directory hash: flat up to 256 entries, else the depth-0 partition's hash.
pub fn dir_hash(entries: &[Triple]) -> H32 {
    if entries.len() <= 256 { blake(&flat_pre_image(entries)) } else { partition(0, entries).hash() }
}

/// Hash of a whole tree given as `path → value` bindings (a binding at the empty path makes the
/// tree a contents value), computed recursively with [`dir_hash`].
pub fn model_hash(values: &Bindings) -> H32 {
    if let Some(v) = values.get(&Vec::<Vec<u8>>::new()) {
        return contents_hash(v);
    }
    let mut children: BTreeMap<Vec<u8>, Bindings> = BTreeMap::new();
    for (path, value) in values {
        if let Some((first, rest)) = path.split_first() {
            children.entry(first.clone()).or_default().insert(rest.to_vec(), value.clone());
        }
    }
    let triples: Vec<Triple> = children
        .into_iter()
        .map(|(name, sub)| {
            let is_node = !sub.contains_key(&Vec::<Vec<u8>>::new());
            (name, is_node, model_hash(&sub))
        })
        .collect();
    dir_hash(&triples)
}

/// The order in which Irmin lists a stored directory holding `names` (unique): the order of its
/// inode layout, [`partition`]'s shape without the hashes. At most 32 names: sorted; more: the 32
/// buckets of `ocaml_hash(depth, name) % 32` in index order, each by the same rule at `depth + 1`.
pub fn list_order(names: &[Vec<u8>]) -> Vec<Vec<u8>> {
    fn walk(depth: u32, names: &[Vec<u8>], out: &mut Vec<Vec<u8>>) {
        if names.len() <= 32 {
            let mut sorted = names.to_vec();
            sorted.sort();
            out.extend(sorted);
            return;
        }
        let mut buckets: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        for name in names {
            buckets.entry(ocaml_hash(depth, name) % 32).or_default().push(name.clone());
        }
        for bucket in buckets.values() {
            walk(depth + 1, bucket, out);
        }
    }
    let mut out = Vec::with_capacity(names.len());
    walk(0, names, &mut out);
    out
}
