//! Proofs of the binary-tree context (Octez's `Tree2`: `Context_binary`, inodes of 2 buckets,
//! directories of at most 2 entries hashed flat) and their `V1.Tree2` / `V2.Tree2` encodings.
//!
//! No Irmin or Octez vectors exist for `Tree2`, so everything here is checked against an
//! **independent construction written in this file from the spec** (`docs/merkle-proofs-spec.md`
//! §1.3, §3.1, §5 and the hash spec): its own model of a binary context (OCaml's seeded hash,
//! the flat, `Values` and `Tree` pre-images), its own proof builder in Irmin's shape (one pointer
//! per non-empty bucket, extender compression) and its own byte encoders. larch's decoders must
//! read those bytes to that proof, its encoders write the same bytes, and its verifier must accept
//! the proof with the model's hashes and results, and reject every alteration. Seeded
//! (`LARCH_SEED` replays a run).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_proof::encoding::tree2;
use larch_proof::{
    DecodeError, Extender, Hash, Inode, InodeTree, Kind, KindedHash, Op, OpResult, Proof, Tree, VerifyError,
};
use larch_testkit::fuzz::{PeakAlloc, largest_allocation, mutated};
use larch_testkit::rand::Rng;
use larch_testkit::seed::seeded_rng;
use std::collections::BTreeMap;

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

// ---- The independent model of a binary context ------------------------------------------------

#[derive(Clone, Debug)]
enum T {
    V(Vec<u8>),
    D(BTreeMap<Vec<u8>, T>),
}

fn blake(bytes: &[u8]) -> [u8; 32] {
    let digest = blake2b_simd::Params::new().hash_length(32).hash(bytes);
    digest.as_bytes().try_into().unwrap()
}

fn leb(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// OCaml's `Hashtbl.seeded_hash seed s` on a string (MurmurHash3-style mixing, 30 bits).
fn seeded(seed: u32, s: &[u8]) -> u32 {
    let mix = |h: u32, d: u32| -> u32 {
        let d = d.wrapping_mul(0xcc9e2d51).rotate_left(15).wrapping_mul(0x1b873593);
        (h ^ d).rotate_left(13).wrapping_mul(5).wrapping_add(0xe6546b64)
    };
    let mut h = seed;
    let mut i = 0;
    while i + 4 <= s.len() {
        h = mix(h, u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]));
        i += 4;
    }
    if i < s.len() {
        let mut w = 0u32;
        for (k, b) in s[i..].iter().enumerate() {
            w |= u32::from(*b) << (8 * k);
        }
        h = mix(h, w);
    }
    h ^= s.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85ebca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2ae35);
    h ^= h >> 16;
    h & 0x3fff_ffff
}

fn index(depth: u8, name: &[u8]) -> u8 {
    (seeded(u32::from(depth), name) % 2) as u8
}

fn hash_of(t: &T) -> (bool, [u8; 32]) {
    match t {
        T::V(v) => {
            let mut pre = (v.len() as u64).to_be_bytes().to_vec();
            pre.extend_from_slice(v);
            (false, blake(&pre))
        }
        T::D(map) => (true, dir_hash(map)),
    }
}

type Row<'a> = (&'a [u8], &'a T);

fn dir_hash(map: &BTreeMap<Vec<u8>, T>) -> [u8; 32] {
    let rows: Vec<Row<'_>> = map.iter().map(|(n, t)| (n.as_slice(), t)).collect();
    if rows.len() <= 2 {
        let mut pre = (rows.len() as u64).to_be_bytes().to_vec();
        for (name, t) in &rows {
            let (node, h) = hash_of(t);
            pre.extend_from_slice(if node { &[0; 8] } else { &[0xff, 0, 0, 0, 0, 0, 0, 0] });
            leb(&mut pre, name.len() as u64);
            pre.extend_from_slice(name);
            pre.extend_from_slice(&32u64.to_be_bytes());
            pre.extend_from_slice(&h);
        }
        return blake(&pre);
    }
    inode_hash(0, &rows)
}

fn buckets<'a>(depth: u8, rows: &[Row<'a>]) -> [Vec<Row<'a>>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for row in rows {
        out[usize::from(index(depth, row.0))].push(*row);
    }
    out
}

fn inode_hash(depth: u8, rows: &[Row<'_>]) -> [u8; 32] {
    if depth > 0 && rows.len() <= 2 {
        let mut pre = vec![0u8];
        leb(&mut pre, rows.len() as u64);
        for (name, t) in rows {
            let (node, h) = hash_of(t);
            leb(&mut pre, name.len() as u64);
            pre.extend_from_slice(name);
            pre.push(if node { 0 } else { 1 });
            pre.extend_from_slice(&h);
        }
        return blake(&pre);
    }
    let b = buckets(depth, rows);
    let mut pre = vec![1u8];
    leb(&mut pre, u64::from(depth));
    leb(&mut pre, rows.len() as u64);
    leb(&mut pre, b.iter().filter(|x| !x.is_empty()).count() as u64);
    for (i, bucket) in b.iter().enumerate() {
        if !bucket.is_empty() {
            leb(&mut pre, i as u64);
            pre.extend_from_slice(&inode_hash(depth + 1, bucket));
        }
    }
    blake(&pre)
}

// ---- Its proofs, in Irmin's shape (spec §1.3) -------------------------------------------------

fn blind(t: &T) -> Tree {
    match hash_of(t) {
        (false, h) => Tree::BlindedContents(Hash(h)),
        (true, h) => Tree::BlindedNode(Hash(h)),
    }
}

/// The proof tree of `find path` in `t` (the directory `t` is opened when `path` is not empty).
fn prove(t: &T, path: &[Vec<u8>]) -> Tree {
    match (t, path.split_first()) {
        (T::V(v), None) => Tree::Contents(v.clone()),
        (_, None) | (T::V(_), Some(_)) => blind(t),
        (T::D(map), Some((step, rest))) => {
            let rows: Vec<Row<'_>> = map.iter().map(|(n, t)| (n.as_slice(), t)).collect();
            let entries = |rows: &[Row<'_>]| -> Vec<(Vec<u8>, Tree)> {
                rows.iter()
                    .map(|(n, c)| (n.to_vec(), if *n == step.as_slice() { prove(c, rest) } else { blind(c) }))
                    .collect()
            };
            if rows.len() <= 2 {
                return Tree::Node(entries(&rows));
            }
            match prove_inode(0, &rows, step, rest) {
                InodeTree::Tree(inode) => Tree::Inode(inode),
                InodeTree::Extender(ext) => Tree::Extender(ext),
                other => panic!("a root inode of {} entries proved as {other:?}", rows.len()),
            }
        }
    }
}

fn prove_inode(depth: u8, rows: &[Row<'_>], step: &[u8], rest: &[Vec<u8>]) -> InodeTree {
    if depth > 0 && rows.len() <= 2 {
        return InodeTree::Values(
            rows.iter()
                .map(|(n, c)| (n.to_vec(), if *n == step { prove(c, rest) } else { blind(c) }))
                .collect(),
        );
    }
    let mut proofs = Vec::new();
    for (i, bucket) in buckets(depth, rows).iter().enumerate() {
        if bucket.is_empty() {
            continue;
        }
        let child = if i as u8 == index(depth, step) {
            prove_inode(depth + 1, bucket, step, rest)
        } else {
            InodeTree::Blinded(Hash(inode_hash(depth + 1, bucket)))
        };
        proofs.push((i as u8, child));
    }
    let length = rows.len() as u64;
    // Extender compression (Irmin's `iproof_of_inode`): a single pointer to a single-pointer
    // inode, or to an extender, becomes (or extends) an extender.
    if proofs.len() == 1 {
        let (i, child) = proofs.pop().unwrap();
        return match child {
            InodeTree::Tree(Inode { proofs: inner, .. }) if inner.len() == 1 => {
                let (j, p) = inner.into_iter().next().unwrap();
                InodeTree::Extender(Extender { length, segments: vec![i, j], proof: Box::new(p) })
            }
            InodeTree::Extender(ext) => {
                let mut segments = vec![i];
                segments.extend(ext.segments);
                InodeTree::Extender(Extender { length, segments, proof: ext.proof })
            }
            other => InodeTree::Tree(Inode { length, proofs: vec![(i, other)] }),
        };
    }
    InodeTree::Tree(Inode { length, proofs })
}

// ---- Its byte encoders (spec §5.1–5.3, Tree2) ---------------------------------------------------

fn segs(segments: &[u8]) -> Vec<u8> {
    let mut bits: Vec<u8> = segments.to_vec();
    bits.push(1);
    while !bits.len().is_multiple_of(8) {
        bits.push(0);
    }
    let bytes: Vec<u8> = bits.chunks(8).map(|c| c.iter().fold(0u8, |a, b| (a << 1) | b)).collect();
    let mut out = vec![bytes.len() as u8];
    out.extend(bytes);
    out
}

fn slot_pair(inode: &Inode, empty: u8, f: &dyn Fn(&InodeTree) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    for want in 0..2u8 {
        match inode.proofs.iter().find(|(i, _)| *i == want) {
            Some((_, c)) => out.extend(f(c)),
            None => out.push(empty),
        }
    }
    out
}

fn v1_list(entries: &[(Vec<u8>, Tree)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (n, t) in entries {
        body.push(n.len() as u8);
        body.extend_from_slice(n);
        body.extend(v1_tree(t));
    }
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

fn v1_tree(t: &Tree) -> Vec<u8> {
    let mut out = Vec::new();
    match t {
        Tree::Contents(v) => {
            out.push(0);
            out.extend((v.len() as u32).to_be_bytes());
            out.extend_from_slice(v);
        }
        Tree::BlindedContents(h) => out.extend([&[1u8][..], &h.0].concat()),
        Tree::Node(e) => out.extend([vec![2u8], v1_list(e)].concat()),
        Tree::BlindedNode(h) => out.extend([&[3u8][..], &h.0].concat()),
        Tree::Inode(i) => {
            out.push(4);
            out.extend((i.length as i64).to_be_bytes());
            out.extend(slot_pair(i, 4, &v1_itree));
        }
        Tree::Extender(x) => {
            out.push(5);
            out.extend((x.length as i64).to_be_bytes());
            out.extend(segs(&x.segments));
            out.extend(v1_itree(&x.proof));
        }
    }
    out
}

fn v1_itree(t: &InodeTree) -> Vec<u8> {
    let mut out = Vec::new();
    match t {
        InodeTree::Blinded(h) => out.extend([&[0u8][..], &h.0].concat()),
        InodeTree::Values(e) => out.extend([vec![1u8], v1_list(e)].concat()),
        InodeTree::Tree(i) => {
            out.push(2);
            out.extend((i.length as i64).to_be_bytes());
            out.extend(slot_pair(i, 4, &v1_itree));
        }
        InodeTree::Extender(x) => {
            out.push(3);
            out.extend((x.length as i64).to_be_bytes());
            out.extend(segs(&x.segments));
            out.extend(v1_itree(&x.proof));
        }
    }
    out
}

fn v2_len(n: u64) -> (u8, Vec<u8>) {
    if n < 256 {
        (0, vec![n as u8])
    } else if n < 65536 {
        (1, (n as u16).to_be_bytes().to_vec())
    } else {
        (2, (n as u32).to_be_bytes().to_vec())
    }
}

fn v2_list(entries: &[(Vec<u8>, Tree)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (n, t) in entries {
        body.push(n.len() as u8);
        body.extend_from_slice(n);
        body.extend(v2_tree(t));
    }
    let mut out = if entries.len() <= 2 {
        vec![0x80 | entries.len() as u8]
    } else {
        [vec![0x83], (body.len() as u32).to_be_bytes().to_vec()].concat()
    };
    out.extend(body);
    out
}

fn v2_inode(i: &Inode) -> Vec<u8> {
    let (class, payload) = v2_len(i.length);
    [vec![class], payload, slot_pair(i, 0xe0, &v2_itree)].concat()
}

fn v2_ext(base: u8, x: &Extender) -> Vec<u8> {
    let (class, payload) = v2_len(x.length);
    [vec![base | class], payload, segs(&x.segments), v2_itree(&x.proof)].concat()
}

fn v2_tree(t: &Tree) -> Vec<u8> {
    match t {
        Tree::Contents(v) if v.len() < 256 => [vec![0xc0, v.len() as u8], v.clone()].concat(),
        Tree::Contents(v) => [vec![0xc1], (v.len() as u16).to_be_bytes().to_vec(), v.clone()].concat(),
        Tree::BlindedContents(h) => [&[0xc8u8][..], &h.0].concat(),
        Tree::Node(e) => v2_list(e),
        Tree::BlindedNode(h) => [&[0xd0u8][..], &h.0].concat(),
        Tree::Inode(i) => v2_inode(i),
        Tree::Extender(x) => v2_ext(0xd8, x),
    }
}

fn v2_itree(t: &InodeTree) -> Vec<u8> {
    match t {
        InodeTree::Blinded(h) => [&[0xc0u8][..], &h.0].concat(),
        InodeTree::Values(e) => v2_list(e),
        InodeTree::Tree(i) => v2_inode(i),
        InodeTree::Extender(x) => v2_ext(0xd0, x),
    }
}

fn v1_bytes(p: &Proof) -> Vec<u8> {
    let kh = |k: &KindedHash| [vec![u8::from(k.kind == Kind::Node)], k.hash.0.to_vec()].concat();
    [p.version.to_be_bytes().to_vec(), kh(&p.before), kh(&p.after), v1_tree(&p.state)].concat()
}

fn v2_bytes(p: &Proof) -> Vec<u8> {
    let bits = u8::from(p.before.kind == Kind::Node) | (u8::from(p.after.kind == Kind::Node) << 1);
    [
        vec![bits],
        p.version.to_be_bytes().to_vec(),
        p.before.hash.0.to_vec(),
        p.after.hash.0.to_vec(),
        v2_tree(&p.state),
    ]
    .concat()
}

// ---- Test material -------------------------------------------------------------------------------

/// A random binary context: `dir/` of `n` values (and one sub-directory), `x` beside it.
fn random_context(rng: &mut impl Rng, n: usize) -> T {
    let mut dir = BTreeMap::new();
    for i in 0..n {
        let len = rng.random_range(0..300);
        dir.insert(format!("k{i}").into_bytes(), T::V((0..len).map(|_| rng.random()).collect()));
    }
    let mut sub = BTreeMap::new();
    sub.insert(b"deep".to_vec(), T::V(b"deep value".to_vec()));
    dir.insert(b"sub".to_vec(), T::D(sub));
    let mut root = BTreeMap::new();
    root.insert(b"dir".to_vec(), T::D(dir));
    root.insert(b"x".to_vec(), T::V(b"beside".to_vec()));
    T::D(root)
}

fn find(t: &T, path: &[Vec<u8>]) -> Option<Vec<u8>> {
    match (t, path.split_first()) {
        (T::V(v), None) => Some(v.clone()),
        (T::D(map), Some((s, rest))) => find(map.get(s)?, rest),
        _ => None,
    }
}

fn add(t: &mut T, path: &[Vec<u8>], value: Vec<u8>) {
    let (step, rest) = path.split_first().unwrap();
    let T::D(map) = t else { panic!("add through a value") };
    if rest.is_empty() {
        map.insert(step.clone(), T::V(value));
    } else {
        add(map.get_mut(step).unwrap(), rest, value);
    }
}

fn node_hash(t: &T) -> KindedHash {
    KindedHash { kind: Kind::Node, hash: Hash(hash_of(t).1) }
}

fn proof_of_find(t: &T, path: &[Vec<u8>]) -> Proof {
    let h = node_hash(t);
    Proof { version: 2, before: h, after: h, state: prove(t, path) }
}

/// Paths to prove: present values, absent names (in every bucket pattern), through a value.
fn paths(n: usize) -> Vec<Vec<Vec<u8>>> {
    let p = |steps: &[&str]| steps.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let mut out = vec![p(&["x"]), p(&["dir", "sub", "deep"]), p(&["dir", "x", "below"]), p(&["nope"])];
    for i in (0..n).step_by(3) {
        out.push(vec![b"dir".to_vec(), format!("k{i}").into_bytes()]);
    }
    for i in 0..6 {
        out.push(vec![b"dir".to_vec(), format!("absent{i}").into_bytes()]);
    }
    out
}

// ---- Tests ----------------------------------------------------------------------------------------

#[test]
fn encodings_match_the_independent_encoder_and_round_trip() {
    let (mut rng, seed) = seeded_rng("tree2 encodings", 0x7ee2);
    let (mut extenders, mut inodes, mut proofs) = (0, 0, 0);
    for n in [0usize, 1, 2, 3, 5, 12, 40, 130] {
        let t = random_context(&mut rng, n);
        for path in paths(n) {
            let proof = proof_of_find(&t, &path);
            let stats = proof.state.stats();
            extenders += stats.extender + stats.inode_extender;
            inodes += stats.inode + stats.inode_tree;
            proofs += 1;
            let (v1, v2) = (v1_bytes(&proof), v2_bytes(&proof));
            assert_eq!(tree2::v1::encode(&proof).unwrap(), v1, "seed {seed} n {n} {path:?}: V1 bytes");
            assert_eq!(tree2::v2::encode(&proof).unwrap(), v2, "seed {seed} n {n} {path:?}: V2 bytes");
            assert_eq!(tree2::v1::decode(&v1).unwrap(), proof, "seed {seed} n {n} {path:?}: V1 decode");
            assert_eq!(tree2::v2::decode(&v2).unwrap(), proof, "seed {seed} n {n} {path:?}: V2 decode");
        }
    }
    eprintln!("seed {seed}: {proofs} proofs, {inodes} inodes, {extenders} extenders");
    assert!(extenders > 0 && inodes > 0, "the material has inodes and extenders");
}

#[test]
fn proofs_verify_with_the_independent_hashes_and_results() {
    let (mut rng, seed) = seeded_rng("tree2 verify", 0x2b17);
    let mut checked = 0;
    for n in [0usize, 1, 2, 3, 7, 12, 40, 130] {
        let t = random_context(&mut rng, n);
        for path in paths(n) {
            let proof = tree2::v2::decode(&v2_bytes(&proof_of_find(&t, &path))).unwrap();
            let verified = larch_proof::verify_tree2(&proof, &[Op::Find(path.clone())])
                .unwrap_or_else(|e| panic!("seed {seed} n {n} {path:?}: {e}"));
            assert_eq!(
                verified.results,
                vec![OpResult::Value(find(&t, &path))],
                "seed {seed} n {n} {path:?}"
            );
            assert_eq!(verified.before, node_hash(&t));
            // An update the proof covers (it reads nothing more than the find): the after hash is
            // the model's hash of the updated context (splits of 2-entry leaves, new buckets, a
            // flat root growing into an inode).
            if find(&t, &path[..path.len() - 1]).is_none() && path.len() == 2 && path[0] == b"dir" {
                let mut after = t.clone();
                add(&mut after, &path, b"new".to_vec());
                let mut updated = proof.clone();
                updated.after = node_hash(&after);
                let ops = [Op::Find(path.clone()), Op::Add(path.clone(), b"new".to_vec())];
                let verified = larch_proof::verify_tree2(&updated, &ops)
                    .unwrap_or_else(|e| panic!("seed {seed} n {n} {path:?} add: {e}"));
                assert_eq!(verified.after, node_hash(&after), "seed {seed} n {n} {path:?}");
                checked += 1;
            }
            // A read outside the proof needs a blinded part.
            if n > 2 && path.len() == 2 && path[0] == b"dir" {
                let other = vec![b"dir".to_vec(), b"sub".to_vec(), b"deep".to_vec()];
                let result = larch_proof::verify_tree2(&proof, &[Op::Find(other)]);
                assert!(
                    matches!(result, Err(VerifyError::Blinded { .. })),
                    "seed {seed} n {n} {path:?}: {result:?}"
                );
            }
        }
    }
    assert!(checked >= 20, "{checked} updates checked");
}

#[test]
fn tampered_proofs_are_rejected() {
    let (mut rng, seed) = seeded_rng("tree2 tampered", 0x7a3e);
    let t = random_context(&mut rng, 40);
    let path = vec![b"dir".to_vec(), b"k9".to_vec()];
    let proof = proof_of_find(&t, &path);
    let ops = [Op::Find(path.clone())];
    assert!(larch_proof::verify_tree2(&proof, &ops).is_ok());
    // The 32-ary verifier and version: a binary proof is not a Tree32 proof, and vice versa.
    assert!(matches!(larch_proof::verify(&proof, &ops), Err(VerifyError::UnsupportedVersion(2))));
    let mut as32 = proof.clone();
    as32.version = 0;
    assert!(matches!(larch_proof::verify_tree2(&as32, &ops), Err(VerifyError::UnsupportedVersion(0))));
    assert!(larch_proof::verify(&as32, &ops).is_err(), "hashed with 32 buckets it is another tree");
    // Claimed hashes.
    let mut bad = proof.clone();
    bad.before.hash.0[0] ^= 1;
    assert!(matches!(larch_proof::verify_tree2(&bad, &ops), Err(VerifyError::BeforeMismatch { .. })));
    let mut bad = proof.clone();
    bad.after.hash.0[31] ^= 1;
    assert!(matches!(larch_proof::verify_tree2(&bad, &ops), Err(VerifyError::AfterMismatch { .. })));
    // Every single-byte change of the V2 and V1 bytes past the version is undecodable or rejected.
    let (mut undecodable, mut rejected) = (0, 0);
    for (bytes, decode) in [
        (v2_bytes(&proof), tree2::v2::decode as fn(&[u8]) -> Result<Proof, DecodeError>),
        (v1_bytes(&proof), tree2::v1::decode),
    ] {
        let version_at = if bytes == v2_bytes(&proof) { 1..3 } else { 0..2 };
        for at in 0..bytes.len() {
            if version_at.contains(&at) {
                continue;
            }
            let mut tampered = bytes.clone();
            tampered[at] ^= 1 << rng.random_range(0..8);
            match decode(&tampered) {
                Ok(decoded) => {
                    assert!(
                        larch_proof::verify_tree2(&decoded, &ops).is_err(),
                        "seed {seed}: a change at {at} of {} still verifies",
                        bytes.len()
                    );
                    rejected += 1;
                }
                Err(_) => undecodable += 1,
            }
        }
    }
    eprintln!("seed {seed}: {undecodable} undecodable, {rejected} decoded and rejected");
    assert!(undecodable > 0 && rejected > 100);
    // Structural rules with 2 buckets: an index of 2, a 3-entry Values leaf.
    let bad_index = Proof {
        state: Tree::Inode(Inode { length: 3, proofs: vec![(2, InodeTree::Blinded(Hash([0; 32])))] }),
        ..proof.clone()
    };
    assert!(matches!(larch_proof::verify_tree2(&bad_index, &[]), Err(VerifyError::Malformed(_))));
    assert!(tree2::v2::encode(&bad_index).is_err(), "not a binary inode");
    let three: Vec<(Vec<u8>, Tree)> =
        (0..3u8).map(|i| (vec![b'a' + i], Tree::BlindedContents(Hash([i; 32])))).collect();
    let bad_values = Proof {
        state: Tree::Inode(Inode { length: 3, proofs: vec![(0, InodeTree::Values(three))] }),
        ..proof
    };
    assert!(matches!(larch_proof::verify_tree2(&bad_values, &[]), Err(VerifyError::Malformed(_))));
}

#[test]
fn decoders_refuse_bad_input_and_bound_sizes_and_nesting() {
    let hash = [7u8; 32];
    let header_v2 = |tree: &[u8]| [vec![3u8, 0, 2], hash.to_vec(), hash.to_vec(), tree.to_vec()].concat();
    let header_v1 =
        |tree: &[u8]| [vec![0u8, 2, 1], hash.to_vec(), vec![1], hash.to_vec(), tree.to_vec()].concat();
    // An inode with two empty slots.
    assert!(matches!(
        tree2::v2::decode(&header_v2(&[0x00, 5, 0xe0, 0xe0])),
        Err(DecodeError::Invalid { .. })
    ));
    assert!(matches!(
        tree2::v1::decode(&header_v1(&[4, 0, 0, 0, 0, 0, 0, 0, 5, 4, 4])),
        Err(DecodeError::Invalid { .. })
    ));
    // Tree32's tags that Tree2 does not have: a sparse inode with pointers, a 6-bit node count.
    for tag in [0x04u8, 0x41, 0x84, 0xbf] {
        assert!(
            matches!(tree2::v2::decode(&header_v2(&[tag, 0])), Err(DecodeError::BadTag { .. })),
            "{tag:02x}"
        );
    }
    // A long list whose size is above 2^30 - 1, or beyond the input: errors, no allocation.
    assert!(tree2::v2::decode(&header_v2(&[0x83, 0x7f, 0xff, 0xff, 0xff])).is_err());
    assert!(tree2::v2::decode(&header_v2(&[0x83, 0x00, 0x10, 0x00, 0x00, 1, b'a'])).is_err());
    assert!(tree2::v1::decode(&header_v1(&[2, 0x3f, 0xff, 0xff, 0xff])).is_err());
    // Bad segment packings; trailing bytes.
    assert!(tree2::v2::decode(&header_v2(&[0xd8, 9, 1, 0x00, 0xc0])).is_err());
    let ok = header_v2(&[0x80]);
    assert!(tree2::v2::decode(&ok).is_ok());
    assert!(matches!(tree2::v2::decode(&[ok, vec![0]].concat()), Err(DecodeError::TrailingBytes { .. })));
    // Nesting: a chain of 10,000 inodes is an error at the limit, not a stack overflow.
    let mut deep = Vec::new();
    for _ in 0..10_000 {
        deep.extend([0x00, 3]);
    }
    deep.extend([0xc0]);
    deep.extend(hash);
    assert!(matches!(tree2::v2::decode(&header_v2(&deep)), Err(DecodeError::TooDeep { .. })));
    // The longest segment list (255 bytes, 2,039 segments) decodes; the verifier bounds it.
    let mut segments = vec![0xd8, 9, 255];
    segments.extend(vec![0u8; 254]);
    segments.push(0x01);
    segments.extend([0xc0]);
    segments.extend(hash);
    let decoded = tree2::v2::decode(&header_v2(&segments)).unwrap();
    let Tree::Extender(ext) = &decoded.state else { panic!("an extender") };
    assert_eq!(ext.segments.len(), 2039);
    assert!(larch_proof::verify_tree2(&decoded, &[]).is_err());
}

/// The structured mutation fuzzer (docs/fuzzing.md) on the two `Tree2` decoders, the decoded
/// proofs then verified: every input decodes or fails typed, never panics, and allocates at most
/// 4 KiB + 64 x its size at once. `LARCH_FUZZ_ITERS` multiplies the inputs; `LARCH_SEED` replays.
#[test]
fn decoders_survive_mutations() {
    let (mut rng, seed) = seeded_rng("fuzz tree2 decoders", 0xf0e2);
    let factor: u64 = std::env::var("LARCH_FUZZ_ITERS").ok().and_then(|t| t.parse().ok()).unwrap_or(1);
    let (mut v1_corpus, mut v2_corpus) = (Vec::new(), Vec::new());
    for n in [0usize, 3, 12, 40] {
        let t = random_context(&mut rng, n);
        for path in paths(n).into_iter().take(4) {
            let proof = proof_of_find(&t, &path);
            v1_corpus.push(v1_bytes(&proof));
            v2_corpus.push(v2_bytes(&proof));
        }
    }
    let (mut decoded, mut refused, mut largest) = (0u64, 0u64, 0usize);
    for round in 0..5_000 * factor {
        let v2 = round % 2 == 0;
        let input = mutated(&mut rng, if v2 { &v2_corpus } else { &v1_corpus });
        let (outcome, peak) = largest_allocation(|| {
            let proof = if v2 { tree2::v2::decode(&input) } else { tree2::v1::decode(&input) };
            proof.map(|proof| {
                larch_proof::verify_tree2(&proof, &[Op::Find(vec![b"dir".to_vec(), b"k3".to_vec()])])
            })
        });
        assert!(peak <= 4096 + 64 * input.len(), "seed {seed} round {round}: {peak} bytes allocated");
        largest = largest.max(peak);
        match outcome {
            Ok(_) => decoded += 1,
            Err(_) => refused += 1,
        }
    }
    eprintln!("seed {seed}: {decoded} decoded, {refused} refused, largest allocation {largest} B");
    assert!(decoded > 100 && refused > 100);
}
