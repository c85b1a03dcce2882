//! Timing of the default trace (release builds only):
//! `cargo test --release -p larch-bench --test gen_perf -- --ignored --nocapture`, with optional
//! `GEN_BLOCKS`, `GEN_ACCOUNTS` and `GEN_OPS` overriding the defaults.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::{GenParams, Generator};
use std::time::Instant;

#[test]
#[ignore = "times the default trace; run in release"]
fn default_trace_speed() {
    let env =
        |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let params = GenParams {
        blocks: env("GEN_BLOCKS", 3000),
        accounts: env("GEN_ACCOUNTS", 20_000),
        ops_per_block: env("GEN_OPS", 2000),
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
