//! Fuzzing of both trace decoders (issue 9, point 9; the run is recorded in `docs/fuzzing.md`):
//! the checked-in corpus (`tests/fuzz-corpus/larch`, `tests/fuzz-corpus/irmin`, and Irmin's own
//! fixture) is replayed, then seeded structured mutations of it are read to the end. For larch
//! traces, half of the mutations recompute the checksum of the chunk they hit, so that the
//! operation decoder behind it is reached. No input may panic (caught only to report), take more
//! than a few seconds, or make a single allocation larger than its size justifies.
//!
//! `LARCH_FUZZ_ITERS` multiplies the number of inputs (1 by default); `LARCH_SEED` replays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod formats_support;

use formats_support::{fixture, random_ops, record_tezos_like, write_irmin, write_larch};
use larch_testkit::fuzz::{FuzzTally, PeakAlloc, largest_allocation, mutate_once, mutated};
use larch_testkit::{TestRng, seeded_rng};
use larch_trace::format::{IrminReader, LarchReader, open_reader};
use rand::Rng;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

const MAX_INPUT_TIME: Duration = Duration::from_secs(10);

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus")
}

fn read_corpus(kind: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir().join(kind);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    let items: Vec<Vec<u8>> = files.iter().map(|file| std::fs::read(file).unwrap()).collect();
    assert!(!items.is_empty(), "empty corpus {}", dir.display());
    items
}

fn iterations(base: u64) -> u64 {
    let factor = std::env::var("LARCH_FUZZ_ITERS").ok().and_then(|text| text.parse().ok()).unwrap_or(1u64);
    base * factor.max(1)
}

/// Reads every operation of `bytes` through the sniffing reader and the format's own reader;
/// true if both read it to the end without error.
fn read_all(bytes: &[u8], larch: bool) -> bool {
    let sniffed = match open_reader(std::io::Cursor::new(bytes.to_vec())) {
        Ok(mut source) => source.by_ref().all(|op| op.is_ok()),
        Err(_) => false,
    };
    let direct = if larch {
        match LarchReader::new(bytes) {
            Ok(reader) => reader.into_iter().all(|op| op.is_ok()),
            Err(_) => false,
        }
    } else {
        match IrminReader::new(bytes) {
            Ok(reader) => reader.into_iter().all(|op| op.is_ok()),
            Err(_) => false,
        }
    };
    sniffed && direct
}

fn run_one(tally: &mut FuzzTally, what: &str, input: &[u8], f: impl FnOnce() -> bool) {
    let start = Instant::now();
    let (outcome, largest) = largest_allocation(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    let elapsed = start.elapsed();
    let accepted =
        outcome.unwrap_or_else(|_| panic!("{what}: the reader panicked on input {}", hex::encode(input)));
    assert!(elapsed < MAX_INPUT_TIME, "{what}: {elapsed:?} on input {}", hex::encode(input));
    // Fixed buffers (a 64 KiB read buffer, 1 MiB at most for a trace's writer-side chunk) plus
    // what the input's own bytes justify.
    let allowed = (2 << 20) + 64 * input.len();
    assert!(largest <= allowed, "{what}: an allocation of {largest} bytes for {} input bytes", input.len());
    tally.inputs += 1;
    tally.largest_allocation = tally.largest_allocation.max(largest);
    if accepted {
        tally.accepted += 1;
    } else {
        tally.rejected += 1;
    }
}

/// The varint at `at` and the offset after it.
fn varint_at(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let (value, len) = larch_varint::decode(bytes.get(at..)?).ok()?;
    Some((value, at + len))
}

/// The chunks of a larch trace: (start of the chunk record, payload start, payload length).
fn larch_chunks(bytes: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let Some((header_len, at)) = varint_at(bytes, 10) else { return out };
    let mut at = at + header_len as usize + 4;
    // The tag of the first record after the header is the chunk tag (a corpus trace has ops).
    let Some(&chunk_tag) = bytes.get(at) else { return out };
    while bytes.get(at) == Some(&chunk_tag) {
        let Some((_, after_count)) = varint_at(bytes, at + 1) else { return out };
        let Some((len, payload)) = varint_at(bytes, after_count) else { return out };
        let end = payload + len as usize;
        if end + 4 > bytes.len() {
            return out;
        }
        out.push((at, payload, len as usize));
        at = end + 4;
    }
    out
}

/// Mutates one chunk's payload of a larch trace in place and recomputes its checksum.
fn mutate_larch_chunk(rng: &mut TestRng, bytes: &mut [u8]) {
    let chunks = larch_chunks(bytes);
    let Some(&(start, payload, len)) = chunks.get(rng.random_range(0..chunks.len().max(1))) else { return };
    let mut piece = bytes[payload..payload + len].to_vec();
    for _ in 0..rng.random_range(1..=3) {
        mutate_once(rng, &mut piece, &[]);
    }
    piece.resize(len, 0);
    bytes[payload..payload + len].copy_from_slice(&piece);
    let crc = crc32fast::hash(&bytes[start..payload + len]);
    bytes[payload + len..payload + len + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn larch_traces_survive_mutations() {
    let corpus = read_corpus("larch");
    let mut tally = FuzzTally::default();
    for item in &corpus {
        run_one(&mut tally, "larch corpus", item, || read_all(item, true));
    }
    assert_eq!(tally.accepted, corpus.len() as u64, "every corpus trace reads");
    assert!(corpus.iter().all(|item| !larch_chunks(item).is_empty()));
    let (mut rng, _) = seeded_rng("fuzz_larch_trace", 0x5eed_0011);
    for _ in 0..iterations(4_000) {
        let input = if rng.random() {
            let mut bytes = corpus[rng.random_range(0..corpus.len())].clone();
            mutate_larch_chunk(&mut rng, &mut bytes);
            bytes
        } else {
            mutated(&mut rng, &corpus)
        };
        run_one(&mut tally, "larch", &input, || read_all(&input, true));
    }
    eprintln!("fuzz larch traces: {tally:?}");
    assert!(tally.rejected > 0 && tally.accepted > corpus.len() as u64);
}

#[test]
fn irmin_traces_survive_mutations() {
    let mut corpus = read_corpus("irmin");
    corpus.push(fixture());
    let mut tally = FuzzTally::default();
    for item in &corpus {
        run_one(&mut tally, "irmin corpus", item, || read_all(item, false));
    }
    assert_eq!(tally.accepted, corpus.len() as u64, "every corpus trace reads");
    let (mut rng, _) = seeded_rng("fuzz_irmin_trace", 0x5eed_0012);
    for _ in 0..iterations(4_000) {
        let input = mutated(&mut rng, &corpus);
        run_one(&mut tally, "irmin", &input, || read_all(&input, false));
    }
    eprintln!("fuzz irmin traces: {tally:?}");
    assert!(tally.rejected > 0 && tally.accepted > corpus.len() as u64);
}

/// Writes the corpus (`cargo test -p larch-trace --test fuzz_decoders -- --ignored`): random
/// operation sequences and a small recorded Tezos-like workload, in both formats.
#[test]
#[ignore = "writes the checked-in corpus"]
fn write_corpus() {
    let (mut rng, _) = seeded_rng("fuzz_trace_corpus", 0xc0_4905);
    let dir = corpus_dir();
    for sub in ["larch", "irmin"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let mut sets = vec![random_ops(&mut rng, 12), random_ops(&mut rng, 40)];
    sets.push(record_tezos_like(&mut rng, 2, 12).0);
    for (i, ops) in sets.iter().enumerate() {
        let meta = vec![("generator".to_string(), "fuzz corpus".to_string())];
        std::fs::write(dir.join(format!("larch/{i}.larch")), write_larch(ops, &meta)).unwrap();
        std::fs::write(dir.join(format!("irmin/{i}.irmin")), write_irmin(ops)).unwrap();
    }
}
