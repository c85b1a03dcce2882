//! Distributions of per-block values (block, commit and GC times) and where regular blocks start.

use serde::{Deserialize, Serialize};

/// Blocks before this index (genesis and the setup block) are not "regular" blocks.
pub const FIRST_REGULAR_BLOCK: u64 = 2;

/// A distribution of per-block values (seconds), with the block of the maximum.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Number of values.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest value.
    pub max: f64,
    /// Block number of the largest value.
    pub max_block: u64,
}

impl Distribution {
    /// The distribution of `(value, block)` pairs; `None` when empty. Percentiles use the
    /// nearest-rank method: the p-th percentile is the value of rank ⌈p/100 · n⌉ in ascending order.
    pub fn of(values: &[(f64, u64)]) -> Option<Distribution> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().map(|(v, _)| v).sum::<f64>() / n as f64;
        let variance = values.iter().map(|(v, _)| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let (max, max_block) =
            values.iter().fold((f64::NEG_INFINITY, 0), |acc, (v, b)| if *v > acc.0 { (*v, *b) } else { acc });
        let mut sorted: Vec<f64> = values.iter().map(|(v, _)| *v).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let rank = (p / 100.0 * n as f64).ceil() as usize;
            sorted[rank.clamp(1, n) - 1]
        };
        Some(Distribution {
            count: n as u64,
            mean,
            sd: variance.sqrt(),
            min: sorted[0],
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max,
            max_block,
        })
    }
}
