//! Fuzzing of the GC segment decoder (`seg.<gen>`, docs/gc-design.md §3.3; harness described in
//! docs/fuzzing.md): the checked-in corpus (`tests/fuzz-corpus/segment/`) is opened as is, then
//! seeded structured mutations of it are opened and looked up, with the header, mapping and footer
//! checksums recomputed after a mutation half of the time so that the checks behind them are
//! reached. No input may panic, hang, or make an allocation larger than its size justifies.
//!
//! `LARCH_FUZZ_ITERS` multiplies the number of inputs; `LARCH_SEED` replays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::Hash;
use larch_store::testing::segment::{Segment, SegmentHeader, SegmentWriter};
use larch_store::testing::storage::MemStorage;
use larch_testkit::fuzz::{FuzzTally, PeakAlloc, largest_allocation, mutated};
use larch_testkit::{TestRng, seeded_rng};
use rand::Rng;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

const MAX_INPUT_TIME: Duration = Duration::from_secs(10);

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/segment")
}

fn iterations(base: u64) -> u64 {
    let factor = std::env::var("LARCH_FUZZ_ITERS").ok().and_then(|text| text.parse().ok()).unwrap_or(1u64);
    base * factor.max(1)
}

/// Opens `input` as a segment and, if valid, looks up offsets around every run and reads there.
fn decode_segment(input: &[u8], rng_bytes: u64) -> bool {
    let Ok(segment) = Segment::open(Arc::new(MemStorage::from_bytes(input.to_vec()))) else { return false };
    let header = *segment.header();
    let runs: Vec<(u64, u64, u64)> = segment.runs().collect();
    let mut probes = vec![header.range_start, header.range_end.saturating_sub(1), rng_bytes];
    for (global, _, len) in &runs {
        probes.extend([
            global.saturating_sub(1),
            *global,
            global.saturating_add(len.saturating_sub(1)),
            global + len,
        ]);
    }
    for global in probes {
        if let Ok(slot) = segment.locate(global) {
            assert!(slot.available > 0);
            let mut buf = vec![0u8; slot.available.min(64) as usize];
            segment.read_global(global, &mut buf).unwrap();
        }
    }
    true
}

/// Recomputes the header, mapping and footer checksums of a segment image, where the fields that
/// locate them allow it.
fn fix_crcs(bytes: &mut [u8]) {
    if bytes.len() >= 96 {
        let crc = crc32fast::hash(&bytes[..88]);
        bytes[88..92].copy_from_slice(&crc.to_le_bytes());
    }
    if bytes.len() >= 128 {
        let footer = bytes.len() - 32;
        let map_at = u64::from_le_bytes(bytes[footer..footer + 8].try_into().unwrap());
        if let Ok(map_at) = usize::try_from(map_at)
            && map_at <= footer
        {
            let crc = crc32fast::hash(&bytes[map_at..footer]);
            bytes[footer + 16..footer + 20].copy_from_slice(&crc.to_le_bytes());
        }
        let crc = crc32fast::hash(&bytes[footer..footer + 20]);
        bytes[footer + 20..footer + 24].copy_from_slice(&crc.to_le_bytes());
    }
}

fn read_corpus() -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(corpus_dir()).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    let items: Vec<Vec<u8>> = files.iter().map(|file| std::fs::read(file).unwrap()).collect();
    assert!(!items.is_empty(), "empty segment corpus");
    items
}

fn run_one(tally: &mut FuzzTally, input: &[u8], probe: u64) {
    let allowed = 4096 + 64 * input.len();
    let start = Instant::now();
    let (outcome, largest) = largest_allocation(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode_segment(input, probe)))
    });
    let accepted =
        outcome.unwrap_or_else(|_| panic!("the segment decoder panicked on {}", hex::encode(input)));
    assert!(start.elapsed() < MAX_INPUT_TIME, "hang on {}", hex::encode(input));
    assert!(
        largest <= allowed,
        "an allocation of {largest} bytes for {} input bytes: {}",
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

#[test]
fn segment_decoder_survives_mutations() {
    let corpus = read_corpus();
    let mut tally = FuzzTally::default();
    for item in &corpus {
        run_one(&mut tally, item, 0);
    }
    assert_eq!(tally.accepted, corpus.len() as u64, "every corpus segment opens");
    let (mut rng, _) = seeded_rng("fuzz_segments", 0x5eed_0005);
    for _ in 0..iterations(20_000) {
        let mut input = mutated(&mut rng, &corpus);
        if rng.random() {
            fix_crcs(&mut input);
        }
        let probe = rng.random_range(0..20_000);
        run_one(&mut tally, &input, probe);
    }
    eprintln!("fuzz segments: {tally:?}");
    assert!(tally.rejected > 0 && tally.accepted > corpus.len() as u64, "{tally:?}");
}

fn corpus_segment(rng: &mut TestRng, generation: u64, range: (u64, u64), density: f64) -> Vec<u8> {
    let header = SegmentHeader {
        generation,
        range_start: range.0,
        range_end: range.1,
        keep_from: range.1 + 100,
        index_keep_from: 16 + 44 * generation,
        commit: Hash([generation as u8; 32]),
    };
    let storage = Arc::new(MemStorage::new());
    let mut writer = SegmentWriter::new(storage.clone(), header).unwrap();
    let mut at = range.0;
    while at < range.1 {
        let len = rng.random_range(1..40u64).min(range.1 - at);
        if rng.random_bool(density) {
            let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            writer.push_run(at, &bytes).unwrap();
        }
        at += len;
    }
    writer.finish().unwrap();
    storage.snapshot()
}

/// Regenerates the corpus (`cargo test -p larch-store --test fuzz_segment -- --ignored`).
#[test]
#[ignore]
fn write_corpus() {
    let (mut rng, _) = seeded_rng("segment_corpus", 7);
    std::fs::create_dir_all(corpus_dir()).unwrap();
    let items = [
        ("empty", corpus_segment(&mut rng, 1, (16, 16), 0.0)),
        ("no-runs", corpus_segment(&mut rng, 2, (16, 4096), 0.0)),
        ("sparse", corpus_segment(&mut rng, 3, (16, 2000), 0.2)),
        ("dense", corpus_segment(&mut rng, 4, (5000, 6000), 0.8)),
    ];
    for (name, bytes) in items {
        std::fs::write(corpus_dir().join(name), bytes).unwrap();
    }
}
