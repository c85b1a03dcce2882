//! The size-class boundaries of the V1 and V2 encodings (spec §5, §7.6–7.7), built by hand: dense
//! pointer arrays from 16 pointers in V1 and 15 in V2, V2 node lists in long form from 63 entries,
//! V2 value lengths in u8/u16/u32, V2 inode length classes; and non-canonical forms Octez accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_proof::encoding::{v1, v2};
use larch_proof::{Extender, Hash, Inode, InodeTree, Kind, KindedHash, Proof, Tree};

fn proof(state: Tree) -> Proof {
    let key = KindedHash { kind: Kind::Node, hash: Hash([9; 32]) };
    Proof { version: 0, before: key, after: key, state }
}

/// Offset of the state in V1 (version + 2 kinded hashes) and V2 (tag + version + 2 hashes).
const V1_STATE: usize = 2 + 33 + 33;
const V2_STATE: usize = 1 + 2 + 32 + 32;

fn inode(pointers: u8, length: u64) -> Tree {
    Tree::Inode(Inode {
        length,
        proofs: (0..pointers).map(|i| (i * 2, InodeTree::Blinded(Hash([i; 32])))).collect(),
    })
}

fn round_trip(p: &Proof) -> (Vec<u8>, Vec<u8>) {
    let a = v1::encode(p).unwrap();
    let b = v2::encode(p).unwrap();
    assert_eq!(&v1::decode(&a).unwrap(), p);
    assert_eq!(&v2::decode(&b).unwrap(), p);
    (a, b)
}

#[test]
fn dense_thresholds_differ_between_v1_and_v2() {
    for (pointers, v1_dense, v2_dense) in [(14u8, false, false), (15, false, true), (16, true, true)] {
        let (a, b) = round_trip(&proof(inode(pointers, 300)));
        // V1: 04, i64 length, then 00 (sparse) or 01 (dense).
        assert_eq!(a[V1_STATE], 4);
        assert_eq!(a[V1_STATE + 9], u8::from(v1_dense), "{pointers} pointers in V1");
        // V2: tag = L | p << 2 with L = 1 (u16 length 300).
        let p = b[V2_STATE] >> 2;
        assert_eq!(b[V2_STATE] & 3, 1);
        assert_eq!(p, if v2_dense { 16 } else { pointers }, "{pointers} pointers in V2");
    }
}

#[test]
fn v2_lists_values_and_lengths_change_form_at_their_boundaries() {
    let node = |n: usize| {
        Tree::Node(
            (0..n).map(|i| (format!("{i:03}").into_bytes(), Tree::BlindedContents(Hash([1; 32])))).collect(),
        )
    };
    for (n, tag) in [(0usize, 0x80u8), (62, 0x80 | 62), (63, 0xbf), (256, 0xbf)] {
        let (_, b) = round_trip(&proof(node(n)));
        assert_eq!(b[V2_STATE], tag, "{n} entries");
    }
    for (len, tag) in [(0usize, 0xc0u8), (255, 0xc0), (256, 0xc1), (65_535, 0xc1), (65_536, 0xc3)] {
        let (a, b) = round_trip(&proof(Tree::Contents(vec![7; len])));
        assert_eq!(b[V2_STATE], tag, "{len} bytes");
        assert_eq!(&a[V1_STATE + 1..V1_STATE + 5], &(len as u32).to_be_bytes());
    }
    for (length, class) in
        [(255u64, 0u8), (256, 1), (65_535, 1), (65_536, 2), (u64::from(u32::MAX), 2), (1 << 40, 3)]
    {
        let (_, b) = round_trip(&proof(inode(2, length)));
        assert_eq!(b[V2_STATE] & 3, class, "length {length}");
        let ext = Tree::Extender(Extender {
            length,
            segments: vec![1, 2],
            proof: Box::new(InodeTree::Blinded(Hash([3; 32]))),
        });
        let (_, b) = round_trip(&proof(ext));
        assert_eq!(b[V2_STATE], 0xd8 | class, "extender length {length}");
    }
}

#[test]
fn non_canonical_forms_octez_accepts_decode_and_reencode_canonically() {
    // V1: an inode with 2 pointers written densely (01 + 32 slots).
    let canonical = proof(inode(2, 300));
    let mut dense = v1::encode(&proof(Tree::BlindedNode(Hash([0; 32])))).unwrap();
    dense.truncate(V1_STATE);
    dense.push(4);
    dense.extend(300i64.to_be_bytes());
    dense.push(1);
    for slot in 0..32u8 {
        match slot {
            0 => dense.extend([0].iter().chain([0u8; 32].iter())),
            2 => dense.extend([0].iter().chain([1u8; 32].iter())),
            _ => dense.push(4),
        }
    }
    assert_eq!(v1::decode(&dense).unwrap(), canonical);
    assert_ne!(v1::encode(&canonical).unwrap(), dense);
    // V2: the long sparse form (p = 15, u32 byte size).
    let mut long = v2::encode(&proof(Tree::BlindedNode(Hash([0; 32])))).unwrap();
    long.truncate(V2_STATE);
    long.push(1 | (15 << 2));
    long.extend(300u16.to_be_bytes());
    long.extend(((1 + 33) * 2u32).to_be_bytes());
    long.extend([0, 0xc0]);
    long.extend([0u8; 32]);
    long.extend([2, 0xc0]);
    long.extend([1u8; 32]);
    assert_eq!(v2::decode(&long).unwrap(), canonical);
    // A size that does not match its elements is an error.
    let last = long.len() - 70;
    long[last] = long[last].wrapping_add(1);
    assert!(v2::decode(&long).is_err());
}
