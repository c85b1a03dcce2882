//! Stream proofs in larch-proof alone: a hand-built stream verifies and its V1/V2 bytes are the
//! layouts transcribed from Octez's `Merkle_proof_encoding` (`stream_proof_encoding`, written
//! out here byte by byte, not by the encoder); shortened, lengthened and altered streams give
//! the typed errors; random and truncated bytes never panic the decoders (replay with
//! `LARCH_SEED=<seed> cargo test -p larch-proof --test stream`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_proof::encoding::stream::{v1, v2};
use larch_proof::hash::{contents_hash, flat_node_hash};
use larch_proof::{
    DecodeError, Elt, Hash, Kind, KindedHash, Op, OpResult, StreamProof, VerifyError, verify_stream,
};
use larch_testkit::rand::Rng;
use larch_testkit::seeded_rng;

/// The stream of `find ["c"]` in {c -> "gamma", d -> "delta"}.
fn example() -> (StreamProof, Hash, Hash, Hash) {
    let (hc, hd) = (contents_hash(b"gamma"), contents_hash(b"delta"));
    let root =
        flat_node_hash(2, [(&b"c"[..], Kind::Contents, hc), (&b"d"[..], Kind::Contents, hd)].into_iter());
    let kh = |kind, hash| KindedHash { kind, hash };
    let proof = StreamProof {
        version: 1,
        before: kh(Kind::Node, root),
        after: kh(Kind::Node, root),
        elts: vec![
            Elt::Node(vec![(b"c".to_vec(), kh(Kind::Contents, hc)), (b"d".to_vec(), kh(Kind::Contents, hd))]),
            Elt::Contents(b"gamma".to_vec()),
        ],
    };
    (proof, root, hc, hd)
}

fn find(step: &[u8]) -> Vec<Op> {
    vec![Op::Find(vec![step.to_vec()])]
}

#[test]
fn a_hand_built_stream_verifies_and_rejects_what_it_must() {
    let (proof, root, hc, _) = example();
    let verified = verify_stream(&proof, &find(b"c")).unwrap();
    assert_eq!(verified.results, vec![OpResult::Value(Some(b"gamma".to_vec()))]);
    assert_eq!(verified.before.hash, root);
    // `find d` takes the next element for d's value: "gamma" does not hash to it.
    let hd = contents_hash(b"delta");
    assert!(matches!(
        verify_stream(&proof, &find(b"d")),
        Err(VerifyError::StreamMismatch { index: 1, hash, .. }) if hash == hd
    ));
    // Without the value, the verifier runs out of elements.
    let mut root_only = proof.clone();
    root_only.elts.pop();
    assert_eq!(
        verify_stream(&root_only, &find(b"d")),
        Err(VerifyError::StreamTooShort { op: "find", what: "contents", hash: hd })
    );
    // An absent name reads the root only: the value is one element too many.
    assert_eq!(verify_stream(&proof, &find(b"zz")), Err(VerifyError::StreamTooLong { used: 1, len: 2 }));
    // The value altered, the elements swapped, the root entries altered.
    let mut bad = proof.clone();
    bad.elts[1] = Elt::Contents(b"GAMMA".to_vec());
    assert!(matches!(
        verify_stream(&bad, &find(b"c")),
        Err(VerifyError::StreamMismatch { index: 1, hash, .. }) if hash == hc
    ));
    let mut swapped = proof.clone();
    swapped.elts.swap(0, 1);
    assert!(matches!(
        verify_stream(&swapped, &find(b"c")),
        Err(VerifyError::StreamMismatch { index: 0, .. })
    ));
    let mut unsorted = proof.clone();
    if let Elt::Node(entries) = &mut unsorted.elts[0] {
        entries.swap(0, 1);
    }
    assert!(matches!(
        verify_stream(&unsorted, &find(b"c")),
        Err(VerifyError::StreamMismatch { index: 0, .. })
    ));
    // The root listing with d's hash changed: well formed, but not the directory `before` names.
    let mut forged = proof.clone();
    if let Elt::Node(entries) = &mut forged.elts[0] {
        entries[1].1.hash = hc;
    }
    assert!(matches!(
        verify_stream(&forged, &find(b"c")),
        Err(VerifyError::StreamMismatch { index: 0, hash, .. }) if hash == root
    ));
    // The after hash must be the replay's.
    let mut after = proof.clone();
    after.after.hash = hc;
    assert!(matches!(verify_stream(&after, &find(b"c")), Err(VerifyError::AfterMismatch { .. })));
    // A tree proof's version is not a stream proof's.
    let mut version = proof;
    version.version = 0;
    assert_eq!(verify_stream(&version, &find(b"c")), Err(VerifyError::UnsupportedVersion(0)));
}

/// Concatenates byte pieces.
fn cat(pieces: &[&[u8]]) -> Vec<u8> {
    pieces.concat()
}

#[test]
fn encodings_have_octez_layouts() {
    let (proof, root, hc, hd) = example();
    // V2: tag 03 (both node), version, hashes, u32 size, then
    // 82 (node list of 2) [01 'c' 00 hc] [01 'd' 00 hd], c0 05 "gamma" (short value).
    let v2_expected = cat(&[
        &[0x03, 0x00, 0x01],
        &root.0,
        &root.0,
        &78u32.to_be_bytes(),
        &[0x82, 0x01, b'c', 0x00],
        &hc.0,
        &[0x01, b'd', 0x00],
        &hd.0,
        &[0xc0, 0x05],
        b"gamma",
    ]);
    assert_eq!(v2::encode(&proof).unwrap(), v2_expected);
    assert_eq!(v2::decode(&v2_expected).unwrap(), proof);
    // V1: version, 01 root (node) twice, u32 size, then 01 u32 70 entries, 00 u32 5 "gamma".
    let v1_expected = cat(&[
        &[0x00, 0x01, 0x01],
        &root.0,
        &[0x01],
        &root.0,
        &85u32.to_be_bytes(),
        &[0x01],
        &70u32.to_be_bytes(),
        &[0x01, b'c', 0x00],
        &hc.0,
        &[0x01, b'd', 0x00],
        &hd.0,
        &[0x00],
        &5u32.to_be_bytes(),
        b"gamma",
    ]);
    assert_eq!(v1::encode(&proof).unwrap(), v1_expected);
    assert_eq!(v1::decode(&v1_expected).unwrap(), proof);

    // Inode and extender elements (layouts only; not a verifiable stream).
    let (h1, h2) = (Hash([0x11; 32]), Hash([0x22; 32]));
    let shapes = StreamProof {
        version: 1,
        before: KindedHash { kind: Kind::Node, hash: root },
        after: KindedHash { kind: Kind::Contents, hash: hc },
        elts: vec![
            Elt::Inode { length: 300, proofs: vec![(1, h1), (30, h2)] },
            Elt::InodeExtender { length: 70_000, segments: vec![5, 7], proof: h1 },
        ],
    };
    // V2: inode tag = length class 1 (u16) | 2 pointers << 2; pointers u8 index, 01 (Some), hash.
    // Extender tag e0 | length class 2 (u32); segments: u8 byte count, 5-bit packing of [5, 7].
    let body = cat(&[
        &[0x09, 0x01, 0x2c, 0x01, 0x01],
        &h1.0,
        &[0x1e, 0x01],
        &h2.0,
        &[0xe2],
        &70_000u32.to_be_bytes(),
        &[0x02, 0x29, 0xe0],
        &h1.0,
    ]);
    let v2_shapes = cat(&[&[0x01, 0x00, 0x01], &root.0, &hc.0, &(body.len() as u32).to_be_bytes(), &body]);
    assert_eq!(v2::encode(&shapes).unwrap(), v2_shapes);
    assert_eq!(v2::decode(&v2_shapes).unwrap(), shapes);
    // V1: 02 i64 length, 00 (sparse) u32 size (u8 index 01 hash)*; 03 i64 length segments hash.
    let body = cat(&[
        &[0x02],
        &300i64.to_be_bytes(),
        &[0x00],
        &68u32.to_be_bytes(),
        &[0x01, 0x01],
        &h1.0,
        &[0x1e, 0x01],
        &h2.0,
        &[0x03],
        &70_000i64.to_be_bytes(),
        &[0x02, 0x29, 0xe0],
        &h1.0,
    ]);
    let v1_shapes =
        cat(&[&[0x00, 0x01, 0x01], &root.0, &[0x00], &hc.0, &(body.len() as u32).to_be_bytes(), &body]);
    assert_eq!(v1::encode(&shapes).unwrap(), v1_shapes);
    assert_eq!(v1::decode(&v1_shapes).unwrap(), shapes);

    // Dense pointer arrays: from 15 pointers in V2, 16 in V1; empty slots are 00 (None).
    for count in [14usize, 15, 16] {
        let proofs: Vec<(u8, Hash)> = (0..count as u8).map(|i| (i * 2, Hash([i; 32]))).collect();
        let dense = StreamProof { elts: vec![Elt::Inode { length: 100, proofs }], ..shapes.clone() };
        let v2_bytes = v2::encode(&dense).unwrap();
        let tag = v2_bytes[3 + 64 + 4];
        assert_eq!(tag >> 2, if count >= 15 { 16 } else { count as u8 }, "V2 tag with {count} pointers");
        if count >= 15 {
            assert_eq!(v2_bytes[3 + 64 + 4 + 2], 0x01, "slot 0 holds a pointer");
            assert_eq!(v2_bytes[3 + 64 + 4 + 2 + 33], 0x00, "slot 1 is empty");
        }
        assert_eq!(v2::decode(&v2_bytes).unwrap(), dense);
        let v1_bytes = v1::encode(&dense).unwrap();
        assert_eq!(
            v1_bytes[2 + 66 + 4 + 1 + 8],
            u8::from(count >= 16),
            "V1 sparse/dense tag with {count} pointers"
        );
        assert_eq!(v1::decode(&v1_bytes).unwrap(), dense);
    }
}

#[test]
fn bad_bytes_are_typed_errors() {
    let (proof, ..) = example();
    for (name, bytes, decode) in [
        ("v1", v1::encode(&proof).unwrap(), v1::decode as fn(&[u8]) -> Result<StreamProof, DecodeError>),
        ("v2", v2::encode(&proof).unwrap(), v2::decode as fn(&[u8]) -> Result<StreamProof, DecodeError>),
    ] {
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "{name}: truncated at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err(), "{name}: trailing byte");
    }
    // Absurd sizes are refused before anything is allocated.
    let (_, root, ..) = example();
    let huge = cat(&[&[0x03, 0x00, 0x01], &root.0, &root.0, &0x3fff_ffffu32.to_be_bytes()]);
    assert!(v2::decode(&huge).is_err());
    let over = cat(&[&[0x03, 0x00, 0x01], &root.0, &root.0, &0xffff_ffffu32.to_be_bytes()]);
    assert!(v2::decode(&over).is_err());
    // Random bytes and random flips never panic.
    let (mut rng, _) = seeded_rng("stream_bad_bytes_are_typed_errors", 42);
    let valid = [v1::encode(&proof).unwrap(), v2::encode(&proof).unwrap()];
    for round in 0..20_000 {
        let mut bytes: Vec<u8> = if round % 2 == 0 {
            (0..rng.random_range(0..200)).map(|_| rng.random()).collect()
        } else {
            valid[round % 4 / 2].clone()
        };
        for _ in 0..rng.random_range(1..4) {
            if !bytes.is_empty() {
                let at = rng.random_range(0..bytes.len());
                bytes[at] = rng.random();
            }
        }
        for decoded in [v1::decode(&bytes), v2::decode(&bytes)].into_iter().flatten() {
            // Whatever decodes must be rejected or verified without panicking.
            let _ = verify_stream(&decoded, &find(b"c"));
        }
    }
}

/// Irmin's repr JSON of a stream proof (`Tree.Proof.t Tree.Proof.stream_t`), written out here
/// from Irmin's types (`proof_intf.ml`: `elt`, `'a inode`, `'a inode_extender`; a `Seq.t` is a
/// JSON array in repr; record fields holding an empty list omitted), compared both ways.
#[cfg(feature = "json")]
#[test]
fn the_repr_json_form_of_a_stream() {
    use larch_proof::json::{JsonError, hash_to_b58, read_stream, write_stream};
    let (mut proof, root, hc, hd) = example();
    proof.elts.push(Elt::Inode { length: 300, proofs: vec![(3, hc), (17, hd)] });
    proof.elts.push(Elt::InodeExtender { length: 300, segments: vec![5, 7], proof: hc });
    proof.elts.push(Elt::Contents(vec![0xff, 0x00]));
    proof.elts.push(Elt::Inode { length: 0, proofs: vec![] });
    proof.elts.push(Elt::Node(vec![(b"\"q\"".to_vec(), KindedHash { kind: Kind::Node, hash: hd })]));
    let (r, c, d) = (hash_to_b58(&root), hash_to_b58(&hc), hash_to_b58(&hd));
    let text = [
        format!(r#"{{"before":{{"Node":"{r}"}},"after":{{"Node":"{r}"}},"state":["#),
        format!(r#"{{"Node":[["c",{{"Contents":["{c}",{{}}]}}],["d",{{"Contents":["{d}",{{}}]}}]]}},"#),
        r#"{"Contents":"gamma"},"#.to_string(),
        format!(r#"{{"Inode":{{"length":300,"proofs":[[3,"{c}"],[17,"{d}"]]}}}},"#),
        format!(r#"{{"Inode_extender":{{"length":300,"segments":[5,7],"proof":"{c}"}}}},"#),
        r#"{"Contents":{"base64":"/wA="}},"#.to_string(),
        r#"{"Inode":{"length":0}},"#.to_string(),
        format!(r#"{{"Node":[["\"q\"",{{"Node":"{d}"}}]]}}"#),
        "]}".to_string(),
    ]
    .concat();
    assert_eq!(write_stream(&proof).unwrap(), text);
    assert_eq!(read_stream(&text).unwrap(), proof);
    // What a reader also accepts: spacing, a length written as a float, an empty `proofs` given.
    let spaced = text
        .replace(",\"state\":", ", \"state\" : ")
        .replace("\"length\":300,\"proofs\"", "\"length\":300.0,\"proofs\"");
    assert_eq!(read_stream(&spaced).unwrap(), proof);
    let explicit = text.replace(r#"{"Inode":{"length":0}}"#, r#"{"Inode":{"length":0,"proofs":[]}}"#);
    assert_eq!(read_stream(&explicit).unwrap(), proof);
    // The verifier reads the JSON proof as the encoded one.
    let (small, ..) = example();
    let again = read_stream(&write_stream(&small).unwrap()).unwrap();
    assert!(verify_stream(&again, &find(b"c")).is_ok());
    // Not a stream: a tree proof's `Contents` (a pair), an unknown constructor, no state, bad hash.
    for bad in [
        text.replace(r#"{"Contents":"gamma"}"#, r#"{"Contents":["gamma",{}]}"#),
        text.replace("Inode_extender", "Extender"),
        format!(r#"{{"before":{{"Node":"{r}"}},"after":{{"Node":"{r}"}}}}"#),
        text.replace(&c, "Co123"),
        text.replace("[3,", "[300,"),
    ] {
        assert!(matches!(read_stream(&bad), Err(JsonError::Shape { .. })), "{bad}");
    }
    assert!(matches!(read_stream("{"), Err(JsonError::Syntax(_))));
}
