//! Trace formats and `trace info` on traces made by the Tezos-like generator: larch's format against
//! `IrmRepBT` in size and speed, conversions byte-identical both ways, `trace info` agreeing with the
//! generator's own report.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "../../larch-trace/tests/formats_support/mod.rs"]
mod formats_support;

use formats_support::{write_irmin, write_larch};
use larch_trace::Op;
use larch_trace::format::{TraceFormat, convert, open_reader};
use larch_trace::info::{InfoOptions, trace_info_with};

fn convert_bytes(bytes: &[u8], format: TraceFormat) -> Vec<u8> {
    let mut source = open_reader(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut out = Vec::new();
    let stats = convert(&mut *source, format, &mut out).unwrap();
    assert_eq!(stats.bytes_out, out.len() as u64);
    out
}

#[test]
fn larch_is_much_smaller_than_irmin_on_a_generated_trace() {
    let params =
        larch_bench::GenParams { blocks: 10, accounts: 1000, ops_per_block: 400, ..Default::default() };
    let (ops, _) = larch_bench::Generator::new(params).unwrap().collect().unwrap();
    let irmin = write_irmin(&ops);
    let larch = write_larch(&ops, &[]);
    let ratio = larch.len() as f64 / irmin.len() as f64;
    eprintln!(
        "generated tezos-like/v1 trace, {} ops: IrmRepBT {} bytes ({:.1} B/op), larch {} bytes ({:.1} B/op), ratio {ratio:.3}",
        ops.len(),
        irmin.len(),
        irmin.len() as f64 / ops.len() as f64,
        larch.len(),
        larch.len() as f64 / ops.len() as f64
    );
    let values: usize =
        ops.iter().map(|op| if let Op::Add { value, .. } = op { value.len() } else { 0 }).sum();
    eprintln!(
        "  of which value bytes {values}; without them: IrmRepBT {:.1} B/op, larch {:.1} B/op",
        (irmin.len() - values) as f64 / ops.len() as f64,
        (larch.len() - values) as f64 / ops.len() as f64
    );
    assert!(ratio < 0.5, "ratio {ratio}");
    assert_eq!(convert_bytes(&irmin, TraceFormat::Larch), larch);
    assert_eq!(convert_bytes(&larch, TraceFormat::Irmin), irmin);
}

/// Throughput of both formats (run with `--release -- --ignored --nocapture`).
#[test]
#[ignore = "measurement, run explicitly in release mode"]
fn format_throughput() {
    let params =
        larch_bench::GenParams { blocks: 100, accounts: 5000, ops_per_block: 2000, ..Default::default() };
    let (ops, _) = larch_bench::Generator::new(params).unwrap().collect().unwrap();
    for format in [TraceFormat::Irmin, TraceFormat::Larch] {
        let start = std::time::Instant::now();
        let bytes = match format {
            TraceFormat::Irmin => write_irmin(&ops),
            TraceFormat::Larch => write_larch(&ops, &[]),
        };
        let written = start.elapsed();
        let start = std::time::Instant::now();
        let source = open_reader(std::io::Cursor::new(bytes.clone())).unwrap();
        let mut count = 0;
        for op in source {
            op.unwrap();
            count += 1;
        }
        let read = start.elapsed();
        assert_eq!(count, ops.len());
        eprintln!(
            "{format}: {} ops, {} bytes; write {:.0} ns/op ({:.0} MB/s), read {:.0} ns/op ({:.0} MB/s)",
            ops.len(),
            bytes.len(),
            written.as_nanos() as f64 / ops.len() as f64,
            bytes.len() as f64 / written.as_secs_f64() / 1e6,
            read.as_nanos() as f64 / ops.len() as f64,
            bytes.len() as f64 / read.as_secs_f64() / 1e6,
        );
    }
}

#[test]
fn info_of_a_generated_trace_agrees_with_the_generator() {
    let params =
        larch_bench::GenParams { blocks: 6, accounts: 500, ops_per_block: 300, ..Default::default() };
    let (ops, report) = larch_bench::Generator::new(params).unwrap().collect().unwrap();
    let bytes = write_larch(&ops, &[("generator".to_owned(), "tezos-like/v1".to_owned())]);
    let mut source = larch_trace::format::open_reader(std::io::Cursor::new(bytes)).unwrap();
    let info = trace_info_with(&mut *source, &InfoOptions::default()).unwrap();
    eprintln!("{info}");
    assert_eq!(info.blocks, report.blocks);
    assert_eq!(info.ops, ops.len() as u64);
    assert!(info.apply_note.is_none(), "{:?}", info.apply_note);
    assert_eq!(info.read_mismatches, 0);
    assert!(info.largest_dirs[0].entries >= 500, "{:?}", info.largest_dirs);
}
