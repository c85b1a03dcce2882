//! The NOMT side: each batch one session finished with the batch's sorted writes and committed
//! (NOMT's commit is durable: WAL, fsyncs, manifest); the reads go through a session on the last
//! root. NOMT hashes with its BLAKE3 binary-trie hasher.

use crate::measure::{Latency, RunResult, Usage, dir_size};
use crate::workload::Workload;
use anyhow::{Result, bail};
use nomt::hasher::Blake3Hasher;
use nomt::{IoUringPermission, KeyReadWrite, Nomt, Options, SessionParams};
use std::path::Path;
use std::time::Instant;

/// Options of the NOMT run.
#[derive(Clone, Debug)]
pub struct NomtConfig {
    /// Merkle-update worker threads (`Options::commit_concurrency`).
    pub commit_concurrency: usize,
    /// io_uring instances (`Options::io_workers`).
    pub io_workers: usize,
    /// Hash-table buckets (4 KiB pages) of the Merkle page store.
    pub buckets: u32,
    /// Page cache and leaf cache, MiB each.
    pub cache_mib: usize,
    /// NOMT's background warm-up of Merkle paths (`Options::warm_up`), fed with every written key.
    pub warm_up: bool,
    /// Preallocate the hash-table file.
    pub preallocate: bool,
}

/// Whether io_uring can be used here, as NOMT checks it.
pub fn io_uring_status() -> &'static str {
    match nomt::check_iou_permissions() {
        IoUringPermission::Allowed => "allowed",
        IoUringPermission::Denied => "denied",
        IoUringPermission::NotSupported => "not supported",
    }
}

/// Inserts the workload in batches of `batch` keys with a durable commit each, then reads the
/// probes from the last root; verifies every read.
pub fn run(work: &Workload, batch: usize, dir: &Path, config: &NomtConfig, round: u32) -> Result<RunResult> {
    let status = io_uring_status();
    if status != "allowed" {
        bail!("NOMT needs io_uring on Linux and it is {status} here (nomt::check_iou_permissions)");
    }
    let base_rss = Usage::now().peak_rss;
    let mut options = Options::new();
    options.path(dir);
    options.commit_concurrency(config.commit_concurrency.max(1));
    options.io_workers(config.io_workers.max(1));
    options.hashtable_buckets(config.buckets);
    options.bitbox_seed([7; 16]);
    options.page_cache_size(config.cache_mib);
    options.leaf_cache_size(config.cache_mib);
    options.warm_up(config.warm_up);
    options.preallocate_ht(config.preallocate);
    let nomt = Nomt::<Blake3Hasher>::open(options)?;
    let mut batch_times = Vec::new();
    let mut commit_times = Vec::new();
    let start_usage = Usage::now();
    let start = Instant::now();
    for range in work.batches(batch) {
        let t0 = Instant::now();
        let session = nomt.begin_session(SessionParams::default());
        let mut actuals: Vec<_> =
            range.map(|i| (work.keys[i], KeyReadWrite::Write(Some(work.values[i].to_vec())))).collect();
        actuals.sort_unstable_by_key(|a| a.0);
        actuals.dedup_by(|a, b| a.0 == b.0);
        for (key, _) in &actuals {
            session.warm_up(*key);
        }
        let t1 = Instant::now();
        session.finish(actuals)?.commit(&nomt)?;
        let t2 = Instant::now();
        batch_times.push(t2 - t0);
        commit_times.push(t2 - t1);
    }
    let insert_wall = start.elapsed();
    let insert_usage = Usage::now();
    let root = hex::encode(nomt.root().into_inner());
    let utilization = nomt.hash_table_utilization();

    let read_start_usage = Usage::now();
    let read_start = Instant::now();
    let session = nomt.begin_session(SessionParams::default());
    let mut found = 0;
    for (n, probe) in work.probes.iter().enumerate() {
        let got = session.read(probe.key)?;
        if got.as_deref() != probe.expected.as_ref().map(|v| &v[..]) {
            bail!(
                "NOMT read {n} of key {} returned {:?}, expected {:?}",
                hex::encode(probe.key),
                got.map(hex::encode),
                probe.expected.map(hex::encode)
            );
        }
        found += usize::from(got.is_some());
    }
    let read_wall = read_start.elapsed();
    let read_usage = Usage::now();
    drop(session);
    drop(nomt);
    let (store_bytes, store_apparent_bytes) = dir_size(dir)?;
    let counters = vec![
        ("ht_buckets".into(), utilization.capacity.to_string()),
        ("ht_occupied".into(), utilization.occupied.to_string()),
        ("io_uring".into(), status.to_string()),
    ];
    Ok(RunResult {
        engine: "nomt".into(),
        round,
        keys: work.keys.len(),
        commits: batch_times.len(),
        insert_wall_s: insert_wall.as_secs_f64(),
        insert_cpu_s: (insert_usage.cpu - start_usage.cpu).as_secs_f64(),
        batch: Latency::of(&batch_times),
        commit: Latency::of(&commit_times),
        reads: work.probes.len(),
        reads_found: found,
        read_wall_s: read_wall.as_secs_f64(),
        read_cpu_s: (read_usage.cpu - read_start_usage.cpu).as_secs_f64(),
        store_bytes,
        store_apparent_bytes,
        peak_rss_bytes: Usage::now().peak_rss,
        base_rss_bytes: base_rss,
        root,
        counters,
    })
}
