//! `larch export irmin`: one-commit irmin-pack stores compared, file by file, with the ones Irmin
//! 3.7.2's `create_one_commit_store` wrote (`crates/larch-irmin/tests/data/one-commit`), re-checked
//! by the independent Python decoder, and imported back (round trip).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{Hash, Kind, Tree};
use larch_irmin::{Control, Status};
use larch_store::Repo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEAD: &str = "CoWSMPUwKZad7rCCDGzPS7yaXC9Sso73HZufsX9zdDhXWxZ5EeNy";
const LVL17: &str = "CoV7L2tq8ubfzXVCohvehyiPQzmvmXinDjxAyEfa2EvQTzdGFW6V";
const FILES: [&str; 7] = [
    "index/log",
    "store.1.mapping",
    "store.1.prefix",
    "store.1.suffix",
    "store.branches",
    "store.control",
    "store.dict",
];

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/data")
}

fn larch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The files of a store directory, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            out.extend(files(&entry.path()).into_iter().map(|f| format!("{name}/{f}")));
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

fn varint(bytes: &[u8], pos: &mut usize) -> u64 {
    let (mut value, mut shift) = (0u64, 0);
    loop {
        let byte = bytes[*pos];
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// The entries of a prefix file: (kind, hash) → the value bytes of each copy.
fn entries(prefix: &[u8]) -> BTreeMap<(u8, Hash), Vec<Vec<u8>>> {
    let mut out: BTreeMap<(u8, Hash), Vec<Vec<u8>>> = BTreeMap::new();
    let mut pos = 0;
    while pos < prefix.len() {
        let hash = Hash::from_slice(&prefix[pos..pos + 32]).unwrap();
        let kind = prefix[pos + 32];
        pos += 33;
        let len = varint(prefix, &mut pos) as usize;
        out.entry((kind, hash)).or_default().push(prefix[pos..pos + len].to_vec());
        pos += len;
    }
    assert_eq!(pos, prefix.len(), "entries run to the prefix's end");
    out
}

fn dict(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        out.push(bytes[pos + 4..pos + 4 + len].to_vec());
        pos += 4 + len;
    }
    out
}

/// The mapping's records, checked for the form Irmin reads: 24-byte little-endian
/// `(global offset, prefix offset, length)`, sorted, disjoint, packed back to back, covering the
/// prefix exactly.
fn mapping(bytes: &[u8], prefix_len: u64) -> Vec<[u64; 3]> {
    assert_eq!(bytes.len() % 24, 0);
    let records: Vec<[u64; 3]> = bytes
        .chunks(24)
        .map(|r| {
            let f = |i: usize| u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap());
            [f(0), f(1), f(2)]
        })
        .collect();
    let mut next_prefix = 0;
    let mut last_end = 0;
    for [global, poff, len] in &records {
        assert_eq!(*poff, next_prefix, "{records:?}");
        assert!(*global >= last_end && *len > 0);
        next_prefix += len;
        last_end = global + len;
    }
    assert_eq!(next_prefix, prefix_len);
    records
}

fn control(dir: &Path) -> Control {
    let path = dir.join("store.control");
    Control::decode(&std::fs::read(&path).unwrap(), &path).unwrap()
}

/// Every value of a tree: path → bytes.
fn values(tree: &Tree, path: &mut Vec<Vec<u8>>, out: &mut BTreeMap<Vec<Vec<u8>>, Vec<u8>>) {
    let empty: [&[u8]; 0] = [];
    for (name, sub) in tree.list_sorted(&empty, 0, None).unwrap() {
        path.push(name.as_bytes().to_vec());
        match sub.kind() {
            Kind::Contents => {
                out.insert(path.clone(), sub.find(&empty).unwrap().unwrap().as_bytes().to_vec());
            }
            Kind::Node => values(&sub, path, out),
        }
        path.pop();
    }
}

fn all_values(store: &Path, commit: &str) -> BTreeMap<Vec<Vec<u8>>, Vec<u8>> {
    let repo = Repo::open_read_only(store).unwrap();
    let tree = repo.checkout(&commit.parse().unwrap()).unwrap();
    let mut out = BTreeMap::new();
    values(&tree, &mut Vec::new(), &mut out);
    out
}

/// Runs the shared Python decoder (a copy in `larch-irmin/tests/tools`) and returns its summary
/// line's counts (ok, mismatched, skipped). CI has `python3`: a missing one fails the test.
fn python_check(dir: &Path) -> (u64, u64, u64) {
    let tool =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/tools/decode_irmin_pack.py");
    let out = Command::new("python3")
        .arg(&tool)
        .arg(dir)
        .arg("--schema=tezos")
        .output()
        .expect("python3 is required by the export tests (CI has it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // The control file's Adler-32, recomputed by the decoder, and nothing after its payload.
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words.first() == Some(&name)).then(|| words.get(1).map(|w| w.to_string())).flatten()
        })
    };
    assert_eq!(field("checksum_ok").as_deref(), Some("True"), "{}", dir.display());
    assert_eq!(field("trailing_bytes").as_deref(), Some("0"), "{}", dir.display());
    let line = text.lines().find(|l| l.trim_start().starts_with("=>")).expect("a summary line");
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

/// Compares larch's export `ours` of `commit` with Irmin's `theirs`; `with_parent`: larch knew
/// the parent's record, so both hold it as a dangling parent.
fn compare(ours: &Path, theirs: &Path, commit: &str, with_parent: bool) {
    assert_eq!(files(ours), FILES);
    assert_eq!(files(theirs), FILES);
    // Determined bytes: the empty branch store and suffix, the index header.
    for name in ["store.branches", "store.1.suffix"] {
        assert_eq!(
            std::fs::read(ours.join(name)).unwrap(),
            std::fs::read(theirs.join(name)).unwrap(),
            "{name}"
        );
    }
    let (log, their_log) =
        (std::fs::read(ours.join("index/log")).unwrap(), std::fs::read(theirs.join("index/log")).unwrap());
    assert_eq!(log.len(), 77);
    assert_eq!(log[..32], their_log[..32], "index header");
    let hash: Hash = commit.parse().unwrap();
    assert_eq!(&log[32..64], hash.as_bytes());
    assert_eq!(log[32..64], their_log[32..64]);
    assert_eq!(log[76], b'D');
    let offset = u64::from_be_bytes(log[64..72].try_into().unwrap());
    let length = u64::from(u32::from_be_bytes(log[72..76].try_into().unwrap()));

    // The prefix: the same objects (kind, hash) as Irmin's, contents byte for byte, the commit
    // last, where the index says.
    let prefix = std::fs::read(ours.join("store.1.prefix")).unwrap();
    let their_prefix = std::fs::read(theirs.join("store.1.prefix")).unwrap();
    assert_eq!(offset + length, prefix.len() as u64, "the commit ends the prefix");
    assert_eq!(&prefix[offset as usize..offset as usize + 32], hash.as_bytes());
    let (mine, irmin) = (entries(&prefix), entries(&their_prefix));
    let keys =
        |map: &BTreeMap<(u8, Hash), Vec<Vec<u8>>>| -> BTreeSet<(u8, Hash)> { map.keys().copied().collect() };
    assert_eq!(keys(&mine), keys(&irmin), "objects by kind and hash");
    assert!(mine.values().all(|copies| copies.len() == 1), "each object written once");
    for ((kind, hash), copies) in &mine {
        if *kind == b'B' {
            assert!(irmin[&(*kind, *hash)].contains(&copies[0]), "contents {hash} as Irmin wrote it");
        }
    }
    assert_eq!(mine.keys().filter(|(k, _)| *k == b'P').count(), 1);

    // The mapping's form.
    assert_eq!(
        mapping(&std::fs::read(ours.join("store.1.mapping")).unwrap(), prefix.len() as u64),
        vec![[0, 0, prefix.len() as u64]]
    );
    mapping(&std::fs::read(theirs.join("store.1.mapping")).unwrap(), their_prefix.len() as u64);

    // The dict: the steps the tree uses (all of them in Irmin's, which copies the source's).
    let steps = dict(&std::fs::read(ours.join("store.dict")).unwrap());
    let their_steps: BTreeSet<Vec<u8>> =
        dict(&std::fs::read(theirs.join("store.dict")).unwrap()).into_iter().collect();
    assert!(!steps.is_empty() && steps.iter().all(|s| s.len() >= 4 && their_steps.contains(s)));
    assert_eq!(steps.iter().collect::<BTreeSet<_>>().len(), steps.len(), "no step twice");

    // The control file: same size and fields; the offsets and sizes are this layout's.
    let (c, theirs_c) = (control(ours), control(theirs));
    assert_eq!(std::fs::metadata(ours.join("store.control")).unwrap().len(), 71);
    assert_eq!(
        (c.version, c.appendable_chunk_poff, c.chunk_start_idx, c.chunk_num, c.volume_num),
        (5, 0, 1, 1, 0)
    );
    assert_eq!(
        (
            theirs_c.version,
            theirs_c.appendable_chunk_poff,
            theirs_c.chunk_start_idx,
            theirs_c.chunk_num,
            theirs_c.volume_num
        ),
        (5, 0, 1, 1, 0)
    );
    assert_eq!(c.dict_end_poff, std::fs::metadata(ours.join("store.dict")).unwrap().len());
    let Status::Gced {
        suffix_start_offset,
        generation,
        latest_gc_target_offset,
        suffix_dead_bytes,
        mapping_end_poff,
    } = c.status
    else {
        panic!("status {:?}", c.status)
    };
    assert_eq!(
        (suffix_start_offset, generation, latest_gc_target_offset, suffix_dead_bytes, mapping_end_poff),
        (prefix.len() as u64, 1, offset, 0, Some(24))
    );
    let Status::Gced { generation, suffix_dead_bytes, mapping_end_poff, .. } = theirs_c.status else {
        panic!()
    };
    assert_eq!((generation, suffix_dead_bytes), (1, 0));
    assert_eq!(mapping_end_poff, Some(std::fs::metadata(theirs.join("store.1.mapping")).unwrap().len()));

    // Every hash, re-checked by the independent decoder, a known dangling parent's too: larch
    // refers to its tree and parents by hash (Irmin's record keeps offsets that its GC dropped,
    // which the decoder skips, as it skips larch's placeholder for a parent known by hash only).
    let placeholders = u64::from(!with_parent);
    assert_eq!(python_check(ours), (mine.len() as u64 - placeholders, 0, placeholders));
    let their_count: usize = irmin.values().map(Vec::len).sum();
    assert_eq!(python_check(theirs), (their_count as u64 - 1, 0, 1));
}

#[test]
fn exports_of_the_irmin_one_commit_stores_match_them_and_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, commit) in [("plain-head", HEAD), ("plain-lvl17", LVL17)] {
        let fixture = data().join("one-commit").join(name);
        let imported = tmp.path().join(format!("{name}.larch"));
        let text = ok(&larch(&["import", "irmin", s(&fixture), s(&imported)]));
        assert!(text.contains(commit), "{text}");
        let exported = tmp.path().join(format!("{name}.irmin"));
        ok(&larch(&["export", "irmin", s(&imported), s(&exported)]));
        // The parent is absent from the imported store (Irmin kept only its dangling record):
        // the export writes a placeholder record with its hash.
        compare(&exported, &fixture, commit, false);
        let back = tmp.path().join(format!("{name}.back"));
        let text = ok(&larch(&["import", "irmin", s(&exported), s(&back)]));
        assert!(text.contains(commit), "{text}");
        let values = all_values(&back, commit);
        assert!(values.len() > 2000, "{}", values.len());
        assert_eq!(values, all_values(&imported, commit));
    }
}

#[test]
fn an_export_with_its_parent_holds_the_dangling_parent_record_as_irmin_does() {
    let tmp = tempfile::tempdir().unwrap();
    let imported = tmp.path().join("plain.larch");
    ok(&larch(&["import", "irmin", s(&data().join("tezos-stores/plain")), s(&imported), "--all"]));
    for (name, commit) in [("plain-head", HEAD), ("plain-lvl17", LVL17)] {
        let exported = tmp.path().join(format!("{name}.irmin"));
        ok(&larch(&["export", "irmin", s(&imported), s(&exported), "--commit", commit]));
        compare(&exported, &data().join("one-commit").join(name), commit, true);
        let back = tmp.path().join(format!("{name}.back"));
        ok(&larch(&["import", "irmin", s(&exported), s(&back)]));
        assert_eq!(all_values(&back, commit), all_values(&imported, commit));
    }
}

#[test]
fn a_replayed_store_round_trips_large_directories_included() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.trace");
    ok(&larch(&[
        "trace",
        "gen",
        "--out",
        s(&trace),
        "--blocks",
        "20",
        "--accounts",
        "2000",
        "--ops-per-block",
        "200",
    ]));
    let store = tmp.path().join("store");
    ok(&larch(&["replay", s(&trace), "--store", s(&store)]));
    let head = Repo::open_read_only(&store).unwrap().head().unwrap().to_base58();
    let exported = tmp.path().join("out");
    ok(&larch(&["export", "irmin", s(&store), s(&exported)]));
    let prefix = std::fs::read(exported.join("store.1.prefix")).unwrap();
    let objects = entries(&prefix);
    // Directories above 256 entries are written as Irmin's inode trees (inner inodes `O`).
    assert!(objects.keys().any(|(kind, _)| *kind == b'O'));
    assert_eq!(python_check(&exported), (objects.len() as u64, 0, 0));
    let back = tmp.path().join("back");
    ok(&larch(&["import", "irmin", s(&exported), s(&back)]));
    assert_eq!(all_values(&back, &head), all_values(&store, &head));
}

#[test]
fn the_destination_must_be_new_or_empty_and_a_failure_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let imported = tmp.path().join("larch");
    ok(&larch(&["import", "irmin", s(&data().join("one-commit/plain-head")), s(&imported)]));
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let out = larch(&["export", "irmin", s(&imported), s(&full)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(files(&full), ["x"]);
    // An empty directory is filled.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&larch(&["export", "irmin", s(&imported), s(&empty)]));
    assert_eq!(files(&empty), FILES);
    // An unknown commit: an error, no directory, no build directory left.
    let none = tmp.path().join("none");
    let out = larch(&["export", "irmin", s(&imported), s(&none), "--commit", LVL17]);
    assert_eq!(out.status.code(), Some(2));
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["empty", "full", "larch"]);
}
