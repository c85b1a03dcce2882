//! Proof production against Irmin 3.7.2: larch rebuilds the vector trees from their rules, checks
//! their root hashes, produces the proof of every vector case and compares it with Irmin's (the
//! same proof tree, hence the same V1/V2 bytes). `b257_remove`, which Irmin cannot verify, is
//! produced so that it verifies (spec §2). Vectors: `larch-proof/tests/data/` (see its README).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::ocaml_hash::inode_index;
use larch_core::{CommitInfo, MemoryRepo, Tree, proof};
use larch_proof::encoding::{v1, v2};
use larch_proof::{Op, OpResult, json, verify};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../larch-proof/tests/data/irmin-3.7.2-proofs.json")).unwrap()
}

/// The names `x0, x1, …` whose bucket at depth 0 (and 1, 2) satisfy `keep`, the first `n` of them.
fn names(n: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<String> {
    (0..).map(|i| format!("x{i}")).filter(|s| keep(s.as_bytes())).take(n).collect()
}

fn build(name: &str) -> Vec<(Vec<String>, Vec<u8>)> {
    let mut out: Vec<(Vec<String>, Vec<u8>)> = Vec::new();
    let mut put = |path: &[&str], value: &[u8]| {
        out.push((path.iter().map(|s| s.to_string()).collect(), value.to_vec()))
    };
    match name {
        "small_flat" => {
            for (k, v) in [
                ("a", "alpha"),
                ("b", "beta"),
                ("c", "gamma"),
                ("d", "delta"),
                ("e", "epsilon"),
                ("f", "zeta"),
                ("g", "eta"),
                ("h", "theta"),
            ] {
                put(&[k], v.as_bytes());
            }
        }
        "tezos_like" => {
            put(&["data", "version"], b"genesis");
            put(&["data", "contracts", "global_counter"], b"300");
            put(&["protocol"], &[0x38; 32]);
            put(&["test_chain"], &[0]);
            for i in 0u64..300 {
                let c = format!("{:042x}", i * 2_654_435_761);
                put(&["data", "contracts", "index", &c, "balance"], (1_000_000 + i).to_string().as_bytes());
                put(&["data", "contracts", "index", &c, "counter"], i.to_string().as_bytes());
            }
        }
        "flat_1000" | "flat_5000" => {
            let n = if name == "flat_1000" { 1000 } else { 5000 };
            for i in 0..n {
                let s = i.to_string();
                put(&[&s], s.as_bytes());
            }
        }
        "inode_shapes" => {
            for s in names(300, |s| inode_index(0, s) == 5 && inode_index(1, s) == 7) {
                put(&["ext", &s], format!("v{s}").as_bytes());
            }
            let mut sparse =
                names(40, |s| inode_index(0, s) == 3 && inode_index(1, s) == 11 && inode_index(2, s) == 13);
            sparse.extend(names(130, |s| inode_index(0, s) == 9));
            sparse.extend(names(130, |s| inode_index(0, s) == 27));
            for s in sparse {
                put(&["sparse", &s], format!("v{s}").as_bytes());
            }
            put(&["other"], b"x");
        }
        "encoding_edges" => {
            for i in 0..100 {
                put(&["dir100", &i.to_string()], i.to_string().as_bytes());
            }
            put(&["long"], &(0..300).map(|k| (k % 256) as u8).collect::<Vec<u8>>());
            for s in names(300, |s| inode_index(0, s) < 15) {
                put(&["fifteen", &s], format!("v{s}").as_bytes());
            }
        }
        "update_edges" => {
            let mut split = names(32, |s| inode_index(0, s) == 4);
            split.extend(names(268, |s| inode_index(0, s) != 4));
            for s in split {
                put(&["split", &s], format!("v{s}").as_bytes());
            }
            let mut collapse = names(33, |s| inode_index(0, s) == 6);
            collapse.extend(names(267, |s| inode_index(0, s) != 6));
            for s in collapse {
                put(&["collapse", &s], format!("v{s}").as_bytes());
            }
            for i in 0..256 {
                put(&["b256", &i.to_string()], i.to_string().as_bytes());
            }
            for i in 0..257 {
                put(&["b257", &i.to_string()], i.to_string().as_bytes());
            }
        }
        other => panic!("unknown tree {other}"),
    }
    out
}

/// The vector tree `name`, committed and checked out (lazy, as from a store).
fn tree(repo: &mut MemoryRepo, name: &str, expected_root: &str) -> Tree {
    let mut tree = repo.empty_tree();
    for (path, value) in build(name) {
        tree.add(&path, value).unwrap();
    }
    assert_eq!(tree.hash().to_hex(), expected_root, "tree {name}");
    let commit = repo.commit(&tree, &[], CommitInfo::tezos(0, "")).unwrap();
    repo.checkout(&commit).unwrap()
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

#[test]
fn larch_produces_irmins_proofs_of_the_vector_cases() {
    let vectors = vectors();
    let mut repo = MemoryRepo::new();
    let mut trees = std::collections::HashMap::new();
    for t in vectors["trees"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        trees.insert(name.to_string(), tree(&mut repo, name, t["root_tree_hash"]["hex"].as_str().unwrap()));
    }
    for case in vectors["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let tree = &trees[case["tree"].as_str().unwrap()];
        let ops = ops(case);
        let produced = proof::produce(tree, &ops).unwrap_or_else(|e| panic!("{name}: {e}"));
        let irmin = json::read(case["proof"]["irmin_repr_json"].as_str().unwrap()).unwrap();
        let verified =
            verify(&produced.proof, &ops).unwrap_or_else(|e| panic!("{name}: larch's proof rejected: {e}"));
        assert_eq!(verified.results, produced.results, "{name}");
        if name == "b257_remove" {
            // Irmin's proof of this case does not verify; larch's reveals every inode of b257/ and
            // otherwise agrees with Irmin's: same before and after hashes.
            assert_eq!(produced.proof.before, irmin.before, "{name}");
            assert_eq!(produced.proof.after, irmin.after, "{name}");
            assert_ne!(produced.proof.state, irmin.state);
            let stats = produced.proof.state.stats();
            assert_eq!(stats.blinded_inode, 0, "{name}: every inode of b257/ revealed");
            assert!(verify(&irmin, &ops).is_err());
            continue;
        }
        assert_eq!(produced.proof, irmin, "{name}: larch's proof differs from Irmin's");
        let v1_hex = case["proof"]["octez_encodings"]["v1_tree32_hex"].as_str().unwrap();
        let v2_hex = case["proof"]["octez_encodings"]["v2_tree32_hex"].as_str().unwrap();
        assert_eq!(hex::encode(v1::encode(&produced.proof).unwrap()), v1_hex, "{name}");
        assert_eq!(hex::encode(v2::encode(&produced.proof).unwrap()), v2_hex, "{name}");
        if case["operation"]["kind"] == "find" {
            let expected: Vec<OpResult> = case["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| OpResult::Value(r.get("hex").map(|h| hex::decode(h.as_str().unwrap()).unwrap())))
                .collect();
            assert_eq!(produced.results, expected, "{name}");
        }
    }
}

/// The shapes of the held-out cases of the spec (§8), with operations of our own: the produced
/// proofs verify, give larch-core's results and after hashes, and have the expected shapes.
#[test]
fn held_out_shapes_verify_and_agree_with_larch_core() {
    let vectors = vectors();
    let mut repo = MemoryRepo::new();
    let root = |name: &str| {
        vectors["trees"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap()["root_tree_hash"]["hex"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let p = |steps: &[&str]| steps.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let bucket6 = names(33, |s| inode_index(0, s) == 6);
    let bucket3 = names(40, |s| inode_index(0, s) == 3 && inode_index(1, s) == 11 && inode_index(2, s) == 13);
    let fifteen = names(300, |s| inode_index(0, s) < 15);
    let bucket9 = names(130, |s| inode_index(0, s) == 9);
    let cases: Vec<(&str, Vec<Op>)> = vec![
        ("update_edges", vec![Op::Remove(p(&["collapse", &bucket6[5]]))]),
        ("update_edges", vec![Op::Add(p(&["b256", "new"]), b"x".to_vec())]),
        ("update_edges", vec![Op::Remove(p(&["b257", "1"])), Op::Add(p(&["b257", "1"]), b"back".to_vec())]),
        ("inode_shapes", vec![Op::Find(p(&["sparse", &bucket3[7]])), Op::Find(p(&["sparse", &bucket9[3]]))]),
        ("encoding_edges", vec![Op::Find(p(&["fifteen", &fifteen[100]]))]),
        (
            "flat_5000",
            vec![Op::Add(p(&["5000"]), b"5000".to_vec()), Op::Remove(p(&["17"])), Op::Find(p(&["4321"]))],
        ),
        ("inode_shapes", vec![Op::List(p(&["ext"])), Op::MemTree(p(&["sparse"])), Op::Mem(p(&["other"]))]),
        ("tezos_like", vec![Op::Copy { from: p(&["data", "contracts"]), to: p(&["copy"]) }]),
    ];
    let mut trees = std::collections::HashMap::new();
    for (name, ops) in cases {
        let tree = trees.entry(name).or_insert_with(|| tree(&mut repo, name, &root(name))).clone();
        let produced = proof::produce(&tree, &ops).unwrap();
        let verified = verify(&produced.proof, &ops).unwrap_or_else(|e| panic!("{name} {ops:?}: {e}"));
        let mut expected = tree.clone();
        for op in &ops {
            match op {
                Op::Add(path, value) => expected.add(path, value.clone()).unwrap(),
                Op::Remove(path) => expected.remove(path).unwrap(),
                Op::Copy { from, to } => assert!(expected.copy(from, to).unwrap()),
                Op::Find(path) => {
                    assert!(expected.find(path).unwrap().is_some(), "{name} {path:?} exists");
                }
                _ => {}
            }
        }
        assert_eq!(verified.after.hash.0, expected.hash().0, "{name} {ops:?}");
        let v1_bytes = v1::encode(&produced.proof).unwrap();
        assert_eq!(v1::decode(&v1_bytes).unwrap(), produced.proof);
        let v2_bytes = v2::encode(&produced.proof).unwrap();
        assert_eq!(v2::decode(&v2_bytes).unwrap(), produced.proof);
    }
}
