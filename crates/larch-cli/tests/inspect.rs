//! The inspection commands (`log`, `ls`, `cat`, `diff`, `stats`) on a store built here through the
//! library, with contents chosen by the test: every answer is compared with what was put in.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use larch_core::{CommitInfo, Hash};
use larch_store::Repo;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = larch(args);
    assert!(out.status.success(), "larch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    serde_json::from_str(&ok(&args)).unwrap()
}

/// Fails with exit code 2 and a message containing `needle`.
fn fails(args: &[&str], needle: &str) {
    let out = larch(args);
    assert_eq!(out.status.code(), Some(2), "larch {args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "larch {args:?}: {err:?} lacks {needle:?}");
}

/// Three commits: c1 with a few values and a 300-entry directory (an inode trie), c2 changing,
/// adding and removing some, c3 on top of c2.
fn build(dir: &Path) -> (Hash, Hash, Hash) {
    let mut repo = Repo::open(dir).unwrap();
    let mut tree = repo.empty_tree();
    tree.add(&["a", "x"], b"one".to_vec()).unwrap();
    tree.add(&["a", "y"], b"two".to_vec()).unwrap();
    tree.add(&["b"], vec![0xff, 0x00, 0x10]).unwrap();
    for i in 0..300u32 {
        tree.add(&["big", &format!("k{i:03}")], i.to_le_bytes().to_vec()).unwrap();
    }
    let c1 = repo.commit(&tree, &[], CommitInfo::tezos(1_530_374_852, "first")).unwrap();
    tree.add(&["a", "y"], b"TWO".to_vec()).unwrap();
    tree.remove(&["b"]).unwrap();
    tree.add(&["c", "d", "e"], b"deep".to_vec()).unwrap();
    tree.remove(&["big", "k007"]).unwrap();
    tree.add(&["big", "k400"], b"new".to_vec()).unwrap();
    let c2 = repo.commit(&tree, &[c1], CommitInfo::tezos(1_530_374_912, "second")).unwrap();
    tree.add(&["z"], b"last".to_vec()).unwrap();
    let c3 = repo
        .commit(
            &tree,
            &[c2],
            CommitInfo { date: 1_530_375_000, author: "me".into(), message: "third".into() },
        )
        .unwrap();
    repo.close().unwrap();
    (c1, c2, c3)
}

#[test]
fn log_lists_commits_newest_first_with_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let (c1, c2, c3) = build(dir.path());
    let log = json(&["log", store]);
    let hashes: Vec<&str> = log.as_array().unwrap().iter().map(|c| c["hash"].as_str().unwrap()).collect();
    assert_eq!(hashes, [c3.to_string(), c2.to_string(), c1.to_string()]);
    assert_eq!(log[0]["author"], "me");
    assert_eq!(log[0]["message"], "third");
    assert_eq!(log[0]["parents"][0], c2.to_string());
    assert_eq!(log[2]["parents"].as_array().unwrap().len(), 0);
    assert_eq!(log[2]["date"], "2018-06-30T16:07:32Z");
    // From a given commit (hex or base58), limited.
    let log = json(&["log", store, &c2.to_hex(), "-n", "1"]);
    assert_eq!(log.as_array().unwrap().len(), 1);
    assert_eq!(log[0]["hash"], c2.to_string());
    let text = ok(&["log", store, "main"]);
    assert!(text.starts_with(&format!("commit {c3}\nparent {c2}\n")), "{text}");
    assert!(text.contains("    second"), "{text}");
}

#[test]
fn ls_and_cat_show_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let (c1, _, _) = build(dir.path());
    let root = json(&["ls", store]);
    let names: Vec<&str> =
        root["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "big", "c", "z"]);
    assert_eq!(root["length"], 4);
    let at_c1 = json(&["ls", store, "--commit", &c1.to_string()]);
    let b = at_c1["entries"].as_array().unwrap().iter().find(|e| e["name"] == "b").unwrap().clone();
    assert_eq!(b["kind"], "value");
    assert_eq!(b["size"], 3);
    // The hash of a value is the Tezos contents hash (an independent reference: BLAKE2b-256 of
    // the 8-byte big-endian length and the bytes).
    let mut pre = 3u64.to_be_bytes().to_vec();
    pre.extend_from_slice(&[0xff, 0x00, 0x10]);
    assert_eq!(b["hash"], hex::encode(blake2b_simd::Params::new().hash_length(32).hash(&pre).as_bytes()));
    // Pagination as Octez's list: the slice [offset, offset + length) of Irmin's listing, which
    // for a stored directory of more than 32 entries is its bucket order, not by name (checked
    // against Irmin's own listings in list_order_cli.rs).
    let all = json(&["ls", store, "big"]);
    let all: Vec<String> =
        all["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect();
    let mut sorted = all.clone();
    sorted.sort();
    let mut want: Vec<String> = (0..300).filter(|i| *i != 7).map(|i| format!("k{i:03}")).collect();
    want.push("k400".to_owned());
    assert_eq!(sorted, want);
    assert_ne!(all, sorted, "300 entries list in bucket order");
    let page = json(&["ls", store, "big", "--offset", "5", "--length", "3"]);
    let names: Vec<&str> =
        page["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, all[5..8]);
    assert_eq!(page["length"], 300);
    let text = ok(&["ls", store, "a"]);
    assert!(text.contains("value") && text.contains(" x\n") && text.contains(" y\n"), "{text}");
    // cat: raw, hex, JSON, at a commit.
    assert_eq!(ok(&["cat", store, "a/y"]), "TWO");
    assert_eq!(ok(&["cat", store, "a/y", "--commit", &c1.to_string()]), "two");
    assert_eq!(ok(&["cat", store, "b", "-c", &c1.to_string(), "--hex"]), "ff0010\n");
    let value = json(&["cat", store, "big/k400"]);
    assert_eq!(value["hex"], hex::encode(b"new"));
    assert_eq!(value["size"], 3);
}

#[test]
fn diff_names_added_removed_and_changed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let (c1, c2, _) = build(dir.path());
    let diff = json(&["diff", store, &c1.to_string(), &c2.to_string()]);
    let changes: Vec<(String, String)> = diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap().to_owned(), c["change"].as_str().unwrap().to_owned()))
        .collect();
    let expected = [
        ("a/y", "changed"),
        ("b", "removed"),
        ("big/k007", "removed"),
        ("big/k400", "added"),
        ("c", "added"),
    ];
    assert_eq!(changes, expected.map(|(p, c)| (p.to_owned(), c.to_owned())));
    let text = ok(&["diff", store, &c1.to_string(), &c2.to_string(), "big"]);
    assert_eq!(text, "- big/k007 (value)\n+ big/k400 (value)\n");
    assert_eq!(ok(&["diff", store, "head", "head"]), "");
}

#[test]
fn stats_count_records_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    build(dir.path());
    let stats = json(&["stats", store]);
    assert_eq!(stats["commits"], 3);
    assert_eq!(stats["by_kind"]["commit"]["records"], 3);
    // The 300-entry directory is an inode trie: at least one inode-tree record per commit that
    // rewrote it.
    assert!(stats["by_kind"]["inode-tree"]["records"].as_u64().unwrap() >= 1, "{stats}");
    let pack = stats["pack_bytes"].as_u64().unwrap();
    let by_kind: u64 =
        stats["by_kind"].as_object().unwrap().values().map(|k| k["bytes"].as_u64().unwrap()).sum();
    assert_eq!(by_kind + 16, pack, "every byte after the 16-byte header belongs to a record");
    assert!(stats["disk_bytes"].as_u64().unwrap() >= pack);
}

#[test]
fn inspection_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    build(dir.path());
    fails(&["cat", store, "a/x/deeper"], "goes through a value");
    fails(&["ls", store, "a/x"], "is a value, not a directory");
    fails(&["cat", store, "a"], "is a directory");
    fails(&["cat", store, "nope"], "no such path");
    fails(&["log", store, &"00".repeat(32)], "unknown commit");
    fails(&["log", store, "no-such-branch"], "neither a branch");
    fails(&["ls", &format!("{store}/missing")], "does not exist");
    let empty = tempfile::tempdir().unwrap();
    fails(&["log", empty.path().to_str().unwrap()], "opening store");
}

#[test]
fn inspection_reads_a_store_whose_writer_is_still_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    let (_, _, c3) = build(dir.path());
    let mut writer = Repo::open(dir.path()).unwrap();
    let mut tree = writer.checkout(&c3).unwrap();
    tree.add(&["w"], b"writer".to_vec()).unwrap();
    let c4 = writer.commit(&tree, &[c3], CommitInfo::tezos(1_530_376_000, "fourth")).unwrap();
    // The writer holds the lock; the inspection commands never take it.
    assert_eq!(json(&["log", store, "-n", "1"])[0]["hash"], c4.to_string());
    assert_eq!(ok(&["cat", store, "w"]), "writer");
    writer.close().unwrap();
}
