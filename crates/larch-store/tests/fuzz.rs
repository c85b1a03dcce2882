//! Fuzzing of every store decoder (issue 9, point 9; the run is recorded in `docs/fuzzing.md`):
//! the checked-in corpus (`tests/fuzz-corpus/`: record bodies, a commit index, a whole small
//! store) is replayed as is, then seeded structured mutations of it go through the record
//! decoders, the commit index decoder and a whole store (open, every commit read, fsck), with
//! checksums recomputed after a mutation half of the time so that the decoders behind them are
//! reached. No input may panic (caught only to report), take more than a few seconds, or make a
//! single allocation larger than its size justifies.
//!
//! `LARCH_FUZZ_ITERS` multiplies the number of inputs (1 by default, for CI); `LARCH_SEED` replays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::{Entry, Hash, InodeTree, Name, NodeBody, NodeRef, ObjectKey, StoreId, Tree};
use larch_store::testing::codec::{self, EntryCounts, RecordKind};
use larch_store::testing::storage::{Storage, StoreFiles};
use larch_store::testing::{index, patch};
use larch_store::{Repo, RepoOptions};
use larch_testkit::fuzz::{FuzzTally, PeakAlloc, largest_allocation, mutate_once, mutated};
use larch_testkit::{TestRng, seeded_rng};
use rand::Rng;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// The most any one input may take (a hang detector, not a speed test).
const MAX_INPUT_TIME: Duration = Duration::from_secs(10);

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus")
}

fn read_corpus(kind: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir().join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let items: Vec<Vec<u8>> = files.iter().map(|file| std::fs::read(file).unwrap()).collect();
    assert!(!items.is_empty(), "empty corpus {}", dir.display());
    items
}

fn iterations(base: u64) -> u64 {
    let factor = std::env::var("LARCH_FUZZ_ITERS").ok().and_then(|text| text.parse().ok()).unwrap_or(1u64);
    base * factor.max(1)
}

/// Runs `f` on `input`, asserting it does not panic, returns in bounded time and allocates at most
/// `allowed` bytes at once; tallies whether it accepted the input.
fn run_one(tally: &mut FuzzTally, what: &str, input: &[u8], allowed: usize, f: impl FnOnce() -> bool) {
    let start = Instant::now();
    let (outcome, largest) = largest_allocation(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    let elapsed = start.elapsed();
    let accepted = outcome.unwrap_or_else(|_| {
        panic!("{what}: the decoder panicked on input {}", hex::encode(input));
    });
    assert!(elapsed < MAX_INPUT_TIME, "{what}: {elapsed:?} on input {}", hex::encode(input));
    assert!(
        largest <= allowed,
        "{what}: an allocation of {largest} bytes for an input of {} bytes: {}",
        input.len(),
        hex::encode(input)
    );
    tally.inputs += 1;
    tally.largest_allocation = tally.largest_allocation.max(largest);
    if accepted {
        tally.accepted += 1;
    } else {
        tally.rejected += 1;
    }
}

// ---- Record bodies ---------------------------------------------------------------------------

/// Offset the fuzzed records claim to be at (pointers reach back to 16).
const RECORD_OFFSET: u64 = 1 << 20;

fn bases(store: StoreId) -> Vec<NodeBody> {
    let entries: Vec<(Name, Entry)> =
        (0..8).map(|i| (Name::from(format!("k{i}").as_str()), Entry::contents(vec![i as u8; 3]))).collect();
    let child = NodeRef::Stored { hash: Hash([3; 32]), key: ObjectKey::new(store, 100) };
    let children = (0..4).map(|bucket| (bucket * 5, child.clone())).collect();
    vec![
        NodeBody::Flat(entries.clone()),
        NodeBody::Values(entries),
        NodeBody::Tree(InodeTree { depth: 0, length: 300, children }),
    ]
}

/// Decodes `input` (a kind byte and a body) with every record decoder; true if any accepts it.
fn decode_record(input: &[u8], store: StoreId) -> bool {
    let Some((&kind_byte, body)) = input.split_first() else { return false };
    let mut accepted = false;
    let kinds = [
        RecordKind::Flat,
        RecordKind::Values,
        RecordKind::Tree,
        RecordKind::Commit,
        RecordKind::PatchEntries,
        RecordKind::PatchTree,
    ];
    // The kind the input names first, then every other kind on the same body.
    let named = RecordKind::from_byte(kind_byte);
    for kind in named.into_iter().chain(kinds) {
        let mut counts = EntryCounts::default();
        let ok = match kind {
            RecordKind::Flat | RecordKind::Values | RecordKind::Tree => {
                codec::decode_node_body(kind, body, RECORD_OFFSET, &mut counts, store).is_ok()
            }
            RecordKind::Commit => codec::decode_commit(body, RECORD_OFFSET).is_ok(),
            RecordKind::PatchEntries | RecordKind::PatchTree => {
                match patch::decode(kind, body, RECORD_OFFSET, &mut counts, store) {
                    Ok(decoded) => {
                        for base in bases(store) {
                            let again = patch::decode(kind, body, RECORD_OFFSET, &mut counts, store);
                            let _ = again.map(|p| patch::apply(&base, p, RECORD_OFFSET));
                        }
                        drop(decoded);
                        true
                    }
                    Err(_) => false,
                }
            }
            _ => true,
        };
        accepted |= ok && Some(kind) == named;
    }
    accepted
}

#[test]
fn record_decoders_survive_mutations() {
    let corpus = read_corpus("records");
    let store = StoreId::fresh();
    let mut tally = FuzzTally::default();
    for item in &corpus {
        // Every corpus item is a record some writer produced: it decodes as its own kind.
        run_one(&mut tally, "record corpus", item, 1 << 20, || decode_record(item, store));
    }
    assert_eq!(tally.accepted, corpus.len() as u64, "every corpus record decodes");
    let (mut rng, _) = seeded_rng("fuzz_records", 0x5eed_0001);
    for _ in 0..iterations(20_000) {
        let input = mutated(&mut rng, &corpus);
        run_one(&mut tally, "record", &input, (1 << 16) + 64 * input.len(), || decode_record(&input, store));
    }
    eprintln!("fuzz records: {tally:?}");
    assert!(tally.rejected > 0 && tally.accepted > corpus.len() as u64);
}

// ---- Commit index ----------------------------------------------------------------------------

#[test]
fn commit_index_decoder_survives_mutations() {
    let corpus = read_corpus("index");
    let mut tally = FuzzTally::default();
    let (mut rng, _) = seeded_rng("fuzz_index", 0x5eed_0002);
    for round in 0..iterations(20_000) {
        let mut input = if round == 0 { corpus[0].clone() } else { mutated(&mut rng, &corpus) };
        if rng.random() {
            fix_index_crcs(&mut input);
        }
        run_one(&mut tally, "index", &input, 64 * input.len() + 4096, || {
            index::check_header(&input).is_ok()
                && index::decode_entries(input.get(16..).unwrap_or_default(), 16).is_ok()
        });
    }
    eprintln!("fuzz index: {tally:?}");
    assert!(tally.rejected > 0 && tally.accepted > 0);
}

/// Recomputes every whole entry's checksum (so the hash and offset fields are what is fuzzed).
fn fix_index_crcs(bytes: &mut [u8]) {
    let entries = bytes.get_mut(16..).unwrap_or_default();
    for entry in entries.chunks_exact_mut(index::ENTRY_LEN) {
        let crc = crc32fast::hash(&entry[..40]);
        entry[40..].copy_from_slice(&crc.to_le_bytes());
    }
}

// ---- Whole stores ----------------------------------------------------------------------------

/// The records of a pack image: (offset, body start, body length); stops at the first record
/// that does not parse.
fn pack_records(pack: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at < pack.len() {
        let (mut len, mut shift, mut pos) = (0usize, 0u32, at + 1);
        loop {
            let Some(&byte) = pack.get(pos) else { return out };
            if shift > 35 {
                return out;
            }
            len |= usize::from(byte & 0x7f) << shift;
            pos += 1;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        if pos + len + 4 > pack.len() {
            return out;
        }
        out.push((at, pos, len));
        at = pos + len + 4;
    }
    out
}

/// Mutates one record of `pack` in place (same length), then recomputes its checksum.
fn mutate_record_in_place(rng: &mut TestRng, pack: &mut [u8]) {
    let records = pack_records(pack);
    let Some(&(offset, body, len)) = records.get(rng.random_range(0..records.len().max(1))) else { return };
    if len == 0 {
        return;
    }
    let mut piece = pack[body..body + len].to_vec();
    for _ in 0..rng.random_range(1..=3) {
        mutate_once(rng, &mut piece, &[]);
    }
    piece.resize(len, 0);
    pack[body..body + len].copy_from_slice(&piece);
    let crc = crc32fast::hash(&pack[offset..body + len]);
    pack[body + len..body + len + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Every value of every commit of `repo`: the first load error, if any.
fn read_everything(repo: &Repo) -> Result<(), String> {
    let mut first: Option<String> = None;
    let mut note = |error: String| {
        first.get_or_insert(error);
    };
    let commits: Vec<Hash> = repo.commits();
    for commit in commits {
        let tree = match repo.checkout(&commit) {
            Ok(tree) => tree,
            Err(error) => {
                note(error.to_string());
                continue;
            }
        };
        let none: &[&[u8]] = &[];
        let mut stack: Vec<Tree> = vec![tree];
        while let Some(dir) = stack.pop() {
            match dir.list(none, 0, None) {
                Ok(entries) => {
                    for (_, child) in entries {
                        match child.kind() {
                            larch_core::Kind::Node => stack.push(child),
                            larch_core::Kind::Contents => {
                                if let Err(error) = child.find(none) {
                                    note(error.to_string());
                                }
                            }
                        }
                    }
                }
                Err(error) => note(error.to_string()),
            }
        }
    }
    first.map_or(Ok(()), Err)
}

fn open_images(control: &[u8], pack: &[u8], index: &[u8], verify: bool) -> Option<Repo> {
    let files = StoreFiles::memory_with_pack(control.to_vec(), pack.to_vec(), index.to_vec());
    let options = RepoOptions { cache_bytes: 1 << 20, verify_on_load: verify, ..RepoOptions::default() };
    Repo::open_files(files, false, options, None).ok()
}

#[test]
fn whole_stores_survive_mutations() {
    let control = std::fs::read(corpus_dir().join("store/control")).unwrap();
    let pack = std::fs::read(corpus_dir().join("store/pack")).unwrap();
    let index = std::fs::read(corpus_dir().join("store/commits")).unwrap();
    let repo = open_images(&control, &pack, &index, false).expect("the corpus store opens");
    assert!(read_everything(&repo).is_ok() && repo.fsck().is_clean(), "the corpus store is clean");
    assert!(repo.commit_count() >= 2);
    drop(repo);
    let (mut rng, _) = seeded_rng("fuzz_store", 0x5eed_0003);
    let mut tally = FuzzTally::default();
    let (mut unclean, mut fsck_clean_but_unreadable) = (0u64, 0u64);
    let allowed = (4 << 20) + 64 * pack.len();
    for _ in 0..iterations(1_500) {
        let mut pack = pack.clone();
        let mut index = index.clone();
        match rng.random_range(0..10) {
            0..=5 => mutate_record_in_place(&mut rng, &mut pack),
            6 | 7 => pack = mutated(&mut rng, std::slice::from_ref(&pack)),
            _ => {
                index = mutated(&mut rng, std::slice::from_ref(&index));
                fix_index_crcs(&mut index);
            }
        }
        let verify = rng.random();
        run_one(&mut tally, "store", &pack, allowed, || {
            let Some(repo) = open_images(&control, &pack, &index, verify) else { return false };
            let readable = read_everything(&repo);
            let report = repo.fsck();
            if !report.is_clean() {
                unclean += 1;
            } else if let Err(error) = &readable {
                fsck_clean_but_unreadable += 1;
                eprintln!(
                    "fsck clean, read failed ({error}); pack {}, index {}",
                    hex::encode(&pack),
                    hex::encode(&index)
                );
            }
            readable.is_ok() && report.is_clean()
        });
    }
    eprintln!("fuzz store: {tally:?}, {unclean} reported by fsck");
    // fsck must name every damage that makes a read fail.
    assert_eq!(fsck_clean_but_unreadable, 0, "fsck was clean on a store whose reads fail");
    assert!(tally.rejected > 0 && unclean > 0);
}

// ---- Corpus -----------------------------------------------------------------------------------

/// Writes the corpus (`cargo test -p larch-store --test fuzz -- --ignored write_corpus`): a small
/// store of three commits (flat directories, an inode trie, contents records, patches of both
/// kinds, a merge), its commit index, and up to three record bodies of each node and commit kind.
#[test]
#[ignore = "writes the checked-in corpus"]
fn write_corpus() {
    let dir = corpus_dir();
    let files = StoreFiles::memory();
    let mut repo = Repo::open_files(files.clone(), true, RepoOptions::default(), None).unwrap();
    let mut tree = repo.empty_tree();
    for i in 0..260 {
        tree.add(&["big", &format!("{i:03x}a")], vec![(i % 7) as u8]).unwrap();
    }
    tree.add(&["flat", "a"], vec![1; larch_store::INLINE_MAX + 8]).unwrap();
    tree.add(&["flat", "b", "c"], b"x".to_vec()).unwrap();
    tree.add(&["flat", "d"], b"y".to_vec()).unwrap();
    tree.add(&["flat", "e"], b"z".to_vec()).unwrap();
    let info = |n: i64| larch_core::CommitInfo::tezos(1_600_000_000 + n, format!("block {n}"));
    let first = repo.commit(&tree, &[], info(1)).unwrap();
    tree.add(&["big", "007a"], b"changed".to_vec()).unwrap();
    tree.add(&["flat", "e"], b"changed".to_vec()).unwrap();
    let second = repo.commit(&tree, &[first], info(2)).unwrap();
    tree.remove(&["flat", "a"]).unwrap();
    repo.commit(&tree, &[second, first], info(3)).unwrap();
    let snapshot = |storage: &Arc<dyn Storage>| storage.read_all().unwrap();
    let (control, pack, index) =
        (snapshot(&files.control), files.pack_image().unwrap(), snapshot(&files.index));
    for sub in ["store", "records", "index"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("store/control"), &control).unwrap();
    std::fs::write(dir.join("store/pack"), &pack).unwrap();
    std::fs::write(dir.join("store/commits"), &index).unwrap();
    std::fs::write(dir.join("index/commits"), &index).unwrap();
    let mut per_kind = std::collections::HashMap::new();
    for (i, (offset, body, len)) in pack_records(&pack).into_iter().enumerate() {
        let kind = RecordKind::from_byte(pack[offset]).unwrap();
        let count = per_kind.entry(kind).or_insert(0);
        *count += 1;
        // Contents bodies are any bytes; at most three records of each other kind.
        if kind == RecordKind::Contents || *count > 3 {
            continue;
        }
        // The body is re-based to `RECORD_OFFSET` by rewriting nothing: pointers are relative
        // (`back`), so they stay inside the pack seen from there.
        let mut item = vec![pack[offset]];
        item.extend_from_slice(&pack[body..body + len]);
        std::fs::write(dir.join(format!("records/{i:03}-{}", kind.name())), item).unwrap();
    }
}
