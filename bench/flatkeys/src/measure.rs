//! Measurements shared by the engines: CPU time and peak RSS from `getrusage`, latency
//! percentiles, the disk usage of a store directory, and the result one run reports.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// CPU time (user + system, all threads) and peak RSS of this process so far.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    /// User + system CPU time of all threads.
    pub cpu: Duration,
    /// Peak resident set size, in bytes.
    pub peak_rss: u64,
}

impl Usage {
    /// Samples `getrusage(RUSAGE_SELF)`.
    pub fn now() -> Usage {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` points to writable memory of the size of a `rusage`; `getrusage` fills it
        // and returns 0, or returns -1 and leaves it as zeroed (a valid `rusage`: plain integers).
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
            usage.assume_init()
        };
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Usage {
            cpu: time(usage.ru_utime) + time(usage.ru_stime),
            // Linux reports ru_maxrss in KiB.
            peak_rss: (usage.ru_maxrss.max(0) as u64) * 1024,
        }
    }
}

/// The nearest-rank percentile `p` (0..=100) of sorted `values`, 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency summary of a list of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl Latency {
    /// Summarises `samples`.
    pub fn of(samples: &[Duration]) -> Latency {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Latency {
            p50_ms: percentile(&ms, 50.0),
            p99_ms: percentile(&ms, 99.0),
            max_ms: percentile(&ms, 100.0),
        }
    }
}

/// Bytes of a directory tree: `(allocated on disk, apparent length)`.
pub fn dir_size(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut allocated = 0;
    let mut apparent = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                allocated += meta.blocks() * 512;
                apparent += meta.len();
            }
        }
    }
    Ok((allocated, apparent))
}

/// What one engine's run reports to the parent (one JSON line).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// Engine and variant, e.g. `larch/fanout` or `nomt`.
    pub engine: String,
    /// Round number (0-based).
    pub round: u32,
    /// Keys inserted.
    pub keys: usize,
    /// Durable commits made.
    pub commits: usize,
    /// Wall-clock seconds of the insert phase.
    pub insert_wall_s: f64,
    /// CPU seconds (all threads) of the insert phase.
    pub insert_cpu_s: f64,
    /// Per batch: apply the keys and commit durably.
    pub batch: Latency,
    /// Per batch: the commit call alone (hash, write, sync).
    pub commit: Latency,
    /// Reads made.
    pub reads: usize,
    /// Reads that found a value.
    pub reads_found: usize,
    /// Wall-clock seconds of the read phase.
    pub read_wall_s: f64,
    /// CPU seconds of the read phase.
    pub read_cpu_s: f64,
    /// Bytes the store allocates on disk at the end.
    pub store_bytes: u64,
    /// Apparent length of the store's files.
    pub store_apparent_bytes: u64,
    /// Peak RSS of the process (the workload's keys and values included).
    pub peak_rss_bytes: u64,
    /// Peak RSS right after generating the workload, before the engine opened.
    pub base_rss_bytes: u64,
    /// The final root (larch: the Tezos tree hash; NOMT: its own root), for determinism checks.
    pub root: String,
    /// Engine counters, as `name=value` pairs.
    pub counters: Vec<(String, String)>,
}

impl RunResult {
    /// Inserted keys per second, wall-clock.
    pub fn keys_per_s(&self) -> f64 {
        self.keys as f64 / self.insert_wall_s.max(1e-9)
    }

    /// Inserted keys per CPU-second.
    pub fn keys_per_cpu_s(&self) -> f64 {
        self.keys as f64 / self.insert_cpu_s.max(1e-9)
    }

    /// Reads per second, wall-clock.
    pub fn reads_per_s(&self) -> f64 {
        self.reads as f64 / self.read_wall_s.max(1e-9)
    }
}
