//! The printed report: the setup, one line per run, and per engine the mean over rounds with the
//! larch/NOMT ratios.

use crate::Args;
use crate::measure::RunResult;
use std::path::Path;

/// QMDB's published figure for this machine class, printed as a reference line.
const QMDB_KEYS_PER_S: f64 = 73_000.0;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Prints the setup of the run.
pub fn header(args: &Args, base: &Path, variants: &[String], io_uring: &str) {
    println!(
        "flatkeys: {} keys of 32 B with 32 B values, {} keys per durable commit, {} reads (half absent), seed {}, {} round(s)",
        args.keys, args.batch, args.reads, args.seed, args.rounds
    );
    println!("variants (order alternates by round): {}", variants.join(", "));
    println!(
        "larch: sync={}, tree={:?} (pipeline depth {}), cache {} MiB, mmap {}; nomt 1.0.5: BLAKE3, commit_concurrency {}, io_workers {}, buckets {}, caches {} MiB + {} MiB, warm_up {}, preallocate {}, io_uring {io_uring}",
        args.larch_sync,
        args.larch_tree,
        args.larch_pipeline_depth,
        args.larch_cache_mib,
        args.larch_mmap,
        args.nomt_commit_concurrency,
        args.nomt_io_workers,
        args.nomt_config().buckets,
        args.nomt_cache_mib,
        args.nomt_cache_mib,
        args.nomt_warm_up,
        !args.nomt_sparse
    );
    println!(
        "both: mimalloc, purge delay {}, transparent huge pages {}",
        std::env::var("MIMALLOC_PURGE_DELAY")
            .map_or_else(|_| "60 s".to_string(), |ms| format!("{ms} ms (environment)")),
        if huge_pages_off() { "off" } else { "allowed" }
    );
    println!("stores under {}", base.display());
    println!(
        "{:<14} {:>5} {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9}",
        "engine",
        "round",
        "keys/s",
        "keys/cpu-s",
        "cpu%",
        "batch p50",
        "batch p99",
        "commit p50",
        "commit p99",
        "reads/s",
        "disk MiB",
        "RSS MiB"
    );
}

/// Prints one run.
pub fn run_line(r: &RunResult) {
    println!(
        "{:<14} {:>5} {:>10.0} {:>10.0} {:>7.0}% {:>7.2}ms {:>7.2}ms {:>8.2}ms {:>8.2}ms {:>10.0} {:>9.1} {:>9.1}",
        r.engine,
        r.round,
        r.keys_per_s(),
        r.keys_per_cpu_s(),
        100.0 * r.insert_cpu_s / r.insert_wall_s.max(1e-9),
        r.batch.p50_ms,
        r.batch.p99_ms,
        r.commit.p50_ms,
        r.commit.p99_ms,
        r.reads_per_s(),
        mib(r.store_bytes),
        mib(r.peak_rss_bytes),
    );
    let counters: Vec<String> = r.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "{:<14}       insert {:.2} s wall / {:.2} s CPU, batch max {:.1} ms; reads {:.2} s ({} found); disk {:.1} MiB (apparent {:.1}); RSS before open {:.1} MiB; root {}",
        "",
        r.insert_wall_s,
        r.insert_cpu_s,
        r.batch.max_ms,
        r.read_wall_s,
        r.reads_found,
        mib(r.store_bytes),
        mib(r.store_apparent_bytes),
        mib(r.base_rss_bytes),
        r.root
    );
    println!("{:<14}       {}", "", counters.join(" "));
}

/// Means over the rounds of one variant.
struct Mean {
    keys_per_s: f64,
    keys_per_cpu_s: f64,
    batch_p50: f64,
    batch_p99: f64,
    commit_p50: f64,
    commit_p99: f64,
    reads_per_s: f64,
    disk: f64,
    rss: f64,
    min_keys_per_s: f64,
    max_keys_per_s: f64,
}

fn mean(runs: &[&RunResult]) -> Option<Mean> {
    if runs.is_empty() {
        return None;
    }
    let avg = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / runs.len() as f64;
    let rates: Vec<f64> = runs.iter().map(|r| r.keys_per_s()).collect();
    Some(Mean {
        keys_per_s: avg(&|r| r.keys_per_s()),
        keys_per_cpu_s: avg(&|r| r.keys_per_cpu_s()),
        batch_p50: avg(&|r| r.batch.p50_ms),
        batch_p99: avg(&|r| r.batch.p99_ms),
        commit_p50: avg(&|r| r.commit.p50_ms),
        commit_p99: avg(&|r| r.commit.p99_ms),
        reads_per_s: avg(&|r| r.reads_per_s()),
        disk: avg(&|r| mib(r.store_bytes)),
        rss: avg(&|r| mib(r.peak_rss_bytes)),
        min_keys_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
        max_keys_per_s: rates.iter().copied().fold(0.0, f64::max),
    })
}

/// Prints the means per variant, the larch/NOMT ratios and the QMDB reference line.
pub fn summary(results: &[RunResult], variants: &[String]) {
    println!();
    println!("mean over rounds:");
    let means: Vec<(String, Option<Mean>)> = variants
        .iter()
        .map(|v| (v.clone(), mean(&results.iter().filter(|r| &r.engine == v).collect::<Vec<_>>())))
        .collect();
    for (variant, m) in &means {
        let Some(m) = m else {
            println!("{variant:<14} no successful run");
            continue;
        };
        let roots: std::collections::BTreeSet<&str> =
            results.iter().filter(|r| &r.engine == variant).map(|r| r.root.as_str()).collect();
        println!(
            "{variant:<14} {:>8.0} keys/s (range {:.0}-{:.0}), {:.0} keys/CPU-s, batch p50/p99 {:.2}/{:.2} ms, commit p50/p99 {:.2}/{:.2} ms, {:.0} reads/s, disk {:.1} MiB, peak RSS {:.1} MiB{}",
            m.keys_per_s,
            m.min_keys_per_s,
            m.max_keys_per_s,
            m.keys_per_cpu_s,
            m.batch_p50,
            m.batch_p99,
            m.commit_p50,
            m.commit_p99,
            m.reads_per_s,
            m.disk,
            m.rss,
            if roots.len() > 1 { " (ROOTS DIFFER BETWEEN ROUNDS)" } else { "" }
        );
    }
    println!(
        "{:<14} {:>8.0} keys/s (published figure for this machine class; not run here)",
        "QMDB (ref.)", QMDB_KEYS_PER_S
    );
    let nomt = means.iter().find(|(v, _)| v == "nomt").and_then(|(_, m)| m.as_ref());
    if let Some(n) = nomt {
        println!();
        println!("ratios larch/NOMT (>1: larch higher; for latency, disk and RSS lower is better):");
        for (variant, m) in &means {
            let (Some(m), true) = (m, variant.starts_with("larch")) else { continue };
            println!(
                "{variant:<14} keys/s {:.2}x, keys/CPU-s {:.2}x, commit p50 {:.2}x, commit p99 {:.2}x, batch p99 {:.2}x, reads/s {:.2}x, disk {:.2}x, peak RSS {:.2}x; vs QMDB ref. keys/s {:.2}x",
                m.keys_per_s / n.keys_per_s,
                m.keys_per_cpu_s / n.keys_per_cpu_s,
                m.commit_p50 / n.commit_p50,
                m.commit_p99 / n.commit_p99,
                m.batch_p99 / n.batch_p99,
                m.reads_per_s / n.reads_per_s,
                m.disk / n.disk,
                m.rss / n.rss,
                m.keys_per_s / QMDB_KEYS_PER_S,
            );
        }
    }
}

/// Whether transparent huge pages are off for this process (and so for the runs it starts).
fn huge_pages_off() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `PR_GET_THP_DISABLE` returns the calling process's flag and touches no memory.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
