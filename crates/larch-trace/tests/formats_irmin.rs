//! Irmin's `IrmRepBT` trace: the real fixture, byte-exact re-encoding, random round trips, and every
//! kind of malformed input giving its typed error (never a panic).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod formats_support;

use formats_support::*;
use larch_testkit::seeded_rng;
use larch_trace::format::{IrminReader, IrminWriter, MAX_FRAME, OpSink, OpSource, TraceFormat, open_reader};
use larch_trace::{Op, Scoped, TraceError};
use rand::Rng;

fn read_all(bytes: &[u8]) -> Result<(Vec<Op>, Option<u64>), TraceError> {
    let mut reader = IrminReader::new(bytes)?;
    let ops = reader.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok((ops, reader.truncated_tail()))
}

/// The first error of reading `bytes` completely (header or rows).
fn first_error(bytes: &[u8]) -> TraceError {
    match read_all(bytes) {
        Ok(result) => panic!("expected an error, read {result:?}"),
        Err(err) => err,
    }
}

/// A valid trace of `ops` with its last frame replaced by `payload`.
fn with_frame(ops: &[Op], payload: &[u8]) -> Vec<u8> {
    let mut bytes = write_irmin(ops);
    assert!(payload.len() < 128);
    bytes.push(payload.len() as u8);
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn fixture_decodes_to_its_six_rows_and_reports_the_truncated_tail() {
    let bytes = fixture();
    assert_eq!(bytes.len(), 300);
    let mut reader = IrminReader::new(&bytes[..]).unwrap();
    let ops = reader.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(ops, fixture_ops());
    assert_eq!(reader.truncated_tail(), Some(FIXTURE_COMPLETE as u64));
    assert_eq!(reader.rows_read(), 6);
    assert_eq!(reader.offset(), 300);
    assert_eq!(reader.format(), TraceFormat::Irmin);
    assert!(reader.next().is_none(), "the reader is fused");
}

#[test]
fn fixture_reencodes_byte_for_byte() {
    let bytes = fixture();
    assert_eq!(write_irmin(&fixture_ops()), bytes[..FIXTURE_COMPLETE]);
    // And the complete part read alone has no truncated tail and the same rows.
    let (ops, tail) = read_all(&bytes[..FIXTURE_COMPLETE]).unwrap();
    assert_eq!((ops, tail), (fixture_ops(), None));
}

#[test]
fn fixture_replays_to_its_recorded_hash() {
    let (ops, _) = read_all(&fixture()).unwrap();
    assert_eq!(replay_and_check(&ops), 1);
}

#[test]
fn fixture_is_sniffed_and_opened_from_a_file() {
    let reader = open_reader(std::io::Cursor::new(fixture())).unwrap();
    assert_eq!(reader.format(), TraceFormat::Irmin);
    let sniff = |bytes: &[u8]| open_reader(std::io::Cursor::new(bytes.to_vec())).err().unwrap();
    assert!(matches!(sniff(b""), TraceError::BadMagic { ref found, .. } if found.is_empty()));
    assert!(matches!(sniff(b"IrmR"), TraceError::BadHeader { format: TraceFormat::Irmin, offset: 4, .. }));
    assert!(matches!(sniff(b"LARC"), TraceError::BadHeader { format: TraceFormat::Larch, offset: 4, .. }));
    assert!(matches!(sniff(b"IrmStaBT\0\0\0\0"), TraceError::BadMagic { .. }));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tezos_actions_1commit.repr");
    let mut source = larch_trace::open_trace(&path).unwrap();
    let ops = source.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(ops.len(), 6);
    assert_eq!(source.truncated_tail(), Some(296));
    assert!(source.metadata().is_empty());
}

#[test]
fn random_ops_round_trip_and_rewrite_identically() {
    let (mut rng, _) = seeded_rng("irmin_random_round_trip", 0x1a2b);
    for round in 0..20 {
        let count = rng.random_range(0..120);
        let ops = random_ops(&mut rng, count);
        let bytes = write_irmin(&ops);
        let (read, tail) = read_all(&bytes).unwrap();
        assert_eq!(read, ops, "round {round}");
        assert_eq!(tail, None);
        assert_eq!(write_irmin(&read), bytes, "round {round}");
    }
}

#[test]
fn every_cut_of_a_trace_reads_the_complete_rows_then_reports_the_tail() {
    let (mut rng, _) = seeded_rng("irmin_cuts", 7);
    let ops = random_ops(&mut rng, 30);
    let bytes = write_irmin(&ops);
    // Frame boundaries, from the writer itself.
    let mut ends = vec![13usize];
    for op in &ops {
        ends.push(ends.last().unwrap() + write_irmin(std::slice::from_ref(op)).len() - 13);
    }
    assert_eq!(*ends.last().unwrap(), bytes.len());
    for cut in 13..=bytes.len() {
        let (read, tail) = read_all(&bytes[..cut]).unwrap();
        let complete = ends.iter().filter(|end| **end <= cut).count() - 1;
        assert_eq!(read, ops[..complete], "cut {cut}");
        let expected_tail = if ends.contains(&cut) { None } else { Some(ends[complete] as u64) };
        assert_eq!(tail, expected_tail, "cut {cut}");
    }
}

#[test]
fn bad_magic_unknown_version_and_truncated_headers_are_typed_errors() {
    let good = write_irmin(&[]);
    assert_eq!(good, b"IrmRepBT\x00\x00\x00\x00\x00");
    assert!(
        matches!(first_error(b"IrmStaBT\0\0\0\0\0"), TraceError::BadMagic { ref found, .. } if found == b"IrmStaBT")
    );
    assert!(matches!(first_error(b"hello"), TraceError::BadMagic { .. }));
    assert!(matches!(first_error(b""), TraceError::BadHeader { offset: 0, .. }));
    assert!(matches!(first_error(b"IrmRep"), TraceError::BadHeader { offset: 6, .. }));
    assert!(matches!(first_error(b"IrmRepBT\0\0"), TraceError::BadHeader { offset: 10, .. }));
    assert!(matches!(first_error(b"IrmRepBT\0\0\0\0"), TraceError::BadHeader { offset: 12, .. }));
    assert!(matches!(
        first_error(b"IrmRepBT\0\0\0\x01\0"),
        TraceError::UnsupportedVersion { version: 1, offset: 8, format: TraceFormat::Irmin }
    ));
    assert!(matches!(
        first_error(b"IrmRepBT\xff\xff\xff\xff\0"),
        TraceError::UnsupportedVersion { version: -1, .. }
    ));
    // The header is `unit`: a non-empty header frame is not consumed by its decoder.
    assert!(matches!(first_error(b"IrmRepBT\0\0\0\0\x01\x00"), TraceError::BadHeader { offset: 12, .. }));
    assert!(read_all(&good).unwrap().0.is_empty());
}

#[test]
fn oversized_frames_are_rejected_before_reading_them() {
    let mut bytes = write_irmin(&[]);
    // 64 MiB + 1, as a varint; no payload follows: nothing may be allocated for it.
    larch_varint::encode(&mut bytes, MAX_FRAME + 1);
    assert!(matches!(
        first_error(&bytes),
        TraceError::FrameTooLarge { offset: 13, len, max: MAX_FRAME } if len == MAX_FRAME + 1
    ));
    // A varint longer than 64 bits.
    let mut bytes = write_irmin(&[]);
    bytes.extend_from_slice(&[0xff; 11]);
    bytes.push(0x01);
    assert!(matches!(first_error(&bytes), TraceError::Malformed { offset: 13, row: 0, .. }));
    // A frame of exactly 64 MiB is within the limit: it is a truncated tail here.
    let mut bytes = write_irmin(&[]);
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x20]);
    assert_eq!(read_all(&bytes).unwrap(), (vec![], Some(13)));
}

#[test]
fn malformed_rows_name_their_row_and_offset() {
    let prefix = fixture_ops()[..2].to_vec();
    let frame_at = write_irmin(&prefix).len() as u64;
    // Unknown row tag 8.
    let err = first_error(&with_frame(&prefix, &[8]));
    assert!(
        matches!(err, TraceError::UnknownRowTag { tag: 8, row: 2, offset } if offset == frame_at),
        "{err:?}"
    );
    // A valid row followed by a trailing byte inside its frame.
    let mut row = Vec::new();
    larch_trace::format::encode_row(&fixture_ops()[2], &mut row);
    let consumed = row.len() as u64;
    row.push(0);
    let err = first_error(&with_frame(&prefix, &row));
    assert!(
        matches!(err, TraceError::TrailingBytes { row: 2, frame_len, consumed: c, .. } if frame_len == consumed + 1 && c == consumed),
        "{err:?}"
    );
    // A row running past the end of its frame.
    let err = first_error(&with_frame(&prefix, &row[..row.len() - 3]));
    assert!(matches!(err, TraceError::Malformed { row: 2, .. }), "{err:?}");
    // A bool byte other than 00 / ff (Irmin would read 01 as true; it would not re-encode identically).
    let mut bad_bool = row[..consumed as usize].to_vec();
    let at = bad_bool.len() - 10;
    assert_eq!(bad_bool[at], 0x00);
    bad_bool[at] = 0x01;
    assert!(matches!(first_error(&with_frame(&prefix, &bad_bool)), TraceError::Malformed { row: 2, .. }));
    // A scope tag other than 0 / 1.
    let mut bad_scope = row[..consumed as usize].to_vec();
    let at = bad_scope.len() - 9;
    bad_scope[at] = 2;
    assert!(matches!(first_error(&with_frame(&prefix, &bad_scope)), TraceError::Malformed { row: 2, .. }));
    // A non-canonical varint (0x80 0x00) as the path's step count.
    let err = first_error(&with_frame(&prefix, &[4, 0x80, 0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0]));
    assert!(matches!(err, TraceError::Malformed { row: 2, .. }), "{err:?}");
}

#[test]
fn invalid_hash_strings_are_typed_errors_naming_the_row() {
    let commit = fixture_ops()[5].clone();
    let mut row = Vec::new();
    larch_trace::format::encode_row(&commit, &mut row);
    let text_at = 3; // tag, scope, length byte 0x34, then the 52 characters
    assert_eq!(row[2], 52);
    for (position, replacement) in [(10, b'X'), (51, b'0'), (0, b'c')] {
        let mut bad = row.clone();
        bad[text_at + position] = replacement;
        let err = first_error(&with_frame(&fixture_ops()[..5], &bad));
        assert!(
            matches!(err, TraceError::InvalidHash { row: 5, offset, ref text, .. } if offset == 214 && text.len() == 52),
            "{err:?}"
        );
    }
    // Not base58 at all, and not UTF-8.
    let mut bad = vec![0, 1, 4];
    bad.extend_from_slice(b"Co\xff!");
    bad.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 7]);
    assert!(matches!(
        first_error(&with_frame(&[], &bad)),
        TraceError::InvalidHash { row: 0, offset: 13, .. }
    ));
}

#[test]
fn writer_refuses_writes_after_finish() {
    let mut writer = IrminWriter::new(Vec::new()).unwrap();
    writer.write_op(&fixture_ops()[0]).unwrap();
    writer.finish().unwrap();
    assert!(matches!(writer.write_op(&fixture_ops()[1]), Err(TraceError::Finished)));
    assert_eq!(writer.ops_written(), 1);
}

#[test]
fn context_ids_cover_the_whole_int64_range() {
    let ops = vec![Op::Find { path: larch_trace::Path::new(), found: true, input: Scoped::Keep(u64::MAX) }];
    let bytes = write_irmin(&ops);
    assert!(bytes.ends_with(&[0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
    assert_eq!(read_all(&bytes).unwrap().0, ops);
}

#[test]
fn fuzz_mutated_irmin_traces_never_panic() {
    let (mut rng, _) = seeded_rng("irmin_fuzz", 0xf00d);
    let mut seeds = vec![fixture()];
    for _ in 0..3 {
        let count = rng.random_range(1..40);
        seeds.push(write_irmin(&random_ops(&mut rng, count)));
    }
    let (mut ok, mut err) = (0, 0);
    for _ in 0..3000 {
        let bytes = mutated(&mut rng, &seeds);
        match read_all(&bytes) {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
    }
    eprintln!("fuzz: {ok} decoded, {err} rejected");
    assert!(err > 0 && ok > 0);
}

#[test]
fn paths_over_the_bounds_are_refused_on_read_and_on_write() {
    use larch_trace::op::{MAX_PATH_BYTES, MAX_PATH_STEPS};
    let find = |path: larch_trace::Path| Op::Find { path, found: true, input: Scoped::Keep(0) };
    // One step of `len` bytes takes `len + 3` in a path (its length as a three-byte varint).
    let one_step = |len: usize| larch_trace::Path::from_steps([vec![b'x'; len]]);
    let empty_steps = |count: usize| larch_trace::Path::from_steps(std::iter::repeat_n(b"", count));
    for path in [one_step(MAX_PATH_BYTES - 3), empty_steps(MAX_PATH_STEPS)] {
        let ops = vec![find(path)];
        assert_eq!(read_all(&write_irmin(&ops)).unwrap().0, ops);
    }
    for (path, what) in
        [(one_step(MAX_PATH_BYTES - 2), "1 MiB + 1"), (empty_steps(MAX_PATH_STEPS + 1), "131,073 steps")]
    {
        let op = find(path);
        let mut writer = IrminWriter::new(Vec::new()).unwrap();
        let err = writer.write_op(&op).unwrap_err();
        assert!(matches!(err, TraceError::Unwritable { row: 0, .. }), "{what}: {err:?}");
        // A row written without the writer's check is refused on read.
        let mut row = Vec::new();
        larch_trace::format::encode_row(&op, &mut row);
        let mut bytes = write_irmin(&[]);
        larch_varint::encode(&mut bytes, row.len() as u64);
        bytes.extend_from_slice(&row);
        let err = first_error(&bytes);
        assert!(matches!(err, TraceError::Malformed { row: 0, .. }), "{what}: {err:?}");
    }
}
