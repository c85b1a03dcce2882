//! Irmin 3.7.2's proof vectors (`tests/data/irmin-3.7.2-proofs.json`): every proof decodes from
//! repr JSON and from the V1/V2 bytes, re-encodes byte for byte, verifies with Irmin's verdict,
//! results and after hash, and every tampered variant is rejected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_proof::encoding::{v1, v2};
use larch_proof::{Hash, Kind, KindedHash, Op, OpResult, Proof, VerifyError, json, verify};
use serde_json::Value;

fn vectors() -> Value {
    let text = include_str!("data/irmin-3.7.2-proofs.json");
    serde_json::from_str(text).unwrap()
}

fn hex_hash(text: &str) -> Hash {
    let bytes = hex::decode(text).unwrap();
    Hash(bytes.try_into().unwrap())
}

fn kinded(v: &Value) -> KindedHash {
    let kind = match v["kind"].as_str().unwrap() {
        "node" => Kind::Node,
        _ => Kind::Contents,
    };
    KindedHash { kind, hash: hex_hash(v["hex"].as_str().unwrap()) }
}

fn path(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().as_bytes().to_vec()).collect()
}

fn ops(case: &Value) -> Vec<Op> {
    let op = &case["operation"];
    match op["kind"].as_str().unwrap() {
        "find" => op["keys"].as_array().unwrap().iter().map(|k| Op::Find(path(k))).collect(),
        _ => op["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| match s["op"].as_str().unwrap() {
                "add" => Op::Add(path(&s["path"]), hex::decode(s["value_hex"].as_str().unwrap()).unwrap()),
                _ => Op::Remove(path(&s["path"])),
            })
            .collect(),
    }
}

fn expected_results(case: &Value) -> Vec<OpResult> {
    let results = case["irmin_verify"]["result"].as_array().unwrap();
    if case["operation"]["kind"] == "find" {
        results
            .iter()
            .map(|r| OpResult::Value(r.get("hex").map(|h| hex::decode(h.as_str().unwrap()).unwrap())))
            .collect()
    } else {
        ops(case).iter().map(|_| OpResult::Unit).collect()
    }
}

fn cases() -> Vec<Value> {
    vectors()["cases"].as_array().unwrap().clone()
}

#[test]
fn every_vector_decodes_and_reencodes_byte_for_byte() {
    let cases = cases();
    assert_eq!(cases.len(), 14);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let p = &case["proof"];
        let from_json = json::read(p["irmin_repr_json"].as_str().unwrap()).unwrap();
        assert_eq!(from_json.before, kinded(&p["before"]), "{name}");
        assert_eq!(from_json.after, kinded(&p["after"]), "{name}");
        let v1_bytes = hex::decode(p["octez_encodings"]["v1_tree32_hex"].as_str().unwrap()).unwrap();
        let v2_bytes = hex::decode(p["octez_encodings"]["v2_tree32_hex"].as_str().unwrap()).unwrap();
        assert_eq!(v1::decode(&v1_bytes).unwrap(), from_json, "{name}: V1 decodes to the JSON proof");
        assert_eq!(v2::decode(&v2_bytes).unwrap(), from_json, "{name}: V2 decodes to the JSON proof");
        assert_eq!(v1::encode(&from_json).unwrap(), v1_bytes, "{name}: V1 bytes");
        assert_eq!(v2::encode(&from_json).unwrap(), v2_bytes, "{name}: V2 bytes");
        assert_eq!(
            json::write(&from_json).unwrap(),
            p["irmin_repr_json"].as_str().unwrap(),
            "{name}: repr JSON text"
        );
        let stats = from_json.state.stats();
        let s = &p["stats"];
        let counts = [
            (stats.contents, "Contents"),
            (stats.blinded_contents, "Blinded_contents"),
            (stats.node, "Node"),
            (stats.blinded_node, "Blinded_node"),
            (stats.inode, "Inode"),
            (stats.extender, "Extender"),
            (stats.blinded_inode, "Blinded_inode"),
            (stats.inode_values, "Inode_values"),
            (stats.inode_tree, "Inode_tree"),
            (stats.inode_extender, "Inode_extender"),
        ];
        for (count, key) in counts {
            assert_eq!(count as u64, s[key].as_u64().unwrap(), "{name}: {key}");
        }
    }
}

#[test]
fn every_vector_gets_irmins_verdict() {
    for case in &cases() {
        let name = case["name"].as_str().unwrap();
        let proof = json::read(case["proof"]["irmin_repr_json"].as_str().unwrap()).unwrap();
        let outcome = verify(&proof, &ops(case));
        if case["irmin_verify"]["accepted"].as_bool().unwrap() {
            let verified = outcome.unwrap_or_else(|e| panic!("{name}: rejected: {e}"));
            assert_eq!(verified.results, expected_results(case), "{name}");
            let after = hex_hash(case["irmin_verify"]["after_hash_hex"].as_str().unwrap());
            assert_eq!(verified.after.hash, after, "{name}");
        } else {
            // b257_remove: Irmin cannot verify its own proof; the replay needs a blinded inode.
            assert_eq!(name, "b257_remove");
            match outcome {
                Err(VerifyError::Blinded { what: "inode", .. }) => {}
                other => panic!("{name}: expected a blinded-inode rejection, got {other:?}"),
            }
        }
    }
}

fn flip_after(proof: &Proof) -> Proof {
    let mut tampered = proof.clone();
    tampered.after.hash.0[0] ^= 1;
    tampered
}

#[test]
fn every_tampered_variant_is_rejected() {
    let mut checked = 0;
    for case in &cases() {
        let name = case["name"].as_str().unwrap();
        let ops = ops(case);
        for variant in case["tampered"].as_array().unwrap() {
            if !variant["applicable"].as_bool().unwrap() {
                continue;
            }
            assert!(!variant["irmin_verify"]["accepted"].as_bool().unwrap());
            let kind = variant["variant"].as_str().unwrap();
            let proofs: Vec<Proof> = if let Some(text) = variant.get("proof_irmin_repr_json") {
                let from_json = json::read(text.as_str().unwrap()).unwrap();
                let v2_bytes = hex::decode(variant["octez_v2_tree32_hex"].as_str().unwrap()).unwrap();
                let from_v2 = v2::decode(&v2_bytes).unwrap();
                assert_eq!(from_json, from_v2, "{name}/{kind}");
                vec![from_json]
            } else {
                assert_eq!(kind, "after_hash_flipped");
                let proof = json::read(case["proof"]["irmin_repr_json"].as_str().unwrap()).unwrap();
                let flipped = flip_after(&proof);
                assert_eq!(
                    flipped.after.hash,
                    hex_hash(variant["modification"]["new"]["hex"].as_str().unwrap())
                );
                vec![flipped]
            };
            for proof in proofs {
                let outcome = verify(&proof, &ops);
                assert!(outcome.is_err(), "{name}/{kind} accepted");
                let expected_before =
                    kind != "after_hash_flipped" && kind != "needed_contents_blinded_same_root_hash";
                if expected_before {
                    assert!(
                        matches!(outcome, Err(VerifyError::BeforeMismatch { .. })),
                        "{name}/{kind}: {outcome:?}"
                    );
                }
                if kind == "needed_contents_blinded_same_root_hash" {
                    assert!(
                        matches!(outcome, Err(VerifyError::Blinded { what: "contents", .. })),
                        "{name}/{kind}: {outcome:?}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "only {checked} tampered variants");
}

#[test]
fn truncated_and_extended_encodings_are_rejected() {
    for case in &cases() {
        let name = case["name"].as_str().unwrap();
        for key in ["v1_tree32_hex", "v2_tree32_hex"] {
            let bytes = hex::decode(case["proof"]["octez_encodings"][key].as_str().unwrap()).unwrap();
            let decode = |b: &[u8]| if key.starts_with("v1") { v1::decode(b) } else { v2::decode(b) };
            // Every strict prefix fails (sampled for the long ones).
            let step = (bytes.len() / 200).max(1);
            for cut in (0..bytes.len()).step_by(step) {
                assert!(decode(&bytes[..cut]).is_err(), "{name} {key}: prefix of {cut} bytes decoded");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(
                matches!(decode(&longer), Err(larch_proof::DecodeError::TrailingBytes { .. })),
                "{name} {key}"
            );
        }
    }
}
