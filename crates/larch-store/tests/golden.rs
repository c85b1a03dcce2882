//! Golden bytes of every pack record kind (issue 9, point 10), as the writer's encoders frame them.
//! The expected hex was computed from `docs/format.md` §3 alone (by an independent script
//! following the tables: LEB128 lengths, `back` pointers, CRC-32 of kind, length and body), and
//! each field is annotated below; a change of these bytes is a format change and needs a new
//! format version (`docs/format.md` §6). Child hashes are fixed fillers (`0x07` × 32, ...).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{CommitInfo, Hash, StoreId};
use larch_store::testing::codec::{self, CommitData, EncodedTarget, EntryCounts, RecordKind};
use larch_store::testing::patch::{self, EntryChange};

fn framed(kind: RecordKind, body: &[u8]) -> String {
    let mut out = Vec::new();
    codec::frame(&mut out, kind, body);
    hex::encode(out)
}

/// The hex of a record with its annotated fields (whitespace and `|` are ignored).
fn expected(annotated: &str) -> String {
    annotated.chars().filter(|c| c.is_ascii_hexdigit()).collect()
}

fn filler(byte: u8) -> String {
    hex::encode([byte; 32])
}

#[test]
fn contents_record() {
    assert_eq!(
        framed(RecordKind::Contents, b"hello"),
        expected("01 | 05 | 68656c6c6f | e214e49b"), // kind 1, body_len 5, the value, crc32
    );
}

#[test]
fn flat_directory_record() {
    // At offset 100: "00ff" (hex name, inline "x"), "k" (contents at 60), "n" (node at 90).
    let mut body = Vec::new();
    larch_core::schema::write_leb128(&mut body, 3);
    codec::encode_entry(&mut body, 100, b"00ff", &EncodedTarget::Inline(b"x"));
    codec::encode_entry(&mut body, 100, b"k", &EncodedTarget::Contents(Hash([7; 32]), 60));
    codec::encode_entry(&mut body, 100, b"n", &EncodedTarget::Node(Hash([9; 32]), 90));
    let want = format!(
        "02 4f 03 | 05 02 00ff 01 78 | 02 01 6b {} 28 | 00 01 6e {} 0a | eff09709",
        filler(7),
        filler(9)
    );
    // kind 2, body_len 79, 3 entries; tag 5 = inline|hex, stored name length 2, raw 00 ff, value
    // length 1, "x"; tag 2 = contents pointer, name "k", hash, back 40; tag 0 = node pointer,
    // name "n", hash, back 10; crc32.
    assert_eq!(framed(RecordKind::Flat, &body), expected(&want));
    let decoded =
        codec::decode_node_body(RecordKind::Flat, &body, 100, &mut EntryCounts::default(), StoreId::fresh());
    assert!(decoded.is_ok());
}

#[test]
fn values_inode_record() {
    let mut body = vec![1];
    codec::encode_entry(&mut body, 0, b"a", &EncodedTarget::Inline(b""));
    // kind 3, body_len 5, 1 entry: tag 1 (inline), name "a", empty value; crc32.
    assert_eq!(framed(RecordKind::Values, &body), expected("03 05 | 01 | 01 01 61 00 | 542ab104"));
}

#[test]
fn tree_inode_records() {
    // A directory root (depth 0) of 300 entries at offset 1000: buckets 3 (at 900) and 31 (at 990).
    let mut body = Vec::new();
    codec::encode_tree_head(&mut body, 0, 300, 2);
    codec::encode_tree_child(&mut body, 1000, 3, &Hash([1; 32]), 900);
    codec::encode_tree_child(&mut body, 1000, 31, &Hash([2; 32]), 990);
    let want = format!("04 48 | 00 ac02 02 | 03 {} 64 | 1f {} 0a | 35b236cb", filler(1), filler(2));
    // kind 4, body_len 72; depth 0, length 300 (LEB128 ac 02), 2 children; bucket, hash, back.
    assert_eq!(framed(RecordKind::Tree, &body), expected(&want));
    // An inner inode (depth 1) of 40 entries, one child at the previous offset (back 1).
    let mut body = Vec::new();
    codec::encode_tree_head(&mut body, 1, 40, 1);
    codec::encode_tree_child(&mut body, 1000, 5, &Hash([3; 32]), 999);
    let want = format!("04 25 | 01 28 01 | 05 {} 01 | 83d468af", filler(3));
    assert_eq!(framed(RecordKind::Tree, &body), expected(&want));
}

#[test]
fn entries_patch_record() {
    // At offset 2000, base at 1500, chain 1: remove "b", set "c" to inline "new".
    let mut body = Vec::new();
    patch::encode_head(&mut body, 2000, (Hash([4; 32]), 1500), 1);
    patch::encode_entries(
        &mut body,
        2000,
        &[EntryChange::Remove(b"b"), EntryChange::Set(b"c", EncodedTarget::Inline(b"new"))],
    );
    // kind 6, body_len 46; base hash, back 500 (f4 03), chain 1; 2 changes: tag 3 (removal) "b";
    // tag 1 (inline) "c" = "new"; crc32.
    let want = format!("06 2e | {} f403 01 | 02 | 03 01 62 | 01 01 63 03 6e6577 | 8ea36d6f", filler(4));
    assert_eq!(framed(RecordKind::PatchEntries, &body), expected(&want));
}

#[test]
fn tree_patch_record() {
    // At offset 2000, base at 1500, chain 2, new length 300: bucket 3 removed, bucket 7 set.
    let mut body = Vec::new();
    patch::encode_head(&mut body, 2000, (Hash([4; 32]), 1500), 2);
    patch::encode_tree(&mut body, 2000, 300, &[(3, None), (7, Some((Hash([5; 32]), 1990)))]);
    let want = format!("07 4b | {} f403 02 | ac02 02 | 03 00 | 07 01 {} 0a | e785aada", filler(4), filler(5));
    assert_eq!(framed(RecordKind::PatchTree, &body), expected(&want));
}

#[test]
fn commit_record() {
    // At offset 3000: root at 2990, one parent at 16, Tezos info of date 1530374852, message "m".
    let commit = CommitData {
        tree_hash: Hash([1; 32]),
        tree_offset: 2990,
        parents: vec![(Hash([2; 32]), Some(16))],
        info: CommitInfo::tezos(1530374852, "m"),
    };
    let mut body = Vec::new();
    codec::encode_commit(&mut body, 3000, &commit);
    // kind 5, body_len 84; root pointer (back 10); 1 parent, pointer back 2984 (a8 17); i64 LE
    // date; author "Tezos" (5 bytes); message "m"; crc32.
    let want = format!(
        "05 54 | {} 0a | 01 | {} a817 | c4aa375b00000000 | 05 54657a6f73 | 01 6d | 9453748a",
        filler(1),
        filler(2)
    );
    assert_eq!(framed(RecordKind::Commit, &body), expected(&want));
    assert_eq!(codec::decode_commit(&body, 3000).unwrap(), commit);
}
