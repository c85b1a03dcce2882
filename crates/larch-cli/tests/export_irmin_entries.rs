//! `larch export irmin`, entry by entry against what Irmin 3.7.2 wrote
//! (`crates/larch-irmin/tests/data/one-commit`, issue 41).
//!
//! Both prefixes are decoded with larch-irmin's reader ([`IrminStore::entry_at`]) and compared
//! twice:
//! 1. in an offset-free form: for every hash, its kind and value with every pointer resolved to
//!    the hash of the entry it points at. Every hash both stores hold must agree; the hashes that
//!    may differ are named and checked.
//! 2. byte for byte: a small encoder of Irmin's entry format (below) is first shown to give back
//!    every entry of Irmin's prefix exactly (this pins Irmin's own rules: value tags, varints,
//!    which steps go to the dict, the length header). Then every entry of larch's export is
//!    re-encoded with Irmin's pointers (its offsets, or a hash where Irmin wrote one) and Irmin's
//!    dict ids, and must equal Irmin's bytes; and larch's entry, encoded with its own pointers and
//!    dict, must equal larch's bytes. So the two differ only in the offsets and dict ids that
//!    their layouts choose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::schema::write_leb128;
use larch_core::{CommitInfo, Hash};
use larch_irmin::IrminStore;
use larch_irmin::entry::{Address, Decoded, InodeValue, Target, Value};
use larch_irmin::export::PLACEHOLDER_OFFSET;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEAD: &str = "CoWSMPUwKZad7rCCDGzPS7yaXC9Sso73HZufsX9zdDhXWxZ5EeNy";
const LVL17: &str = "CoV7L2tq8ubfzXVCohvehyiPQzmvmXinDjxAyEfa2EvQTzdGFW6V";

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../larch-irmin/tests/data")
}

fn larch(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_larch")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "larch {args:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// One entry: decoded by larch-irmin's reader, and its bytes as stored.
struct Stored {
    decoded: Decoded,
    bytes: Vec<u8>,
}

/// A one-commit store's prefix, every entry in file order, and its dict (step → id).
struct Pack {
    entries: Vec<Stored>,
    at: HashMap<u64, usize>,
    dict: HashMap<Vec<u8>, u64>,
}

impl Pack {
    fn read(dir: &Path) -> Pack {
        let store = IrminStore::open(dir).unwrap();
        let prefix = std::fs::read(dir.join("store.1.prefix")).unwrap();
        let mapping = std::fs::read(dir.join("store.1.mapping")).unwrap();
        let mut entries = Vec::new();
        let mut at = HashMap::new();
        // The mapping's records `(global offset, prefix offset, length)`, each a run of entries.
        for record in mapping.chunks(24) {
            let field = |i: usize| u64::from_le_bytes(record[i * 8..i * 8 + 8].try_into().unwrap());
            let (global, poff, len) = (field(0), field(1), field(2));
            let mut offset = global;
            while offset < global + len {
                let decoded = store.entry_at(offset).unwrap();
                let start = (poff + offset - global) as usize;
                let bytes = prefix[start..start + decoded.length as usize].to_vec();
                offset += decoded.length;
                at.insert(decoded.offset, entries.len());
                entries.push(Stored { decoded, bytes });
            }
            assert_eq!(offset, global + len, "entries fill the mapping record at {global}");
        }
        assert_eq!(entries.iter().map(|e| e.bytes.len()).sum::<usize>(), prefix.len());
        let raw = std::fs::read(dir.join("store.dict")).unwrap();
        let (mut dict, mut pos) = (HashMap::new(), 0);
        while pos < raw.len() {
            let len = u32::from_be_bytes(raw[pos..pos + 4].try_into().unwrap()) as usize;
            let id = dict.len() as u64;
            dict.entry(raw[pos + 4..pos + 4 + len].to_vec()).or_insert(id);
            pos += 4 + len;
        }
        Pack { entries, at, dict }
    }

    /// The hash of the entry a pointer refers to, or where it points outside the prefix.
    fn resolve(&self, address: &Address) -> Ref {
        match address {
            Address::Hash(hash) => Ref::Hash(*hash),
            Address::Offset(offset) => match self.at.get(offset) {
                Some(i) => Ref::Hash(self.entries[*i].decoded.hash),
                None => Ref::Dangling,
            },
        }
    }

    /// The offset-free form of an entry.
    fn abstract_form(&self, decoded: &Decoded) -> Form {
        match &decoded.value {
            Value::Contents(bytes) => Form::Contents(bytes.clone()),
            Value::Inode { value: InodeValue::Values(list), .. } => {
                Form::Values(list.iter().map(|(s, t, a)| (s.clone(), *t, self.resolve(a))).collect())
            }
            Value::Inode { value: InodeValue::Tree { depth, length, pointers }, .. } => Form::Tree {
                depth: *depth,
                length: *length,
                pointers: pointers.iter().map(|(i, a)| (*i, self.resolve(a))).collect(),
            },
            Value::Commit(c) => Form::Commit {
                node: self.resolve(&c.node),
                parents: c.parents.iter().map(|a| self.resolve(a)).collect(),
                date: c.date,
                author: c.author.clone(),
                message: c.message.clone(),
            },
        }
    }

    /// Every hash: its kind and offset-free form, each copy's index. Copies of one hash agree.
    fn by_hash(&self) -> BTreeMap<Hash, (u8, Form, Vec<usize>)> {
        let mut out: BTreeMap<Hash, (u8, Form, Vec<usize>)> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            let form = self.abstract_form(&e.decoded);
            match out.get_mut(&e.decoded.hash) {
                Some((kind, first, copies)) => {
                    assert_eq!((*kind, &*first), (e.decoded.kind, &form), "copies of {}", e.decoded.hash);
                    copies.push(i);
                }
                None => {
                    out.insert(e.decoded.hash, (e.decoded.kind, form, vec![i]));
                }
            }
        }
        out
    }
}

/// Where a pointer leads: the hash of an entry, or outside the prefix (collected by Irmin's GC).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ref {
    Hash(Hash),
    Dangling,
}

/// An entry without its offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Form {
    Contents(Vec<u8>),
    Values(Vec<(Vec<u8>, Target, Ref)>),
    Tree { depth: u8, length: u64, pointers: Vec<(u8, Ref)> },
    Commit { node: Ref, parents: Vec<Ref>, date: i64, author: Vec<u8>, message: Vec<u8> },
}

// Irmin's entry encoding (irmin-pack 3.7.2, `Inode.Compress` and `Commit_v2` with the Tezos
// schema), written from its rules: `hash ‖ kind ‖ varint(len) ‖ value`.

fn address(out: &mut Vec<u8>, address: &Address) {
    match address {
        Address::Offset(offset) => {
            out.push(0);
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Address::Hash(hash) => {
            out.push(1);
            out.extend_from_slice(hash.as_bytes());
        }
    }
}

fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_leb128(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encodes `decoded` with `dict`: a step of more than 3 bytes is written as its id in the dict
/// (which must hold it: Irmin adds every such step while the dict has room, and neither dict here
/// is near its 100,000 steps), a shorter one inline.
fn encode(decoded: &Decoded, dict: &HashMap<Vec<u8>, u64>) -> Vec<u8> {
    assert!(dict.len() < 100_000);
    let mut value = Vec::new();
    match &decoded.value {
        Value::Contents(bytes) => value.extend_from_slice(bytes),
        Value::Inode { value: InodeValue::Values(list), .. } => {
            value.push(0);
            write_leb128(&mut value, list.len() as u64);
            for (step, target, child) in list {
                let id = (step.len() > 3).then(|| {
                    dict.get(step).unwrap_or_else(|| {
                        panic!(
                            "step {:?} of entry {} not in the dict",
                            String::from_utf8_lossy(step),
                            decoded.hash
                        )
                    })
                });
                let tag = if id.is_some() { 0 } else { 6 }
                    + if matches!(child, Address::Hash(_)) { 3 } else { 0 }
                    + if *target == Target::Node { 2 } else { 0 };
                write_leb128(&mut value, tag);
                match id {
                    Some(id) => write_leb128(&mut value, *id),
                    None => string(&mut value, step),
                }
                match child {
                    Address::Offset(offset) => value.extend_from_slice(&offset.to_be_bytes()),
                    Address::Hash(hash) => value.extend_from_slice(hash.as_bytes()),
                }
            }
        }
        Value::Inode { value: InodeValue::Tree { depth, length, pointers }, .. } => {
            value.push(1);
            write_leb128(&mut value, u64::from(*depth));
            write_leb128(&mut value, *length);
            write_leb128(&mut value, pointers.len() as u64);
            for (index, child) in pointers {
                write_leb128(&mut value, u64::from(*index));
                address(&mut value, child);
            }
        }
        Value::Commit(c) => {
            address(&mut value, &c.node);
            write_leb128(&mut value, c.parents.len() as u64);
            for parent in &c.parents {
                address(&mut value, parent);
            }
            value.extend_from_slice(&c.date.to_be_bytes());
            string(&mut value, &c.author);
            string(&mut value, &c.message);
        }
    }
    let mut out = decoded.hash.as_bytes().to_vec();
    out.push(decoded.kind);
    write_leb128(&mut out, value.len() as u64);
    out.extend_from_slice(&value);
    out
}

/// Every pointer of an entry.
fn pointers(decoded: &Decoded) -> Vec<Address> {
    match &decoded.value {
        Value::Contents(_) => vec![],
        Value::Inode { value: InodeValue::Values(list), .. } => list.iter().map(|e| e.2).collect(),
        Value::Inode { value: InodeValue::Tree { pointers, .. }, .. } => {
            pointers.iter().map(|p| p.1).collect()
        }
        Value::Commit(c) => std::iter::once(c.node).chain(c.parents.iter().copied()).collect(),
    }
}

/// `ours` with every pointer replaced by the one at the same place in `theirs` (the same entry
/// of the other store: their offset-free forms are equal).
fn with_pointers_of(ours: &Decoded, theirs: &Decoded) -> Decoded {
    let mut out = ours.clone();
    match (&mut out.value, &theirs.value) {
        (Value::Contents(_), Value::Contents(_)) => {}
        (
            Value::Inode { value: InodeValue::Values(a), .. },
            Value::Inode { value: InodeValue::Values(b), .. },
        ) => {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter_mut().zip(b) {
                x.2 = y.2;
            }
        }
        (
            Value::Inode { value: InodeValue::Tree { pointers: a, .. }, .. },
            Value::Inode { value: InodeValue::Tree { pointers: b, .. }, .. },
        ) => {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter_mut().zip(b) {
                x.1 = y.1;
            }
        }
        (Value::Commit(a), Value::Commit(b)) => {
            a.node = b.node;
            assert_eq!(a.parents.len(), b.parents.len());
            a.parents.clone_from(&b.parents);
        }
        _ => panic!("{} has another value kind in the two stores", ours.hash),
    }
    out
}

/// What the comparison of one export with Irmin's store found.
#[derive(Debug, Default)]
struct Compared {
    shared: usize,
    bytes_equal: usize,
    /// Entries of Irmin's prefix that repeat an object it already holds.
    copies: usize,
    kinds: BTreeMap<u8, usize>,
}

/// Compares larch's export `ours` of `commit` with Irmin's `theirs`; `with_parent`: larch wrote
/// the parent's dangling record too.
fn compare(ours: &Path, theirs: &Path, commit: &str, with_parent: bool) -> Compared {
    let commit: Hash = commit.parse().unwrap();
    let (mine, irmin) = (Pack::read(ours), Pack::read(theirs));

    // Irmin's rules, pinned on Irmin's own bytes: the encoder gives back every entry it wrote.
    // Irmin points to everything by an offset before the entry (its `P` record to objects its GC
    // dropped).
    for e in &irmin.entries {
        assert_eq!(encode(&e.decoded, &irmin.dict), e.bytes, "Irmin's entry at {}", e.decoded.offset);
        let pointers = pointers(&e.decoded);
        assert!(pointers.iter().all(|a| matches!(a, Address::Offset(o) if *o < e.decoded.offset)));
    }
    // larch's entries follow the same rules with larch's dict, and point only backwards.
    for e in &mine.entries {
        assert_eq!(encode(&e.decoded, &mine.dict), e.bytes, "larch's entry at {}", e.decoded.offset);
        let backwards = |a: &Address| matches!(a, Address::Offset(o) if *o < e.decoded.offset);
        match &e.decoded.value {
            // A dangling parent's tree and parents are gone: larch names them by hash, or, for a
            // parent it knows by hash only, writes a placeholder that points nowhere.
            Value::Commit(c) if e.decoded.kind == b'P' => {
                if with_parent {
                    assert!(matches!(c.node, Address::Hash(_)));
                    assert!(c.parents.iter().all(|a| matches!(a, Address::Hash(_))));
                } else {
                    assert!(matches!(c.node, Address::Offset(PLACEHOLDER_OFFSET)));
                    assert!(c.parents.is_empty() && c.author.is_empty() && c.message.is_empty());
                }
            }
            _ => assert!(pointers(&e.decoded).iter().all(backwards), "larch's entry at {}", e.decoded.offset),
        }
    }
    // The commit's parents, in both: by offset, each to a dangling-parent record. Irmin reads a
    // parent given by hash as an index key, which its GC refuses in the commit it keeps
    // (`Commit_parent_key_is_indexed`): `create_one_commit_store` on such a commit fails.
    for pack in [&mine, &irmin] {
        let last = &pack.entries.last().unwrap().decoded;
        let Value::Commit(c) = &last.value else { panic!("the last entry is not a commit") };
        assert!(!c.parents.is_empty());
        for parent in &c.parents {
            let Address::Offset(offset) = parent else { panic!("parent {parent:?} not by offset") };
            assert!(*offset < last.offset);
            assert_eq!(pack.entries[pack.at[offset]].decoded.kind, b'P');
        }
    }
    // The commit last, in both.
    assert_eq!(mine.entries.last().map(|e| (e.decoded.hash, e.decoded.kind)), Some((commit, b'D')));
    assert_eq!(irmin.entries.last().map(|e| (e.decoded.hash, e.decoded.kind)), Some((commit, b'D')));

    let (ours_h, theirs_h) = (mine.by_hash(), irmin.by_hash());
    assert_eq!(ours_h.len(), mine.entries.len(), "larch writes each object once");
    // The same hashes: Irmin's may hold an object more than once (its GC keeps every copy the
    // source had), larch's once.
    assert_eq!(ours_h.keys().collect::<Vec<_>>(), theirs_h.keys().collect::<Vec<_>>());

    let mut out = Compared { copies: irmin.entries.len() - theirs_h.len(), ..Compared::default() };
    for (hash, (kind, form, copies)) in &ours_h {
        let (their_kind, their_form, their_copies) = &theirs_h[hash];
        assert_eq!(kind, their_kind, "kind of {hash}");
        *out.kinds.entry(*kind).or_default() += 1;
        out.shared += 1;
        let ours_e = &mine.entries[copies[0]].decoded;
        if *kind == b'P' && !with_parent {
            // larch knew only the parent's hash: a placeholder with no field of Irmin's record.
            let Form::Commit { node: Ref::Dangling, .. } = their_form else { panic!("{their_form:?}") };
            let placeholder = Form::Commit {
                node: Ref::Dangling,
                parents: vec![],
                date: 0,
                author: vec![],
                message: vec![],
            };
            assert_eq!(*form, placeholder);
            continue;
        } else if *kind == b'P' {
            // Irmin's record keeps the offsets of a tree and parents its GC dropped; larch names
            // them by hash. Everything else agrees, and larch's hashes are the ones the
            // parent's hash is made of.
            let (
                Form::Commit { node: Ref::Dangling, parents: theirs_p, date, author, message },
                Form::Commit { node: Ref::Hash(tree), parents: ours_p, date: d, author: a, message: m },
            ) = (their_form, form)
            else {
                panic!("dangling parent {hash}: {their_form:?} / {form:?}")
            };
            assert_eq!((date, author, message), (d, a, m));
            assert_eq!(theirs_p.len(), ours_p.len());
            assert!(theirs_p.iter().all(|r| *r == Ref::Dangling), "{theirs_p:?}");
            let grand: Vec<Hash> =
                ours_p.iter().map(|r| if let Ref::Hash(h) = r { *h } else { panic!() }).collect();
            let info = CommitInfo {
                date: *d,
                author: String::from_utf8(a.clone()).unwrap(),
                message: String::from_utf8(m.clone()).unwrap(),
            };
            assert_eq!(larch_core::schema::commit_hash(tree, &grand, &info), *hash);
        } else {
            assert_eq!(form, their_form, "{} {hash}", *kind as char);
            assert!(!format!("{form:?}").contains("Dangling"), "{hash}: {form:?}");
        }
        // Bytes: larch's entry with Irmin's pointers and dict is each of Irmin's copies.
        for &i in their_copies {
            let theirs_e = &irmin.entries[i];
            let translated = with_pointers_of(ours_e, &theirs_e.decoded);
            assert_eq!(
                encode(&translated, &irmin.dict),
                theirs_e.bytes,
                "{} {hash}: larch's entry with Irmin's pointers and dict ids",
                *kind as char
            );
        }
        out.bytes_equal += 1;
    }
    out
}

#[test]
fn every_entry_of_an_export_is_the_one_irmin_wrote_but_for_offsets_and_dict_ids() {
    let tmp = tempfile::tempdir().unwrap();
    // Without the parent's record: exports of the imported one-commit stores.
    for (name, commit) in [("plain-head", HEAD), ("plain-lvl17", LVL17)] {
        let fixture = data().join("one-commit").join(name);
        let imported = tmp.path().join(format!("{name}.larch"));
        larch(&["import", "irmin", s(&fixture), s(&imported)]);
        let exported = tmp.path().join(format!("{name}.irmin"));
        larch(&["export", "irmin", s(&imported), s(&exported)]);
        let found = compare(&exported, &fixture, commit, false);
        eprintln!("{name} without parent: {found:?}");
        assert!(found.shared > 4000 && found.bytes_equal + 1 == found.shared);
        assert!(found.copies > 1000, "{found:?}");
        for kind in [b'B', b'R', b'O', b'D', b'P'] {
            assert!(found.kinds.get(&kind).is_some_and(|n| *n > 0), "{found:?}");
        }
    }
    // With it: exports from the whole store Irmin's stores were made from.
    let imported = tmp.path().join("plain.larch");
    larch(&["import", "irmin", s(&data().join("tezos-stores/plain")), s(&imported), "--all"]);
    for (name, commit) in [("plain-head", HEAD), ("plain-lvl17", LVL17)] {
        let exported = tmp.path().join(format!("{name}.full.irmin"));
        larch(&["export", "irmin", s(&imported), s(&exported), "--commit", commit]);
        let found = compare(&exported, &data().join("one-commit").join(name), commit, true);
        eprintln!("{name} with parent: {found:?}");
        assert_eq!(found.kinds.get(&b'P'), Some(&1), "{found:?}");
    }
}
