//! The statistics of a medium generated trace against the workload page: the operation mix (§3),
//! the miss rate, and the value-size histogram (§4). The setup block is about 5% of the trace, as
//! in the default trace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_bench::{GenParams, GenReport, Generator};
use larch_trace::OpKind;

fn medium(seed: u64) -> GenReport {
    let params = GenParams {
        blocks: 70,
        seed,
        accounts: 500,
        ops_per_block: 2000,
        cycle_length: 64,
        ..GenParams::default()
    };
    eprintln!("generating with {params:?}");
    let report =
        Generator::new(params).unwrap().run(&mut |_op| Ok::<(), std::io::Error>(()), &mut |_, _| {}).unwrap();
    eprintln!("{report}");
    report
}

fn assert_near(what: &str, got: f64, target: f64, tolerance: f64) {
    assert!((got - target).abs() <= tolerance, "{what}: {got:.3}% (target {target}% ± {tolerance})");
}

#[test]
fn operation_mix_and_value_sizes_follow_the_page() {
    let seed = 5;
    eprintln!("seed {seed}");
    let report = medium(seed);
    assert_near("find", report.share(OpKind::Find), 40.0, 4.0);
    assert_near("add", report.share(OpKind::Add), 30.0, 4.0);
    assert_near("mem", report.share(OpKind::Mem), 22.0, 4.0);
    assert_near("remove", report.share(OpKind::Remove), 3.0, 1.2);
    assert_near("mem_tree", report.share(OpKind::MemTree), 3.0, 1.2);
    assert_near("copy", report.share(OpKind::Copy), 0.2, 0.12);
    assert_eq!(report.count(OpKind::Commit), 72);
    assert_eq!(report.count(OpKind::Checkout), 71 + report.abandoned);
    let reads = report.count(OpKind::Find) + report.count(OpKind::Mem);
    let miss_rate = 100.0 * report.misses as f64 / reads as f64;
    assert_near("find/mem misses", miss_rate, 10.0, 3.0);

    for (index, (label, _, target)) in report.value_sizes.iter().enumerate() {
        let got = report.size_share(index);
        if *target >= 1.0 {
            assert_near(label, got, *target, (0.2 * target).max(1.5));
        } else {
            assert!(got <= 3.0 * target + 0.1, "{label}: {got:.3}% (target {target}%)");
        }
    }
    let small: f64 = (0..4).map(|i| report.size_share(i)).sum();
    assert_near("values under 16 bytes", small, 80.3, 3.0);
}

#[test]
fn regular_blocks_vary_in_size_around_the_mean() {
    // Mean 2,000 context operations per regular block, log-normal with sigma 0.5 (coefficient of
    // variation about 0.53); read from the commit messages `lvl <level>, <n> ops`.
    let seed = 9;
    eprintln!("seed {seed}");
    let params = GenParams { blocks: 150, seed, accounts: 200, ops_per_block: 400, ..GenParams::default() };
    let mut sizes = Vec::new();
    Generator::new(params)
        .unwrap()
        .run(
            &mut |op| {
                if let larch_trace::Op::Commit { message, .. } = op
                    && let Some(n) = message.split(", ").nth(1).and_then(|t| t.strip_suffix(" ops"))
                {
                    sizes.push(n.parse::<f64>().unwrap());
                }
                Ok::<(), std::io::Error>(())
            },
            &mut |_, _| {},
        )
        .unwrap();
    let regular = &sizes[1..];
    let mean = regular.iter().sum::<f64>() / regular.len() as f64;
    let var = regular.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / regular.len() as f64;
    let cv = var.sqrt() / mean;
    eprintln!("mean {mean:.0}, cv {cv:.2}, setup {}", sizes[0]);
    assert!((340.0..470.0).contains(&mean), "mean block {mean:.0} ops");
    assert!((0.35..0.75).contains(&cv), "coefficient of variation {cv:.2}");
    assert_eq!(sizes.len(), 151);
    assert!(sizes[0] > 200.0 * 8.0, "setup block of {} ops", sizes[0]);
}
