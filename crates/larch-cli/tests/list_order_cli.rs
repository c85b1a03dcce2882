//! `larch ls --offset --length` lists a commit's directory in Irmin's order (docs/list-order.md),
//! checked against data from outside larch:
//! - Irmin 3.7.2's own listings, page by page, of 7 directories of the head of an Irmin-written
//!   store (`crates/larch-irmin/tests/data/irmin-3.7.2-list-order.json`), on that store imported
//!   with `larch import irmin`;
//! - the listings the shared Python reference computes for 2,000 and 20,000 entries
//!   (`crates/larch-core/tests/data/list-order-reference.json`), on a store written by larch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{larch, larch_json, path_str, text};
use larch_core::CommitInfo;
use larch_store::Repo;
use serde_json::Value;
use std::path::PathBuf;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json_file(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `larch ls STORE PATH [--offset O] [--length L] --json`: the names listed, and the whole answer.
fn ls(store: &str, path: &str, offset: Option<u64>, length: Option<u64>) -> (Vec<String>, Value) {
    let (offset, length) = (offset.map(|o| o.to_string()), length.map(|l| l.to_string()));
    let mut args = vec!["ls", store, path, "--json"];
    if let Some(offset) = &offset {
        args.extend(["--offset", offset.as_str()]);
    }
    if let Some(length) = &length {
        args.extend(["--length", length.as_str()]);
    }
    let answer = larch_json(&args);
    let names = answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    (names, answer)
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect()
}

#[test]
fn an_imported_irmin_store_lists_page_by_page_as_irmin_does() {
    let vectors = json_file(manifest().join("../larch-irmin/tests/data/irmin-3.7.2-list-order.json"));
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("imported");
    let irmin = manifest().join("../larch-irmin/tests/data/tezos-stores/plain");
    let out = larch(&["import", "irmin", path_str(&irmin), path_str(&store)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = path_str(&store);
    let mut pages = 0;
    for case in vectors["paths"].as_array().unwrap() {
        let path = case["path"].as_str().unwrap();
        let full = strings(&case["full"]);
        let (listed, answer) = ls(store, path, None, None);
        assert_eq!(listed, full, "{path}: full listing");
        assert_eq!(answer["length"], case["length"], "{path}: length");
        assert_eq!(answer["hash"], case["hash_hex"], "{path}: hash");
        assert_eq!(answer["commit"], vectors["commit"]);
        for page in case["pages"].as_array().unwrap() {
            let (offset, length) = (page["offset"].as_u64(), page["length"].as_u64());
            let (listed, _) = ls(store, path, offset, length);
            assert_eq!(listed, strings(&page["names"]), "{path}: page offset {offset:?} length {length:?}");
            pages += 1;
        }
    }
    assert!(pages > 100, "{pages} pages");
    // The text form lists the same page, one entry a line, the name last.
    let case = &vectors["paths"][6];
    let (path, page) = (case["path"].as_str().unwrap(), &case["pages"][8]);
    let (offset, length) = (page["offset"].as_u64().unwrap(), page["length"].as_u64().unwrap());
    let out = larch(&["ls", store, path, "--offset", &offset.to_string(), "--length", &length.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|line| !line.starts_with('(')).collect();
    let shown: Vec<String> = lines.iter().map(|line| line.rsplit(' ').next().unwrap().to_owned()).collect();
    assert_eq!(shown, strings(&page["names"]), "{stdout}");
}

#[test]
fn large_directories_list_as_the_reference_computes() {
    let reference = json_file(manifest().join("../larch-core/tests/data/list-order-reference.json"));
    let tmp = tempfile::tempdir().unwrap();
    let mut repo = Repo::open(tmp.path()).unwrap();
    let mut tree = repo.empty_tree();
    let mut dirs = Vec::new();
    for dir in reference["directories"].as_array().unwrap() {
        let name = dir["name"].as_str().unwrap();
        if !matches!(name, "hex_2000" | "decimal_20000" | "decimal_33") {
            continue;
        }
        let order = strings(&dir["order"]);
        for entry in &order {
            tree.add(&[name, entry.as_str()], entry.as_bytes().to_vec()).unwrap();
        }
        dirs.push((name.to_owned(), order));
    }
    repo.commit(&tree, &[], CommitInfo::tezos(0, "reference directories")).unwrap();
    repo.close().unwrap();
    let store = path_str(tmp.path());
    for (name, order) in &dirs {
        let n = order.len() as u64;
        let (listed, answer) = ls(store, name, None, None);
        assert_eq!(&listed, order, "{name}: full listing");
        assert_eq!(answer["length"], n);
        for (offset, length) in
            [(0, 1), (1, 31), (31, 2), (n / 3, 50), (n - 1, 10), (n, 5), (n + 10, 1), (7, 0)]
        {
            let (listed, _) = ls(store, name, Some(offset), Some(length));
            let want: Vec<String> =
                order.iter().skip(offset as usize).take(length as usize).cloned().collect();
            assert_eq!(listed, want, "{name}: page offset {offset} length {length}");
        }
        let (listed, _) = ls(store, name, Some(n - 3), None);
        assert_eq!(listed, order[order.len() - 3..].to_vec(), "{name}: to the end");
    }
}
