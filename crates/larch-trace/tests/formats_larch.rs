//! larch's trace format: round trips, conversions with Irmin's format (byte-identical both ways),
//! truncation and corruption detection, size against `IrmRepBT`, and a fuzz loop.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod formats_support;

use formats_support::*;
use larch_testkit::seeded_rng;
use larch_trace::format::{
    LarchReader, LarchWriter, MAX_FRAME, Metadata, OpSink, TraceFormat, convert, create_trace, open_reader,
};
use larch_trace::{Op, TraceError};
use larch_varint::encode as varint;
use rand::Rng;

fn read_larch(bytes: &[u8]) -> Result<(Vec<Op>, Metadata), TraceError> {
    let mut reader = LarchReader::new(bytes)?;
    let ops = reader.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok((ops, reader.metadata().to_vec()))
}

fn larch_error(bytes: &[u8]) -> TraceError {
    match read_larch(bytes) {
        Ok((ops, _)) => panic!("expected an error, read {} ops", ops.len()),
        Err(err) => err,
    }
}

fn meta() -> Vec<(String, String)> {
    vec![("generator".into(), "test".into()), ("seed".into(), "42".into()), ("empty".into(), String::new())]
}

fn convert_bytes(bytes: &[u8], format: TraceFormat) -> Vec<u8> {
    let mut source = open_reader(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut out = Vec::new();
    let stats = convert(&mut *source, format, &mut out).unwrap();
    assert_eq!(stats.bytes_out, out.len() as u64);
    out
}

#[test]
fn random_ops_round_trip_with_metadata_and_rewrite_identically() {
    let (mut rng, _) = seeded_rng("larch_random_round_trip", 0x5eed);
    for round in 0..20 {
        let count = rng.random_range(0..150);
        let ops = random_ops(&mut rng, count);
        let bytes = write_larch(&ops, &meta());
        let (read, metadata) = read_larch(&bytes).unwrap();
        assert_eq!(read, ops, "round {round}");
        assert_eq!(metadata, meta());
        assert_eq!(write_larch(&read, &metadata), bytes, "round {round}");
    }
}

#[test]
fn large_traces_span_several_checksummed_chunks() {
    let (mut rng, _) = seeded_rng("larch_chunks", 3);
    let mut ops = random_ops(&mut rng, 200);
    // A few big values force chunk splits (1 MiB soft limit) in the middle of a block.
    for op in ops.iter_mut().step_by(40) {
        *op = Op::Add {
            path: larch_trace::Path::from_steps([b"big"]),
            value: vec![7; 700 << 10],
            input: larch_trace::Scoped::Keep(1),
            out: larch_trace::Scoped::Keep(2),
        };
    }
    let bytes = write_larch(&ops, &[]);
    // The end record: 'E', op count 200 (2 varint bytes), commit count (< 128), chunk count, crc32.
    let commits = ops.iter().filter(|op| matches!(op, Op::Commit { .. })).count();
    let end = &bytes[bytes.len() - 9..bytes.len() - 4];
    assert_eq!(&end[..4], &[b'E', 0xc8, 0x01, commits as u8]);
    assert!(end[4] >= 3, "{} chunks", end[4]);
    assert_eq!(read_larch(&bytes).unwrap().0, ops);
}

#[test]
fn fixture_converts_irmin_larch_irmin_byte_identically() {
    let irmin = fixture();
    let larch = convert_bytes(&irmin, TraceFormat::Larch);
    assert_eq!(read_larch(&larch).unwrap().0, fixture_ops());
    let back = convert_bytes(&larch, TraceFormat::Irmin);
    assert_eq!(back, irmin[..FIXTURE_COMPLETE]);
    // And larch -> irmin -> larch.
    assert_eq!(convert_bytes(&back, TraceFormat::Larch), larch);
    eprintln!("fixture: IrmRepBT {} bytes, larch {} bytes", FIXTURE_COMPLETE, larch.len());
}

#[test]
fn random_traces_convert_both_ways_byte_identically() {
    let (mut rng, _) = seeded_rng("larch_convert", 0xc0de);
    for round in 0..15 {
        let count = rng.random_range(0..100);
        let ops = random_ops(&mut rng, count);
        let irmin = write_irmin(&ops);
        let larch = write_larch(&ops, &[]);
        assert_eq!(convert_bytes(&irmin, TraceFormat::Larch), larch, "round {round}");
        assert_eq!(convert_bytes(&larch, TraceFormat::Irmin), irmin, "round {round}");
        assert_eq!(convert_bytes(&convert_bytes(&larch, TraceFormat::Irmin), TraceFormat::Larch), larch);
        assert_eq!(convert_bytes(&convert_bytes(&irmin, TraceFormat::Larch), TraceFormat::Irmin), irmin);
        // Same format: a copy.
        assert_eq!(convert_bytes(&irmin, TraceFormat::Irmin), irmin);
    }
}

#[test]
fn metadata_survives_larch_to_larch_conversion() {
    let ops = fixture_ops();
    let larch = write_larch(&ops, &meta());
    assert_eq!(convert_bytes(&larch, TraceFormat::Larch), larch);
}

#[test]
fn every_truncation_of_a_larch_trace_is_an_error() {
    let (mut rng, _) = seeded_rng("larch_truncation", 11);
    let ops = random_ops(&mut rng, 25);
    let bytes = write_larch(&ops, &meta());
    for cut in 0..bytes.len() {
        match read_larch(&bytes[..cut]) {
            Ok(_) => panic!("cut {cut} of {} read as complete", bytes.len()),
            Err(TraceError::Truncated { offset, .. }) => assert!(offset <= cut as u64, "cut {cut}"),
            Err(TraceError::BadHeader { .. }) => assert!(cut < 60, "cut {cut}"),
            Err(other) => panic!("cut {cut}: {other:?}"),
        }
    }
    // The operations before the cut are still delivered first (streaming).
    let mut reader = LarchReader::new(&bytes[..bytes.len() - 1]).unwrap();
    let read: Vec<_> = reader.by_ref().take(ops.len()).map(Result::unwrap).collect();
    assert_eq!(read, ops);
    assert!(matches!(reader.next(), Some(Err(TraceError::Truncated { .. }))));
    assert!(reader.next().is_none());
}

#[test]
fn every_flipped_bit_of_a_larch_trace_is_detected() {
    let (mut rng, _) = seeded_rng("larch_bit_flips", 12);
    let ops = random_ops(&mut rng, 12);
    let bytes = write_larch(&ops, &meta());
    let mut checksums = 0;
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[at] ^= 1 << bit;
            match read_larch(&bad) {
                Ok(_) => panic!("flip of bit {bit} at {at} went unnoticed"),
                Err(TraceError::ChecksumMismatch { .. }) => checksums += 1,
                Err(_) => {}
            }
        }
    }
    assert!(checksums > bytes.len() * 4, "{checksums}");
}

#[test]
fn malformed_larch_headers_and_blocks_are_typed_errors() {
    let good = write_larch(&fixture_ops(), &meta());
    assert!(matches!(larch_error(b"LARCHTRX\x01\x00"), TraceError::BadMagic { .. }));
    assert!(matches!(larch_error(b"LARCH"), TraceError::BadHeader { offset: 5, .. }));
    let mut version = good.clone();
    version[8] = 2;
    assert!(matches!(larch_error(&version), TraceError::UnsupportedVersion { version: 2, offset: 8, .. }));
    // Header crc.
    let mut header = good.clone();
    header[12] ^= 0x20;
    assert!(matches!(larch_error(&header), TraceError::ChecksumMismatch { what: "header", .. }));
    // Oversized header, announced but absent.
    let mut big = b"LARCHTRC\x01\x00".to_vec();
    big.extend_from_slice(&[0x81, 0x80, 0x40]);
    assert!(matches!(larch_error(&big), TraceError::FrameTooLarge { offset: 10, .. }));
    // Oversized chunk, announced but absent.
    let empty = write_larch(&[], &[]);
    let header_len = empty.len() - 8; // the end record: 'E', three zero counts, crc32
    let mut chunk = empty[..header_len].to_vec();
    chunk.extend_from_slice(b"C\x01");
    varint(&mut chunk, MAX_FRAME + 1);
    let err = larch_error(&chunk);
    assert!(
        matches!(err, TraceError::FrameTooLarge { offset, .. } if offset == header_len as u64),
        "{err:?}"
    );
    // Unknown block kind.
    let mut kind = empty.clone();
    kind[header_len] = b'X';
    assert!(matches!(larch_error(&kind), TraceError::Malformed { .. }));
    // Data after the end record.
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(
        matches!(larch_error(&trailing), TraceError::TrailingData { offset } if offset == good.len() as u64)
    );
    // An empty trace reads as empty.
    assert!(read_larch(&empty).unwrap().0.is_empty());
}

#[test]
fn end_record_counts_are_checked() {
    let ops = fixture_ops();
    let bytes = write_larch(&ops, &[]);
    // Rebuild the end record with a wrong op count and a valid crc.
    let end_at = bytes.len() - 8;
    assert_eq!(&bytes[end_at..end_at + 4], &[b'E', 6, 1, 1]);
    let mut bad = bytes[..end_at].to_vec();
    let record = [b'E', 7, 1, 1];
    bad.extend_from_slice(&record);
    bad.extend_from_slice(&crc32fast::hash(&record).to_le_bytes());
    let err = larch_error(&bad);
    assert!(
        matches!(err, TraceError::CountMismatch { what: "operation count", recorded: 7, actual: 6, .. }),
        "{err:?}"
    );
}

#[test]
fn unfinished_writers_leave_truncated_traces_and_finished_ones_refuse_writes() {
    let mut writer = LarchWriter::new(Vec::new(), &[]).unwrap();
    for op in fixture_ops() {
        writer.write_op(&op).unwrap();
    }
    let unfinished = writer.into_inner().unwrap();
    assert!(matches!(larch_error(&unfinished), TraceError::Truncated { .. }));
    let mut writer = LarchWriter::new(Vec::new(), &[]).unwrap();
    writer.finish().unwrap();
    writer.finish().unwrap();
    assert!(matches!(writer.write_op(&fixture_ops()[0]), Err(TraceError::Finished)));
}

#[test]
fn files_of_both_formats_open_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    let larch_path = dir.path().join("t.larch");
    let irmin_path = dir.path().join("t.repr");
    let fixture_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tezos_actions_1commit.repr");
    let stats = larch_trace::convert_file(&fixture_path, &larch_path, TraceFormat::Larch).unwrap();
    assert_eq!((stats.ops, stats.commits, stats.truncated_tail), (6, 1, Some(296)));
    assert_eq!(stats.bytes_in, 300);
    assert!(stats.to_string().contains("6 ops"));
    let mut source = larch_trace::open_trace(&larch_path).unwrap();
    assert_eq!(source.format(), TraceFormat::Larch);
    assert_eq!(source.by_ref().collect::<Result<Vec<_>, _>>().unwrap(), fixture_ops());
    larch_trace::convert_file(&larch_path, &irmin_path, TraceFormat::Irmin).unwrap();
    assert_eq!(std::fs::read(&irmin_path).unwrap(), fixture()[..FIXTURE_COMPLETE]);
    // Errors name the file.
    let missing = dir.path().join("missing");
    assert!(matches!(larch_trace::open_trace(&missing), Err(TraceError::Open { .. })));
    std::fs::write(&missing, b"garbage!").unwrap();
    let err = larch_trace::open_trace(&missing).err().unwrap();
    assert!(matches!(err, TraceError::File { .. }));
    assert!(matches!(err.root(), TraceError::BadMagic { .. }));
    // A writer created on a file.
    let mut sink = create_trace(&dir.path().join("w.larch"), TraceFormat::Larch, &meta()).unwrap();
    sink.write_op(&fixture_ops()[0]).unwrap();
    sink.finish().unwrap();
}

#[test]
fn larch_is_much_smaller_than_irmin_on_a_tezos_like_trace() {
    let (mut rng, _) = seeded_rng("larch_size_ratio", 2024);
    let (ops, _) = record_tezos_like(&mut rng, 30, 400);
    let irmin = write_irmin(&ops);
    let larch = write_larch(&ops, &[]);
    let ratio = larch.len() as f64 / irmin.len() as f64;
    eprintln!(
        "tezos-like recorded trace, {} ops: IrmRepBT {} bytes ({:.1} B/op), larch {} bytes ({:.1} B/op), ratio {ratio:.3}",
        ops.len(),
        irmin.len(),
        irmin.len() as f64 / ops.len() as f64,
        larch.len(),
        larch.len() as f64 / ops.len() as f64
    );
    assert!(ratio < 0.5, "ratio {ratio}");
    assert_eq!(convert_bytes(&larch, TraceFormat::Irmin), irmin);
}

#[test]
fn fuzz_mutated_larch_traces_never_panic() {
    let (mut rng, _) = seeded_rng("larch_fuzz", 0xbeef);
    let mut seeds = vec![write_larch(&fixture_ops(), &meta())];
    for _ in 0..3 {
        let count = rng.random_range(1..40);
        seeds.push(write_larch(&random_ops(&mut rng, count), &[]));
    }
    let mut rejected = 0;
    for _ in 0..3000 {
        let bytes = mutated(&mut rng, &seeds);
        // Through the sniffing reader too.
        let sniffed = open_reader(std::io::Cursor::new(bytes.clone())).map(|mut r| r.by_ref().count());
        if read_larch(&bytes).is_err() {
            rejected += 1;
        }
        drop(sniffed);
    }
    assert!(rejected > 2900, "{rejected}");
}

/// A larch trace whose only chunk holds `count` records in `payload` (valid checksums throughout).
fn trace_with_chunk(count: u8, payload: &[u8]) -> Vec<u8> {
    let empty = write_larch(&[], &[]);
    let mut bytes = empty[..empty.len() - 8].to_vec();
    let mut chunk = vec![b'C', count];
    varint(&mut chunk, payload.len() as u64);
    chunk.extend_from_slice(payload);
    let crc = crc32fast::hash(&chunk);
    bytes.extend_from_slice(&chunk);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let end = [b'E', count, 0, 1];
    bytes.extend_from_slice(&end);
    bytes.extend_from_slice(&crc32fast::hash(&end).to_le_bytes());
    bytes
}

#[test]
fn malformed_larch_records_are_typed_errors() {
    // The hand-built chunk format itself is right: find [] (found, Keep, id predicted) reads back.
    let find = 4 | 1 << 3 | 1 << 4 | 1 << 5;
    let (ops, _) = read_larch(&trace_with_chunk(1, &[find, 0])).unwrap();
    assert_eq!(
        ops,
        vec![Op::Find { path: larch_trace::Path::new(), found: true, input: larch_trace::Scoped::Keep(0) }]
    );
    let payload_at = 16 + 3;
    // A tag with a bit that find does not use.
    let err = larch_error(&trace_with_chunk(1, &[find | 1 << 7, 0]));
    assert!(
        matches!(err, TraceError::UnknownRowTag { row: 0, offset, .. } if offset == payload_at),
        "{err:?}"
    );
    // Bytes left in the chunk after its records.
    let err = larch_error(&trace_with_chunk(1, &[find, 0, 0]));
    assert!(matches!(err, TraceError::Malformed { row: 1, .. }), "{err:?}");
    // A record running past the end of its chunk.
    let err = larch_error(&trace_with_chunk(2, &[find, 0]));
    assert!(matches!(err, TraceError::Malformed { row: 1, .. }), "{err:?}");
    // A path keeping more steps than the previous path has.
    let err = larch_error(&trace_with_chunk(1, &[find, 1 << 3]));
    assert!(matches!(err, TraceError::Malformed { row: 0, .. }), "{err:?}");
    // A step reference beyond the step table, an empty hex step, step kind 3.
    for step in [2u8, 1, 3] {
        let err = larch_error(&trace_with_chunk(1, &[find, 1, step]));
        assert!(matches!(err, TraceError::Malformed { row: 0, .. }), "step {step}: {err:?}");
    }
    // A chunk of zero records.
    let err = larch_error(&trace_with_chunk(0, &[]));
    assert!(matches!(err, TraceError::Malformed { row: 0, .. }), "{err:?}");
}

#[test]
fn paths_over_the_bounds_are_refused_on_read_and_on_write() {
    use larch_trace::op::{MAX_PATH_BYTES, MAX_PATH_STEPS};
    let find = |path: larch_trace::Path| Op::Find { path, found: true, input: larch_trace::Scoped::Keep(0) };
    // One step of `len` bytes takes `len + 3` (its length as a three-byte varint).
    let one_step = |len: usize| larch_trace::Path::from_steps([vec![b'x'; len]]);
    let empty_steps = |count: usize| larch_trace::Path::from_steps(std::iter::repeat_n(b"", count));
    assert_eq!(one_step(MAX_PATH_BYTES - 3).byte_len(), MAX_PATH_BYTES);
    for (path, what) in
        [(one_step(MAX_PATH_BYTES - 3), "1 MiB"), (empty_steps(MAX_PATH_STEPS), "131,072 steps")]
    {
        let ops = vec![find(path)];
        assert_eq!(read_larch(&write_larch(&ops, &[])).unwrap().0, ops, "{what} read back");
    }
    for (path, what) in
        [(one_step(MAX_PATH_BYTES - 2), "1 MiB + 1"), (empty_steps(MAX_PATH_STEPS + 1), "131,073 steps")]
    {
        let mut writer = LarchWriter::new(Vec::new(), &[]).unwrap();
        let err = writer.write_op(&find(path)).unwrap_err();
        assert!(matches!(err, TraceError::Unwritable { row: 0, .. }), "{what}: {err:?}");
    }
    // On read: a find record (kept, found, input id predicted) of a raw, a hex or referred steps.
    let tag = 4 | 1 << 3 | 1 << 4 | 1 << 5;
    let raw = |len: usize| {
        let mut payload = vec![tag, 1];
        varint(&mut payload, (len as u64) << 2);
        payload.extend(std::iter::repeat_n(b'x', len));
        payload
    };
    let hex = |len: usize| {
        let mut payload = vec![tag, 1];
        varint(&mut payload, (len as u64) << 2 | 1);
        payload.extend(std::iter::repeat_n(0xab, len));
        payload
    };
    let references = |count: u64| {
        let mut payload = vec![tag, 7];
        varint(&mut payload, count + 1 - 7);
        varint(&mut payload, 1000 << 2);
        payload.extend(std::iter::repeat_n(b'y', 1000));
        for _ in 0..count {
            varint(&mut payload, 2);
        }
        payload
    };
    let empty = |count: usize| {
        let mut payload = vec![tag, 7];
        varint(&mut payload, count as u64 - 7);
        payload.extend(std::iter::repeat_n(0, count));
        payload
    };
    for (payload, fits, what) in [
        (empty(MAX_PATH_STEPS), true, "131,072 empty steps"),
        (empty(MAX_PATH_STEPS + 1), false, "131,073 empty steps"),
        (raw(MAX_PATH_BYTES - 3), true, "a raw step of 1 MiB in all"),
        (raw(MAX_PATH_BYTES - 2), false, "a raw step one byte over"),
        (hex((MAX_PATH_BYTES - 4) / 2), true, "a hex step within"),
        (hex((MAX_PATH_BYTES - 2) / 2), false, "a hex step over"),
        (references(1045), true, "1,046 steps of 1,000 bytes"),
        (references(1046), false, "1,047 steps of 1,000 bytes"),
    ] {
        let bytes = trace_with_chunk(1, &payload);
        if fits {
            let (ops, _) = read_larch(&bytes).unwrap_or_else(|err| panic!("{what}: {err:?}"));
            let Op::Find { path, .. } = &ops[0] else { panic!("{what}: {ops:?}") };
            assert!(path.byte_len() <= MAX_PATH_BYTES, "{what}");
        } else {
            let err = larch_error(&bytes);
            assert!(matches!(err, TraceError::Malformed { row: 0, .. }), "{what}: {err:?}");
        }
    }
}

#[test]
fn a_chunk_decodes_into_at_most_64_times_its_size_and_writers_split_to_stay_within() {
    // A record keeping the whole previous path costs three bytes: a path of ~1 MiB made of
    // references, then records keeping all of it, decode into ~1 MiB each. The chunk may decode
    // into 64 times its size and 2 MiB: two such paths fit, the third is refused.
    let tag = 4 | 1 << 3 | 1 << 4 | 1 << 5;
    let mut payload = vec![tag, 7];
    varint(&mut payload, 1000 - 7);
    varint(&mut payload, 1000 << 2);
    payload.extend(std::iter::repeat_n(b'y', 1000));
    for _ in 0..999 {
        varint(&mut payload, 2);
    }
    for _ in 0..3 {
        payload.push(tag);
        varint(&mut payload, 1000 << 3);
    }
    let err = larch_error(&trace_with_chunk(4, &payload));
    assert!(matches!(err, TraceError::Malformed { row: 2, .. }), "{err:?}");
    // The writer starts a new chunk instead: 40 finds of one such path read back.
    let path = larch_trace::Path::from_steps(std::iter::repeat_n([b'y'; 1000], 1000));
    let ops: Vec<Op> = (0..40)
        .map(|_| Op::Find { path: path.clone(), found: true, input: larch_trace::Scoped::Keep(0) })
        .collect();
    assert_eq!(read_larch(&write_larch(&ops, &[])).unwrap().0, ops);
}
