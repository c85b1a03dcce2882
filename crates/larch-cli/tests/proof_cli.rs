//! `larch proof produce|verify` end to end, on a pack store holding the Tezos-like vector tree of
//! `larch-proof/tests/data/irmin-3.7.2-proofs.json`: the proofs larch writes are Irmin's (V2 bytes
//! of the vector cases), they verify in every encoding, and tampered or mismatched proofs exit 1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::CommitInfo;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../larch-proof/tests/data/irmin-3.7.2-proofs.json")).unwrap()
}

fn case(vectors: &Value, name: &str) -> Value {
    vectors["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

/// The vectors' `tezos_like` tree, committed on `main` in a new pack store at `dir`.
fn tezos_like_store(dir: &Path) -> String {
    let mut repo = larch_store::Repo::open(dir).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    tree.add(&["data", "contracts", "global_counter"], b"300".to_vec()).unwrap();
    tree.add(&["protocol"], vec![0x38; 32]).unwrap();
    tree.add(&["test_chain"], vec![0]).unwrap();
    for i in 0u64..300 {
        let c = format!("{:042x}", i * 2_654_435_761);
        tree.add(&["data", "contracts", "index", &c, "balance"], (1_000_000 + i).to_string().into_bytes())
            .unwrap();
        tree.add(&["data", "contracts", "index", &c, "counter"], i.to_string().into_bytes()).unwrap();
    }
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    repo.close().unwrap();
    commit.to_string()
}

#[test]
fn produce_and_verify_match_irmin_and_reject_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let commit = tezos_like_store(&store);
    let store = store.to_str().unwrap();
    let vectors = vectors();

    // tezos_find_one: produce from the head, in V2: Irmin's bytes.
    let one = case(&vectors, "tezos_find_one");
    let key = "data/contracts/index/0000000000000000000000000000000004538453d7/balance";
    let out = dir.path().join("one.v2");
    let run = larch(&["proof", "produce", store, "--find", key, out.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let before = one["proof"]["before"]["b58"].as_str().unwrap();
    assert!(text(&run.stdout).contains(&format!("before {before}")), "{}", text(&run.stdout));
    assert!(
        text(&run.stdout).contains(&format!("find {key} {}", hex::encode("1000007"))),
        "{}",
        text(&run.stdout)
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(hex::encode(&bytes), one["proof"]["octez_encodings"]["v2_tree32_hex"].as_str().unwrap());

    // Verify it, with and without the expected hash.
    let run = larch(&["proof", "verify", out.to_str().unwrap(), "--hash", before, "--find", key]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(text(&run.stdout).contains(&format!("after {before}")));
    let other = one["proof"]["after"]["hex"].as_str().unwrap().replace('f', "0");
    let run = larch(&["proof", "verify", out.to_str().unwrap(), "--hash", &other, "--find", key]);
    assert_eq!(run.status.code(), Some(1), "a wrong expected hash is a rejection");

    // Tampered: a flipped byte somewhere in the state, and a truncation, exit 1.
    for (i, tampered) in [
        {
            let mut b = bytes.clone();
            let last = b.len() - 3;
            b[last] ^= 0x01;
            b
        },
        bytes[..bytes.len() - 1].to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("tampered{i}.v2"));
        std::fs::write(&path, tampered).unwrap();
        let run = larch(&["proof", "verify", path.to_str().unwrap(), "--find", key]);
        assert_eq!(run.status.code(), Some(1), "tampered {i}: {}", text(&run.stdout));
        assert!(text(&run.stderr).contains("rejected"));
    }

    // A proof of one key does not prove another.
    let run = larch(&["proof", "verify", out.to_str().unwrap(), "--find", "data/version"]);
    assert_eq!(run.status.code(), Some(1));

    // tezos_update in V1 and JSON, from an explicit commit: Irmin's proof, and it verifies.
    let update = case(&vectors, "tezos_update");
    let mut update_args = Vec::new();
    for step in update["operation"]["steps"].as_array().unwrap() {
        let path: Vec<&str> = step["path"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        update_args.push("--update".to_string());
        update_args.push(match step["op"].as_str().unwrap() {
            "add" => format!("add:{}={}", path.join("/"), step["value_hex"].as_str().unwrap()),
            _ => format!("remove:{}", path.join("/")),
        });
    }
    let update_args: Vec<&str> = update_args.iter().map(String::as_str).collect();
    for (encoding, expected) in [
        ("v1", update["proof"]["octez_encodings"]["v1_tree32_hex"].as_str().unwrap().to_string()),
        ("json", hex::encode(update["proof"]["irmin_repr_json"].as_str().unwrap())),
    ] {
        let out = dir.path().join(format!("update.{encoding}"));
        let mut args = vec!["proof", "produce", store, "--commit", &commit, "--encoding", encoding];
        args.extend(&update_args);
        args.push(out.to_str().unwrap());
        let run = larch(&args);
        assert!(run.status.success(), "{}", text(&run.stderr));
        assert_eq!(hex::encode(std::fs::read(&out).unwrap()), expected, "{encoding}");
        let mut args = vec!["proof", "verify", out.to_str().unwrap(), "--encoding", encoding];
        args.extend(&update_args);
        let run = larch(&args);
        assert!(run.status.success(), "{encoding}: {}", text(&run.stderr));
        let after = update["proof"]["after"]["b58"].as_str().unwrap();
        assert!(text(&run.stdout).contains(&format!("after {after}")), "{}", text(&run.stdout));
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let proof = dir.path().join("p");
    std::fs::write(&proof, b"").unwrap();
    let run = larch(&["proof", "verify", proof.to_str().unwrap(), "--update", "move:a"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("expected add:PATH=HEX"));
    let run = larch(&["proof", "verify", proof.to_str().unwrap(), "--find", "a"]);
    assert_eq!(run.status.code(), Some(1), "an empty proof is rejected");
    let run = larch(&["proof", "produce", dir.path().join("nope").to_str().unwrap(), "--find", "a", "out"]);
    assert_eq!(run.status.code(), Some(2));
}

#[test]
fn stream_proofs_produce_verify_and_reject_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    tezos_like_store(&store);
    let store = store.to_str().unwrap();
    let vectors = vectors();
    let before = case(&vectors, "tezos_find_one")["proof"]["before"]["b58"].as_str().unwrap().to_string();
    let key = "data/contracts/index/0000000000000000000000000000000004538453d7/balance";
    for encoding in ["v1", "v2"] {
        let out = dir.path().join(format!("stream.{encoding}"));
        let out = out.to_str().unwrap();
        let run = larch(&["proof", "produce", store, "--stream", "--encoding", encoding, "--find", key, out]);
        assert!(run.status.success(), "{encoding}: {}", text(&run.stderr));
        assert!(text(&run.stdout).contains(&format!("before {before}")), "{}", text(&run.stdout));
        let found = format!("find {key} {}", hex::encode("1000007"));
        assert!(text(&run.stdout).contains(&found), "{}", text(&run.stdout));
        let run = larch(&[
            "proof",
            "verify",
            out,
            "--stream",
            "--encoding",
            encoding,
            "--hash",
            &before,
            "--find",
            key,
        ]);
        assert!(run.status.success(), "{encoding}: {}", text(&run.stderr));
        assert!(text(&run.stdout).contains(&found), "{}", text(&run.stdout));
        // Read as a tree proof, or for another key, or altered: rejected (exit 1).
        let run = larch(&["proof", "verify", out, "--encoding", encoding, "--find", key]);
        assert_eq!(run.status.code(), Some(1), "{encoding}: a stream read as a tree proof");
        let run =
            larch(&["proof", "verify", out, "--stream", "--encoding", encoding, "--find", "data/version"]);
        assert_eq!(run.status.code(), Some(1), "{encoding}: another key");
        let mut bytes = std::fs::read(out).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x01;
        let tampered = dir.path().join(format!("tampered.{encoding}"));
        std::fs::write(&tampered, bytes).unwrap();
        let run = larch(&[
            "proof",
            "verify",
            tampered.to_str().unwrap(),
            "--stream",
            "--encoding",
            encoding,
            "--find",
            key,
        ]);
        assert_eq!(run.status.code(), Some(1), "{encoding}: tampered");
        assert!(text(&run.stderr).contains("rejected"), "{}", text(&run.stderr));
    }
    // Irmin's repr JSON of the stream: produced, verified, and not a tree proof.
    let out = dir.path().join("stream.json");
    let out = out.to_str().unwrap();
    let run = larch(&["proof", "produce", store, "--stream", "--encoding", "json", "--find", key, out]);
    assert!(run.status.success(), "json: {}", text(&run.stderr));
    let json = std::fs::read_to_string(out).unwrap();
    assert!(json.starts_with("{\"before\":{\"Node\":\"Co"), "{json}");
    let run =
        larch(&["proof", "verify", out, "--stream", "--encoding", "json", "--hash", &before, "--find", key]);
    assert!(run.status.success(), "json: {}", text(&run.stderr));
    let found = format!("find {key} {}", hex::encode("1000007"));
    assert!(text(&run.stdout).contains(&found), "{}", text(&run.stdout));
    let run = larch(&["proof", "verify", out, "--encoding", "json", "--find", key]);
    assert_eq!(run.status.code(), Some(1), "json: a stream read as a tree proof");
}
