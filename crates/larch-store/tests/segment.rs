//! GC segment files `seg.<gen>` (docs/gc-design.md §3.3): golden bytes assembled by hand from the
//! format table, every single-byte corruption of the header, mapping and footer refused with a
//! typed error, truncations refused, and a seeded property test of the lookup against a model of
//! the runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::Hash;
use larch_store::testing::segment::{Segment, SegmentHeader, SegmentSlot, SegmentWriter};
use larch_store::testing::storage::{MemStorage, Storage};
use larch_store::{FileKind, StoreError};
use larch_testkit::seeded_rng;
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

fn header() -> SegmentHeader {
    SegmentHeader {
        generation: 1,
        range_start: 16,
        range_end: 0x1000,
        keep_from: 0x2000,
        index_keep_from: 60,
        commit: Hash([0xab; 32]),
    }
}

/// The example segment of docs/gc-design.md §3.3: runs at 100 (10 + 5 bytes, pushed as two
/// adjacent runs, merged) and at 200 (3 bytes).
fn example() -> Vec<u8> {
    let storage = Arc::new(MemStorage::new());
    let mut writer = SegmentWriter::new(storage.clone(), header()).unwrap();
    writer.push_run(100, &[1; 10]).unwrap();
    writer.push_run(110, &[2; 5]).unwrap();
    writer.push_run(200, &[4; 3]).unwrap();
    let summary = writer.finish().unwrap();
    assert_eq!(summary.footer_crc, 0x7d80_7be2);
    assert_eq!((summary.runs, summary.record_bytes, summary.file_len), (2, 18, 178));
    storage.snapshot()
}

/// Expected bytes, computed from the format table (Python's `zlib.crc32` for the checksums).
const GOLDEN: &str = concat!(
    // header: magic, version 3, reserved, gen 1, range [16, 0x1000), keep_from 0x2000,
    // index_keep_from 60, commit hash, header crc, reserved
    "4c41524348534547",
    "03000000",
    "00000000",
    "0100000000000000",
    "1000000000000000",
    "0010000000000000",
    "0020000000000000",
    "3c00000000000000",
    "abababababababababababababababababababababababababababababababab",
    "15a42049",
    "00000000",
    // runs
    "010101010101010101010202020202",
    "040404",
    // mapping: (100, 96), (200, 111)
    "6400000000000000",
    "6000000000000000",
    "c800000000000000",
    "6f00000000000000",
    // footer: map_at 114, 2 runs, mapping crc, footer crc, end magic
    "7200000000000000",
    "0200000000000000",
    "681b06f7",
    "e27b807d",
    "4c41524348534745",
);

#[test]
fn golden_bytes() {
    assert_eq!(hex::encode(example()), GOLDEN);
}

fn open(bytes: Vec<u8>) -> Result<Segment, StoreError> {
    Segment::open(Arc::new(MemStorage::from_bytes(bytes)))
}

#[test]
fn lookups_in_the_example() {
    let segment = open(example()).unwrap();
    assert_eq!(segment.header(), &header());
    assert_eq!(segment.locate(100).unwrap(), SegmentSlot { position: 96, available: 15 });
    assert_eq!(segment.locate(112).unwrap(), SegmentSlot { position: 108, available: 3 });
    assert_eq!(segment.locate(202).unwrap(), SegmentSlot { position: 113, available: 1 });
    for collected in [16, 99, 115, 199, 203, 0xfff] {
        assert!(
            matches!(segment.locate(collected), Err(StoreError::CollectedObject { offset, gc_generation: 1 }) if offset == collected),
            "{collected}"
        );
    }
    for outside in [0, 15, 0x1000, u64::MAX] {
        assert!(matches!(segment.locate(outside), Err(StoreError::Corrupt { file: FileKind::Segment, .. })));
    }
    let mut buf = [0u8; 4];
    segment.read_global(108, &mut buf).unwrap();
    assert_eq!(buf, [1, 1, 2, 2]);
    assert!(segment.read_global(113, &mut buf).is_err(), "a read leaving its run");
}

fn is_typed_segment_error(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Corrupt { file: FileKind::Segment, .. }
            | StoreError::UnknownVersion { file: FileKind::Segment, .. }
    )
}

#[test]
fn every_single_byte_corruption_of_header_mapping_or_footer_is_refused() {
    let good = example();
    let map_at = 114;
    // Every byte except the runs' (records carry their own checksums, checked when read).
    let positions = (0..96).chain(map_at..good.len());
    let mut tried = 0;
    for position in positions {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[position] ^= flip;
            match open(bad) {
                Ok(_) => panic!("byte {position} ^ {flip:#04x} accepted"),
                Err(error) => assert!(is_typed_segment_error(&error), "byte {position}: {error}"),
            }
            tried += 1;
        }
    }
    assert_eq!(tried, 3 * (96 + 64));
    for len in 0..good.len() {
        let error = open(good[..len].to_vec()).err().unwrap_or_else(|| panic!("truncated to {len} accepted"));
        assert!(is_typed_segment_error(&error), "{len}: {error}");
    }
    let mut longer = good.clone();
    longer.push(0);
    assert!(open(longer).is_err());
}

/// A footer and mapping rewritten with valid checksums but an inconsistent mapping are refused
/// (the CRCs alone do not make a mapping valid).
#[test]
fn a_checksummed_but_inconsistent_mapping_is_refused() {
    let good = example();
    let rewrite = |mapping: &[(u64, u64)], map_at: u64| -> Vec<u8> {
        let mut bytes = good[..map_at as usize].to_vec();
        bytes.resize(map_at as usize, 0);
        let mut map = Vec::new();
        for (global, position) in mapping {
            map.extend_from_slice(&global.to_le_bytes());
            map.extend_from_slice(&position.to_le_bytes());
        }
        let mut footer = Vec::new();
        footer.extend_from_slice(&map_at.to_le_bytes());
        footer.extend_from_slice(&(mapping.len() as u64).to_le_bytes());
        footer.extend_from_slice(&crc32fast::hash(&map).to_le_bytes());
        let crc = crc32fast::hash(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        footer.extend_from_slice(b"LARCHSGE");
        bytes.extend_from_slice(&map);
        bytes.extend_from_slice(&footer);
        bytes
    };
    assert!(open(rewrite(&[(100, 96), (200, 111)], 114)).is_ok(), "the rewrite itself is right");
    for (mapping, map_at) in [
        (&[(200, 96), (100, 111)][..], 114),          // globals decreasing
        (&[(100, 96), (105, 111)][..], 114),          // runs overlapping
        (&[(100, 97), (200, 111)][..], 114),          // first run not at 96
        (&[(100, 96), (200, 96)][..], 114),           // empty run
        (&[(100, 96), (0xffe, 111)][..], 114),        // last run leaves the range
        (&[(8, 96), (200, 111)][..], 114),            // run below the range
        (&[(100, 96), (200, 120)][..], 114),          // position past map_at
        (&[(100, 96), (u64::MAX - 1, 111)][..], 114), // overflow
        (&[][..], 114),                               // no runs but record bytes
    ] {
        let error = open(rewrite(mapping, map_at)).err().unwrap_or_else(|| panic!("{mapping:?} accepted"));
        assert!(is_typed_segment_error(&error), "{mapping:?}: {error}");
    }
    // A huge run count: refused before any allocation from it.
    let mut bad = good.clone();
    let footer = bad.len() - 32;
    bad[footer + 8..footer + 16].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    let crc = crc32fast::hash(&bad[footer..footer + 20]);
    bad[footer + 20..footer + 24].copy_from_slice(&crc.to_le_bytes());
    assert!(open(bad).is_err());
}

#[test]
fn lookup_matches_a_model_of_the_runs() {
    let (mut rng, _seed) = seeded_rng("lookup_matches_a_model_of_the_runs", 0x5e6);
    for case in 0..200 {
        let range_start = rng.random_range(16..10_000u64);
        let range_end = range_start + rng.random_range(0..5_000u64);
        let header = SegmentHeader { range_start, range_end, generation: case, ..header() };
        // Random records of the range, each live or not; live ones are pushed, adjacent ones
        // form one run.
        let mut model: BTreeMap<u64, u8> = BTreeMap::new();
        let storage = Arc::new(MemStorage::new());
        let mut writer = SegmentWriter::new(storage.clone(), header).unwrap();
        let mut at = range_start;
        while at < range_end {
            let len = rng.random_range(1..=60u64).min(range_end - at);
            if rng.random_bool(0.4) {
                let byte = rng.random::<u8>();
                writer.push_run(at, &vec![byte; len as usize]).unwrap();
                for g in at..at + len {
                    model.insert(g, byte);
                }
            }
            at += len;
        }
        let summary = writer.finish().unwrap();
        assert_eq!(summary.file_len, storage.len().unwrap());
        let segment = Segment::open(storage).unwrap();
        assert_eq!(segment.summary(), summary);
        assert_eq!(summary.record_bytes, model.len() as u64);
        // Runs are maximal: no two adjacent in global offsets.
        let runs: Vec<_> = segment.runs().collect();
        assert!(runs.windows(2).all(|pair| pair[0].0 + pair[0].2 < pair[1].0));
        for _ in 0..300 {
            let global = rng.random_range(range_start.saturating_sub(5)..range_end + 5);
            match (segment.locate(global), model.get(&global)) {
                (Ok(slot), Some(byte)) => {
                    let mut buf = [0u8];
                    segment.read_global(global, &mut buf).unwrap();
                    assert_eq!(buf[0], *byte, "case {case}: byte at {global}");
                    // `available` reaches exactly the end of the run.
                    let run_end = (global..).find(|g| !model.contains_key(g)).unwrap();
                    assert_eq!(slot.available, run_end - global, "case {case} at {global}");
                }
                (Err(StoreError::CollectedObject { offset, .. }), None) if offset == global => {
                    assert!((range_start..range_end).contains(&global));
                }
                (Err(StoreError::Corrupt { .. }), None) => {
                    assert!(!(range_start..range_end).contains(&global), "case {case}: {global}");
                }
                (got, want) => panic!("case {case}: {global}: {got:?}, model {want:?}"),
            }
        }
    }
}
