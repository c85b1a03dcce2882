//! Timing of the default trace (release builds only):
//! `cargo test --release -p larch-trace --test gen_perf -- --ignored --nocapture`.

use larch_trace::{GenParams, Generator};
use std::time::Instant;

#[test]
#[ignore = "times the default trace; run in release"]
fn default_trace_speed() {
    let params = GenParams {
        blocks: std::env::var("GEN_BLOCKS").ok().and_then(|v| v.parse().ok()).unwrap_or(3000),
        ..GenParams::default()
    };
    let start = Instant::now();
    let mut ops = 0u64;
    let mut bytes = 0u64;
    let report = Generator::new(params)
        .unwrap()
        .run(
            &mut |op| {
                ops += 1;
                if let larch_trace::Op::Add { value, .. } = &op {
                    bytes += value.len() as u64;
                }
                Ok::<(), std::io::Error>(())
            },
            &mut |_, _| {},
        )
        .unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    println!("{report}");
    println!(
        "generated {ops} ops ({:.1} MB of values) in {elapsed:.2} s: {:.0} ops/s",
        bytes as f64 / 1e6,
        ops as f64 / elapsed
    );
}
