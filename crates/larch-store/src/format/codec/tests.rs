//! Tests of the record codec.

use super::*;

/// The names, targets and inline values of `body`'s entries, as decoded.
fn decoded_entries(body: &NodeBody) -> Vec<(Vec<u8>, Option<Vec<u8>>, Hash)> {
    let (NodeBody::Flat(entries) | NodeBody::Values(entries)) = body else { panic!("not entries") };
    entries
        .iter()
        .map(|(name, entry)| {
            let held = match entry {
                Entry::Contents(contents) => contents.held_bytes().map(<[u8]>::to_vec),
                Entry::Node(_) => None,
            };
            (name.to_vec(), held, entry.hash())
        })
        .collect()
}

#[test]
fn a_record_decoded_after_a_bad_one_is_decoded_whole() {
    // The decoding scratch a thread reuses must hold nothing of a record whose decoding failed.
    let entries: [(&[u8], EncodedTarget<'_>); 3] = [
        (b"00ab", EncodedTarget::Inline(b"value")),
        (b"balance", EncodedTarget::Node(Hash([7; 32]), 40)),
        (b"counter", EncodedTarget::Contents(Hash([9; 32]), 60)),
    ];
    let encode = |order: &[usize], count: u64| {
        let mut body = Vec::new();
        write_leb128(&mut body, count);
        for &i in order {
            encode_entry(&mut body, 1000, entries[i].0, &entries[i].1);
        }
        body
    };
    let store = StoreId::fresh();
    let decode =
        |body: &[u8]| decode_node_body(RecordKind::Flat, body, 1000, &mut EntryCounts::default(), store);
    let good = encode(&[0, 1, 2], 3);
    let first = decoded_entries(&decode(&good).unwrap());
    assert_eq!(first.len(), 3);
    assert_eq!(
        first[0],
        (b"00ab".to_vec(), Some(b"value".to_vec()), larch_core::schema::contents_hash(b"value"))
    );
    assert_eq!(first[1].2, Hash([7; 32]));
    assert_eq!(first[2].2, Hash([9; 32]));
    // Truncated (three entries announced, two present) and unsorted records fail midway.
    assert!(decode(&encode(&[0, 1], 3)).is_err());
    assert!(decode(&encode(&[2, 1, 0], 3)).is_err());
    assert_eq!(decoded_entries(&decode(&good).unwrap()), first);
}

#[test]
fn hex_names_round_trip() {
    for name in [&b"00"[..], b"deadbeef", &[b'a'; 200]] {
        let mut out = Vec::new();
        encode_entry(&mut out, 100, name, &EncodedTarget::Inline(b""));
        let mut counts = EntryCounts::default();
        let mut body = vec![1u8];
        body.extend_from_slice(&out);
        let decoded = decode_node_body(RecordKind::Flat, &body, 100, &mut counts, StoreId::fresh()).unwrap();
        let NodeBody::Flat(entries) = decoded else { panic!("not flat") };
        assert_eq!(entries[0].0.as_bytes(), name);
        assert_eq!(counts.hex_names, 1);
    }
}

#[test]
fn hex_names() {
    assert!(is_hex_name(b"00ff"));
    assert!(!is_hex_name(b"0"));
    assert!(!is_hex_name(b"00F0"));
    assert!(!is_hex_name(b"abc"));
    assert!(!is_hex_name(b""));
}

#[test]
fn entry_golden_bytes() {
    let mut out = Vec::new();
    encode_entry(&mut out, 100, b"00ff", &EncodedTarget::Inline(b"x"));
    assert_eq!(out, [TAG_INLINE | TAG_HEX, 2, 0x00, 0xff, 1, b'x']);
    out.clear();
    let hash = Hash([7; 32]);
    encode_entry(&mut out, 100, b"k", &EncodedTarget::Contents(hash, 60));
    let mut expected = vec![TAG_CONTENTS, 1, b'k'];
    expected.extend_from_slice(&[7; 32]);
    expected.push(40);
    assert_eq!(out, expected);
}

#[test]
fn frame_golden_bytes() {
    let mut out = Vec::new();
    frame(&mut out, RecordKind::Contents, b"abc");
    assert_eq!(&out[..5], &[1, 3, b'a', b'b', b'c']);
    assert_eq!(out[5..], crc32fast::hash(&[1, 3, b'a', b'b', b'c']).to_le_bytes());
}

#[test]
fn leb_rejects_overlong_and_overflow() {
    let mut cursor = Cursor::new(&[0x80, 0x00], FileKind::Pack, 16);
    assert!(matches!(cursor.leb(), Err(StoreError::Corrupt { offset: 16, .. })));
    let mut cursor = Cursor::new(&[0xff; 11], FileKind::Pack, 16);
    assert!(cursor.leb().is_err());
    let mut cursor = Cursor::new(&[0xe8, 0x07], FileKind::Pack, 16);
    assert_eq!(cursor.leb().unwrap(), 1000);
}

#[test]
fn commit_round_trip() {
    let commit = CommitData {
        tree_hash: Hash([1; 32]),
        tree_offset: 20,
        parents: vec![(Hash([2; 32]), Some(16))],
        info: CommitInfo::tezos(-5, "lvl 3"),
    };
    let mut out = Vec::new();
    encode_commit(&mut out, 1000, &commit);
    assert_eq!(decode_commit(&out, 1000).unwrap(), commit);
    assert!(decode_commit(&out[..out.len() - 1], 1000).is_err());
}

#[test]
fn absent_parents_round_trip() {
    let commit = CommitData {
        tree_hash: Hash([1; 32]),
        tree_offset: 20,
        parents: vec![(Hash([2; 32]), None), (Hash([3; 32]), Some(16))],
        info: CommitInfo::tezos(7, "imported"),
    };
    let mut out = Vec::new();
    encode_commit(&mut out, 1000, &commit);
    // Tree pointer (32-byte hash, back 980 in two bytes), parent count 2, then the absent
    // parent: its hash followed by `back` = 0.
    assert_eq!(out[34], 2);
    assert_eq!(&out[35..67], &[2; 32]);
    assert_eq!(out[67], 0);
    let decoded = decode_commit(&out, 1000).unwrap();
    assert_eq!(decoded, commit);
    assert_eq!(decoded.absent_parents(), vec![Hash([2; 32])]);
}
