//! Reading a trace ahead on a thread of its own ([`larch_trace::format::prefetch`]): the same
//! items, counts, offsets, metadata and truncated tail as the reader it wraps, errors included.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod formats_support;

use formats_support::*;
use larch_testkit::seeded_rng;
use larch_trace::format::{BoxedSource, OpSource, open_reader, prefetch};

fn open(bytes: &[u8]) -> BoxedSource {
    open_reader(std::io::Cursor::new(bytes.to_vec())).unwrap()
}

/// Every item (as its debug text, errors included), with the reader's operation count and offset
/// after it, then the truncated tail.
type Transcript = (Vec<(String, u64, u64)>, Option<u64>);

fn transcript(source: &mut dyn OpSource) -> Transcript {
    let mut items = Vec::new();
    while let Some(item) = source.next() {
        let text = match item {
            Ok(op) => format!("{op:?}"),
            Err(err) => format!("error: {err:?}"),
        };
        items.push((text, 0, 0));
        let last = items.last_mut().unwrap();
        (last.1, last.2) = (source.ops_read(), source.offset());
    }
    (items, source.truncated_tail())
}

fn assert_same_through_prefetch(bytes: &[u8], what: &str) -> Transcript {
    let direct = transcript(&mut *open(bytes));
    let mut ahead = prefetch(open(bytes)).unwrap();
    let direct_source = open(bytes);
    assert_eq!(ahead.format(), direct_source.format(), "{what}");
    assert_eq!(ahead.metadata(), direct_source.metadata(), "{what}");
    let through = transcript(&mut ahead);
    assert_eq!(through, direct, "{what}");
    assert!(ahead.next().is_none(), "{what}: ends once");
    direct
}

#[test]
fn prefetched_traces_read_as_the_reader_they_wrap_across_batches() {
    let (mut rng, seed) = seeded_rng("prefetch_same_items", 0x9f);
    let meta = vec![("seed".to_string(), seed.to_string())];
    // Batches hold 1,024 operations: traces below, at and across the boundaries, and long enough
    // for the emptied batches to come back to the reading thread and be filled again.
    for count in [0, 1, 1023, 1024, 1025, 4100, 20_000] {
        let ops = random_ops(&mut rng, count);
        for (format, bytes) in [("larch", write_larch(&ops, &meta)), ("irmin", write_irmin(&ops))] {
            let (items, tail) = assert_same_through_prefetch(&bytes, &format!("{format}, {count} ops"));
            assert_eq!(items.len(), count, "{format}");
            assert_eq!(tail, None);
        }
    }
}

#[test]
fn truncated_and_corrupt_traces_report_the_same_tail_and_errors() {
    let (mut rng, _) = seeded_rng("prefetch_bad_traces", 0xbad);
    let ops = random_ops(&mut rng, 1500);
    let irmin = write_irmin(&ops);
    // Cut inside the last frame: the complete frames, then the tail (as Irmin reads it).
    let (items, tail) = assert_same_through_prefetch(&irmin[..irmin.len() - 3], "cut Irmin trace");
    assert_eq!(items.len(), ops.len() - 1);
    assert!(tail.is_some());
    // A flipped byte in the middle of a larch trace: its checksum error, in the same place.
    let mut larch = write_larch(&ops, &[]);
    let middle = larch.len() / 2;
    larch[middle] ^= 0x40;
    let (items, _) = assert_same_through_prefetch(&larch, "corrupt larch trace");
    assert!(items.iter().any(|(text, _, _)| text.starts_with("error:")), "the corruption is reported");
    // A cut larch trace: an error at its end.
    let larch = write_larch(&ops, &[]);
    let (items, _) = assert_same_through_prefetch(&larch[..larch.len() - 10], "cut larch trace");
    assert!(items.last().unwrap().0.starts_with("error:"));
}

#[test]
fn dropping_a_prefetched_reader_early_stops_its_thread() {
    let (mut rng, _) = seeded_rng("prefetch_drop_early", 5);
    let ops = random_ops(&mut rng, 20_000);
    let bytes = write_larch(&ops, &[]);
    let mut ahead = prefetch(open(&bytes)).unwrap();
    assert_eq!(format!("{:?}", ahead.next().unwrap().unwrap()), format!("{:?}", ops[0]));
    // The reading thread is blocked on its full channel: dropping hangs up and joins it (a hang
    // here fails the test by timeout).
    drop(ahead);
}
