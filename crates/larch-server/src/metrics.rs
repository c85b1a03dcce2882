//! Counters of the server, rendered as Prometheus text.

use crate::request::Endpoint;
use larch_store::StoreStats;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The statuses counted one by one; any other falls in the last slot (labelled by its class).
const STATUSES: [u16; 9] = [200, 400, 404, 405, 413, 429, 500, 503, 0];
/// Upper bounds of the latency histogram's buckets, in seconds (`+Inf` is implied).
const BUCKETS: [f64; 12] =
    [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0];
const ENDPOINTS: usize = Endpoint::ALL.len();

#[derive(Debug, Default)]
struct EndpointMetrics {
    by_status: [AtomicU64; STATUSES.len()],
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// The server's counters (atomics: requests update them without a lock).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    endpoints: [EndpointMetrics; ENDPOINTS],
    pub reloads: AtomicU64,
    pub reloads_changed: AtomicU64,
    pub reload_errors: AtomicU64,
    pub rate_limited: AtomicU64,
    /// Layout refreshes of the store handles replaced by a reopen (a rewound store): the counter
    /// of `/metrics` adds the current handle's.
    pub refreshes_before: AtomicU64,
}

/// What `/metrics` shows of the store, sampled when it is asked.
pub(crate) struct StoreView {
    pub stats: StoreStats,
    pub head: Option<(String, i64)>,
    pub seconds_since_reload: f64,
}

impl Metrics {
    /// Counts a request to `endpoint` answered with `status` after `elapsed`.
    pub fn record(&self, endpoint: Endpoint, status: u16, elapsed: Duration) {
        let Some(metrics) = self.endpoints.get(endpoint as usize) else {
            return;
        };
        let slot = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len() - 1);
        if let Some(counter) = metrics.by_status.get(slot) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&bound| seconds <= bound).unwrap_or(BUCKETS.len());
        if let Some(counter) = metrics.buckets.get(bucket) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        metrics.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(&self, store: &StoreView) -> String {
        let mut out = String::with_capacity(8192);
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let _ =
            writeln!(out, "# HELP larch_http_requests_total HTTP requests answered, by endpoint and status.");
        let _ = writeln!(out, "# TYPE larch_http_requests_total counter");
        for endpoint in Endpoint::ALL {
            let metrics = &self.endpoints[endpoint as usize];
            for (status, counter) in STATUSES.iter().zip(&metrics.by_status) {
                let count = load(counter);
                if count == 0 {
                    continue;
                }
                let status = if *status == 0 { "other".to_string() } else { status.to_string() };
                let _ = writeln!(
                    out,
                    "larch_http_requests_total{{endpoint=\"{}\",status=\"{status}\"}} {count}",
                    endpoint.label()
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP larch_http_request_duration_seconds Time from request to response, by endpoint."
        );
        let _ = writeln!(out, "# TYPE larch_http_request_duration_seconds histogram");
        for endpoint in Endpoint::ALL {
            let metrics = &self.endpoints[endpoint as usize];
            let label = endpoint.label();
            let mut cumulative = 0;
            for (bound, counter) in BUCKETS.iter().zip(&metrics.buckets) {
                cumulative += load(counter);
                let _ = writeln!(
                    out,
                    "larch_http_request_duration_seconds_bucket{{endpoint=\"{label}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += metrics.buckets.last().map_or(0, load);
            let _ = writeln!(
                out,
                "larch_http_request_duration_seconds_bucket{{endpoint=\"{label}\",le=\"+Inf\"}} {cumulative}"
            );
            let sum = load(&metrics.sum_nanos) as f64 / 1e9;
            let _ = writeln!(out, "larch_http_request_duration_seconds_sum{{endpoint=\"{label}\"}} {sum}");
            let _ = writeln!(
                out,
                "larch_http_request_duration_seconds_count{{endpoint=\"{label}\"}} {cumulative}"
            );
        }
        let stats = &store.stats;
        let lookups = stats.cache_hits + stats.cache_misses;
        let ratio = if lookups == 0 { 0.0 } else { stats.cache_hits as f64 / lookups as f64 };
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {value}");
        };
        metric(
            "larch_rate_limited_total",
            "counter",
            "Requests refused with 429 by the rate limit.",
            load(&self.rate_limited).to_string(),
        );
        metric(
            "larch_store_reloads_total",
            "counter",
            "Reloads of the store handle.",
            load(&self.reloads).to_string(),
        );
        metric(
            "larch_store_reloads_changed_total",
            "counter",
            "Reloads that found new commits.",
            load(&self.reloads_changed).to_string(),
        );
        metric(
            "larch_store_reload_errors_total",
            "counter",
            "Reloads that failed (the previous state is kept).",
            load(&self.reload_errors).to_string(),
        );
        metric(
            "larch_store_missing_file_retries_total",
            "counter",
            "Store reads that found a chunk file retired by a writer's GC and were answered through the new layout.",
            (load(&self.refreshes_before) + stats.layout_refreshes).to_string(),
        );
        metric(
            "larch_store_seconds_since_reload",
            "gauge",
            "Seconds since the last reload started.",
            format!("{:.3}", store.seconds_since_reload),
        );
        metric(
            "larch_store_cache_hits_total",
            "counter",
            "Object loads served by the store's cache.",
            stats.cache_hits.to_string(),
        );
        metric(
            "larch_store_cache_misses_total",
            "counter",
            "Object loads that read the pack.",
            stats.cache_misses.to_string(),
        );
        metric(
            "larch_store_cache_hit_ratio",
            "gauge",
            "Cache hits over cache lookups since start.",
            format!("{ratio:.6}"),
        );
        metric(
            "larch_store_cache_bytes",
            "gauge",
            "Estimated bytes held by the cache.",
            stats.cache_bytes.to_string(),
        );
        metric(
            "larch_store_nodes_read_ahead_total",
            "counter",
            "Directories the store read into its cache ahead of their use, during storms of cold reads.",
            stats.nodes_read_ahead.to_string(),
        );
        metric(
            "larch_store_bytes_read_total",
            "counter",
            "Bytes of records read from the pack.",
            stats.bytes_read.to_string(),
        );
        metric(
            "larch_store_commits",
            "gauge",
            "Commits in the store, as of the last reload.",
            stats.commit_count.to_string(),
        );
        metric(
            "larch_store_pack_bytes",
            "gauge",
            "Published length of the pack file.",
            stats.pack_bytes.to_string(),
        );
        let _ = writeln!(out, "# HELP larch_head_info The head commit (label), 1 while there is one.");
        let _ = writeln!(out, "# TYPE larch_head_info gauge");
        if let Some((hash, date)) = &store.head {
            let _ = writeln!(out, "larch_head_info{{hash=\"{hash}\"}} 1");
            let _ = writeln!(out, "# HELP larch_head_date_seconds Date of the head commit (Unix seconds).");
            let _ = writeln!(out, "# TYPE larch_head_date_seconds gauge");
            let _ = writeln!(out, "larch_head_date_seconds {date}");
        }
        out
    }
}
