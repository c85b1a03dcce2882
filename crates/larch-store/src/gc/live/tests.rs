//! [`LiveRuns`] against the plain list of records it replaces, on seeded random layouts: a pack
//! image of framed records (some huge), a random live subset, random split points among the
//! record boundaries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::*;
use crate::format::codec::{RecordKind, frame};
use larch_testkit::seeded_rng;
use rand::Rng;

/// A pack image from offset 16: framed records of random sizes; returns the image and the
/// records (offset, length).
fn image(rng: &mut impl Rng, count: usize) -> (Vec<u8>, Vec<(u64, u32)>) {
    let mut bytes = vec![0u8; 16];
    let mut records = Vec::new();
    for _ in 0..count {
        let body_len = match rng.random_range(0..20) {
            0 => rng.random_range(60_000..140_000),
            1..=4 => rng.random_range(200..2000),
            _ => rng.random_range(0..120),
        };
        let body: Vec<u8> = (0..body_len).map(|_| rng.random()).collect();
        let start = bytes.len();
        frame(&mut bytes, RecordKind::Contents, &body);
        records.push((start as u64, (bytes.len() - start) as u32));
    }
    (bytes, records)
}

#[test]
fn runs_match_the_list_of_records() {
    let (mut rng, seed) = seeded_rng("live_runs", 0x11fe_5e75);
    println!("seed {seed}");
    for trial in 0..60 {
        let count = rng.random_range(0..400);
        let (bytes, records) = image(&mut rng, count);
        let end = bytes.len() as u64;
        let read = |offset: u64, buf: &mut [u8]| -> Result<()> {
            buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
            Ok(())
        };
        let density = rng.random_range(0.0..1.0);
        let live: Vec<(u64, u32)> = records.iter().copied().filter(|_| rng.random_bool(density)).collect();
        let splits: Vec<u64> =
            records.iter().map(|(offset, _)| *offset).filter(|_| rng.random_bool(0.05)).collect();
        let mut builder = LiveRunsBuilder::new(splits.clone());
        for &(offset, len) in live.iter().rev() {
            builder.push(offset, len).unwrap();
        }
        let mut runs = builder.finish();
        let context = format!("seed {seed} trial {trial}");
        assert_eq!(runs.record_count(), live.len() as u64, "{context}");
        assert_eq!(runs.bytes(), live.iter().map(|(_, len)| u64::from(*len)).sum::<u64>(), "{context}");
        assert_eq!(runs.records(&read).unwrap(), live, "{context}");
        // Runs: never across a split point, within the cap unless one record, maximal otherwise.
        let list: Vec<(u64, u64, u32)> = runs.runs().collect();
        for (start, len, count) in &list {
            assert!(*len <= RUN_CAP || *count == 1, "{context}");
            assert!(!splits.iter().any(|split| split > start && *split < start + len), "{context}");
        }
        for pair in list.windows(2) {
            let (start, len, _) = pair[0];
            let (next, next_len, _) = pair[1];
            if start + len == next && len + next_len <= RUN_CAP {
                assert!(splits.contains(&next), "{context}: runs at {start} and {next} could be one");
            }
        }
        // Bytes in ranges between record boundaries (and the ends), records starting in a range.
        let mut cuts: Vec<u64> = records.iter().map(|(offset, _)| *offset).collect();
        cuts.extend([0, 16, end, end + 100]);
        for _ in 0..30 {
            let from = cuts[rng.random_range(0..cuts.len())];
            let to = cuts[rng.random_range(0..cuts.len())];
            let expected: u64 = live
                .iter()
                .filter(|(offset, _)| (from..to).contains(offset))
                .map(|(_, len)| u64::from(*len))
                .sum();
            assert_eq!(runs.bytes_in(from, to), expected, "{context}: [{from}, {to})");
        }
        // Record starts, and offsets inside records.
        for _ in 0..60 {
            let offset = match rng.random_bool(0.5) {
                true if !records.is_empty() => records[rng.random_range(0..records.len())].0,
                _ => rng.random_range(0..end + 10),
            };
            let expected = live.binary_search_by_key(&offset, |(start, _)| *start).is_ok();
            assert_eq!(runs.contains_start(offset, &read).unwrap(), expected, "{context}: {offset}");
        }
        // Cutting at split points (as the worker does: chunk and segment bounds).
        if let Some(&cut) = splits.get(rng.random_range(0..splits.len().max(1))) {
            let below: Vec<(u64, u64, u32)> = runs
                .runs_below(cut)
                .unwrap()
                .iter()
                .map(|run| (run.start, u64::from(run.len), run.records))
                .collect();
            let expected: Vec<&(u64, u32)> = live.iter().filter(|(offset, _)| *offset < cut).collect();
            assert_eq!(
                below.iter().map(|(_, _, count)| u64::from(*count)).sum::<u64>(),
                expected.len() as u64
            );
            assert_eq!(
                below.iter().map(|(_, len, _)| len).sum::<u64>(),
                expected.iter().map(|(_, len)| u64::from(*len)).sum::<u64>()
            );
            runs.retain_from(cut).unwrap();
            let rest: Vec<(u64, u32)> = live.iter().copied().filter(|(offset, _)| *offset >= cut).collect();
            assert_eq!(runs.records(&read).unwrap(), rest, "{context}: retain from {cut}");
            assert_eq!(runs.record_count(), rest.len() as u64, "{context}");
            assert_eq!(runs.bytes(), rest.iter().map(|(_, len)| u64::from(*len)).sum::<u64>(), "{context}");
        }
    }
}

#[test]
fn a_cut_inside_a_run_is_refused() {
    let mut builder = LiveRunsBuilder::new(Vec::new());
    for offset in [300u64, 200, 100] {
        builder.push(offset, 100).unwrap();
    }
    let mut runs = builder.finish();
    assert_eq!(runs.run_count(), 1);
    assert!(runs.runs_below(200).is_err());
    assert!(runs.retain_from(250).is_err());
    assert!(runs.retain_from(100).is_ok());
    assert_eq!(runs.record_count(), 3);
    // Records must come in decreasing order without overlap.
    let mut builder = LiveRunsBuilder::new(Vec::new());
    builder.push(100, 50).unwrap();
    assert!(builder.push(120, 10).is_err());
}

#[test]
fn contiguous_records_make_few_runs() {
    let mut builder = LiveRunsBuilder::new(vec![1 << 30]);
    let count = 1_000_000u64;
    for i in (0..count).rev() {
        builder.push(16 + i * 200, 200).unwrap();
    }
    let runs = builder.finish();
    // 200 MB of records: runs of as many whole records as fit in 64 KiB (and one more at the
    // split point).
    assert_eq!(runs.record_count(), count);
    let per_run = RUN_CAP / 200;
    assert!(runs.run_count() <= count.div_ceil(per_run) as usize + 1, "{}", runs.run_count());
    assert!(runs.heap_bytes() * 100 < (count as usize) * 16, "{}", runs.heap_bytes());
}
