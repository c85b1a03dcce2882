//! Every endpoint's JSON, read over real HTTP from a server on a store built with `Repo`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use larch_core::{CommitInfo, Hash};
use larch_server::ServerConfig;
use larch_store::Repo;
use serde_json::json;

/// Mainnet's genesis context (Irmin's commit hash for it is `CoV8SQ…`, as in larch-store's tests).
const GENESIS: &str = "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj";
const PROTOCOL_HEX: &str = "38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21";

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    genesis: Hash,
    second: Hash,
    names: Vec<String>,
}

/// Genesis, then a second commit adding `data/big` (300 entries: an inode directory) and a few
/// nested values.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["data", "version"], b"genesis".to_vec()).unwrap();
    tree.add(&["protocol"], hex::decode(PROTOCOL_HEX).unwrap()).unwrap();
    tree.add(&["test_chain"], vec![0u8]).unwrap();
    let genesis = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis")).unwrap();
    let mut names: Vec<String> = (0..300).map(|i| format!("k{i:04}")).collect();
    for (i, name) in names.iter().enumerate() {
        tree.add(&["data", "big", name.as_str()], vec![i as u8; 3]).unwrap();
    }
    tree.add(&["data", "nested", "a", "b"], b"deep".to_vec()).unwrap();
    tree.add(&["data", "odd name"], vec![0xde, 0xad]).unwrap();
    let second = repo.commit(&tree, &[genesis], CommitInfo::tezos(1530374882, "lvl 1")).unwrap();
    repo.close().unwrap();
    names.sort();
    Fixture { _dir: dir, path, genesis, second, names }
}

#[test]
fn commits_endpoint_describes_head_and_any_commit() {
    let f = fixture();
    assert_eq!(f.genesis.to_base58(), GENESIS);
    let server = TestServer::start(&f.path, ServerConfig::default());
    let (status, head) = server.json("/commits/head");
    assert_eq!(status, 200);
    assert_eq!(head["hash"], f.second.to_base58());
    assert_eq!(head["parents"], json!([GENESIS]));
    assert_eq!(head["message"], "lvl 1");
    assert_eq!(head["author"], "Tezos");
    assert_eq!(head["timestamp"], 1530374882);
    assert_eq!(head["date"], "2018-06-30T16:08:02Z");
    let reader = Repo::open_read_only(&f.path).unwrap();
    assert_eq!(head["tree"], reader.checkout(&f.second).unwrap().hash().to_base58());

    // By base58 and by hex, the genesis commit.
    for key in [GENESIS.to_string(), f.genesis.to_hex()] {
        let (status, genesis) = server.json(&format!("/commits/{key}"));
        assert_eq!(status, 200, "{key}");
        assert_eq!(genesis["hash"], GENESIS);
        assert_eq!(genesis["parents"], json!([]));
        assert_eq!(genesis["message"], "Genesis");
        assert_eq!(genesis["date"], "2018-06-30T16:07:32Z");
    }
}

#[test]
fn raw_bytes_follows_octez_depth_semantics() {
    let f = fixture();
    let server = TestServer::start(&f.path, ServerConfig::default());
    // A value: its bytes in hex, whatever the depth above 0.
    assert_eq!(server.json("/context/head/raw/bytes/protocol"), (200, json!(PROTOCOL_HEX)));
    assert_eq!(server.json("/context/head/raw/bytes/protocol?depth=1"), (200, json!(PROTOCOL_HEX)));
    assert_eq!(server.json("/context/head/raw/bytes/data/version"), (200, json!(hex::encode("genesis"))));
    // depth=0 is Octez's Cut: null.
    assert_eq!(server.json("/context/head/raw/bytes/protocol?depth=0"), (200, json!(null)));
    // A directory at depth 1: its entries cut.
    assert_eq!(
        server.json("/context/head/raw/bytes?depth=1"),
        (200, json!({"data": null, "protocol": null, "test_chain": null}))
    );
    // Depth 2 below data/nested: a directory whose child directory is cut.
    assert_eq!(server.json("/context/head/raw/bytes/data/nested?depth=2"), (200, json!({"a": {"b": null}})));
    assert_eq!(
        server.json("/context/head/raw/bytes/data/nested"),
        (200, json!({"a": {"b": hex::encode("deep")}}))
    );
    // Percent-encoded names.
    assert_eq!(server.json("/context/head/raw/bytes/data/odd%20name"), (200, json!("dead")));
    // The whole genesis context by hash, no depth.
    assert_eq!(
        server.json(&format!("/context/{GENESIS}/raw/bytes")),
        (
            200,
            json!({"data": {"version": hex::encode("genesis")}, "protocol": PROTOCOL_HEX, "test_chain": "00"})
        )
    );
    // An inode directory (300 entries) in full.
    let (status, big) = server.json("/context/head/raw/bytes/data/big");
    assert_eq!(status, 200);
    let big = big.as_object().unwrap();
    assert_eq!(big.len(), 300);
    assert_eq!(big["k0007"], json!("070707"));
    let response = server.get("/context/head/raw/bytes/protocol");
    assert_eq!(response.header("content-type"), Some("application/json"));
}

#[test]
fn list_pages_sorted_entries_with_kinds_and_hashes() {
    let f = fixture();
    let server = TestServer::start(&f.path, ServerConfig::default());
    let reader = Repo::open_read_only(&f.path).unwrap();
    let tree = reader.checkout(&f.second).unwrap();
    let (status, root) = server.json("/context/head/list");
    assert_eq!(status, 200);
    let expected_root: Vec<_> = [("data", "tree"), ("protocol", "value"), ("test_chain", "value")]
        .iter()
        .map(|(name, kind)| {
            let hash = tree.find_tree(&[name]).unwrap().unwrap().hash().to_base58();
            json!({"name": name, "kind": kind, "hash": hash})
        })
        .collect();
    assert_eq!(root, json!(expected_root));
    // Paging an inode directory: offset and length over Irmin's listing of a stored directory
    // (its bucket order, not by name: `list_pages_follow_irmins_order` checks it).
    let (_, all) = server.json("/context/head/list/data/big");
    let all: Vec<&str> = all.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    let mut sorted = all.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, f.names.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ne!(all, sorted);
    let (status, page) = server.json("/context/head/list/data/big?offset=250&length=20");
    assert_eq!(status, 200);
    let names: Vec<&str> = page.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, all[250..270]);
    let (_, tail) = server.json("/context/head/list/data/big?offset=295&length=20");
    assert_eq!(tail.as_array().unwrap().len(), 5);
    let (_, past) = server.json("/context/head/list/data/big?offset=1000");
    assert_eq!(past, json!([]));
}

/// The list endpoint pages a commit's directory as Irmin lists it: checked against the listing of
/// 2,000 entries computed by the shared Python reference (larch-core's
/// `tests/data/list-order-reference.json`, docs/list-order.md).
#[test]
fn list_pages_follow_irmins_order() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../larch-core/tests/data/list-order-reference.json");
    let reference: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let dir = reference["directories"].as_array().unwrap().iter().find(|d| d["name"] == "hex_2000").unwrap();
    let order: Vec<&str> = dir["order"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("store");
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    for name in &order {
        tree.add(&["index", name], name.as_bytes().to_vec()).unwrap();
    }
    repo.commit(&tree, &[], CommitInfo::tezos(0, "index")).unwrap();
    repo.close().unwrap();
    let server = TestServer::start(&path, ServerConfig::default());
    let names = |target: &str| -> Vec<String> {
        let (status, page) = server.json(target);
        assert_eq!(status, 200, "{target}");
        page.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names("/context/head/list/index"), order);
    for (offset, length) in [(0, 1), (0, 40), (31, 3), (999, 64), (1990, 20), (2000, 1)] {
        let want: Vec<&str> = order.iter().skip(offset).take(length).copied().collect();
        assert_eq!(names(&format!("/context/head/list/index?offset={offset}&length={length}")), want);
    }
    assert_eq!(names("/context/head/list/index?offset=1995"), order[1995..]);
}

#[test]
fn hash_endpoint_gives_tezos_hashes() {
    let f = fixture();
    let server = TestServer::start(&f.path, ServerConfig::default());
    let reader = Repo::open_read_only(&f.path).unwrap();
    let tree = reader.checkout(&f.second).unwrap();
    let (status, root) = server.json("/context/head/hash");
    assert_eq!(status, 200);
    assert_eq!(root, json!({"hash": tree.hash().to_base58(), "kind": "tree"}));
    let (_, big) = server.json("/context/head/hash/data/big");
    assert_eq!(big["hash"], tree.find_tree(&["data", "big"]).unwrap().unwrap().hash().to_base58());
    // A value's hash is its contents hash.
    let (_, version) = server.json(&format!("/context/{GENESIS}/hash/data/version"));
    let contents = larch_core::Contents::new(b"genesis".to_vec());
    assert_eq!(version, json!({"hash": contents.hash().to_base58(), "kind": "value"}));
}

#[test]
fn health_reports_head_and_commit_count() {
    let f = fixture();
    let server = TestServer::start(&f.path, ServerConfig::default());
    let (status, health) = server.json("/health");
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["head"], f.second.to_base58());
    assert_eq!(health["commits"], 2);
}

#[test]
fn large_responses_are_answered_off_the_worker_threads_in_full() {
    // 5,000 entries: above the 2,048 rendered on a worker thread, below the 100,000 limit.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut repo = Repo::open(&path).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..5000u32 {
        tree.add(&["wide", &format!("{i:05}")], i.to_be_bytes().to_vec()).unwrap();
    }
    repo.commit(&tree, &[], CommitInfo::tezos(0, "wide")).unwrap();
    repo.close().unwrap();
    let server = TestServer::start(&path, ServerConfig::default());
    let (status, wide) = server.json("/context/head/raw/bytes/wide");
    assert_eq!(status, 200);
    let wide = wide.as_object().unwrap();
    assert_eq!(wide.len(), 5000);
    assert_eq!(wide["04321"], json!(hex::encode(4321u32.to_be_bytes())));
    let (status, listed) = server.json("/context/head/list/wide");
    assert_eq!((status, listed.as_array().unwrap().len()), (200, 5000));
    let mut names: Vec<&str> =
        listed.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names[4999], "04999");
}

/// Names, sizes and modification times of the files of a directory.
fn listing(dir: &std::path::Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            (entry.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn serving_neither_locks_nor_writes_the_store() {
    let f = fixture();
    let before = listing(&f.path);
    let server = TestServer::start(&f.path, ServerConfig::default());
    for target in
        ["/commits/head", "/context/head/raw/bytes", "/context/head/list/data/big", "/metrics", "/health"]
    {
        assert_eq!(server.get(target).status, 200, "{target}");
    }
    server.state.reload().unwrap();
    assert_eq!(listing(&f.path), before);
    // A writer can open the store while the server serves it: the server holds no lock.
    let writer = Repo::open(&f.path).unwrap();
    assert_eq!(server.get("/commits/head").status, 200);
    writer.close().unwrap();
}
