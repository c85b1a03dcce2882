//! Cost curves of the scale ladder (`larch report curve`): a replay's figures against the size of
//! its context, one point per rung, from the summaries of streamed replays (`larch replay --scale
//! RUNG --json`, which add the context's size after the setup to the regular blocks' summary).

use crate::stats::fmt;
use crate::stats::plot::{Chart, Series, YUnit};
use crate::stats::summary::RunSummary;
use std::fmt as sfmt;

/// One rung's run.
#[derive(Clone, Debug, PartialEq)]
pub struct CurvePoint {
    /// The run's label (its rung).
    pub label: String,
    /// Values (contents) of the context after the setup.
    pub context_values: u64,
    /// Directories of the context after the setup.
    pub context_dirs: u64,
    /// The regular blocks' summary.
    pub summary: RunSummary,
}

/// A figure of a run, by name, with how to show it.
type Metric = (&'static str, YUnit, fn(&RunSummary) -> Option<f64>);

/// The figures of the cost curve, in the table's order.
const METRICS: [Metric; 7] = [
    // A streamed replay's times include the generator's, which runs the same reads first (and so
    // warms the store's cache for the replay's own): the process's rates are the ones to compare.
    ("context ops/s, wall", YUnit::Number, |s| s.context_ops_per_wall_s),
    ("context ops/s, CPU", YUnit::Number, |s| s.context_ops_per_s),
    ("regular-block p99", YUnit::Seconds, |s| s.regular_block_time.as_ref().map(|d| d.p99)),
    ("largest regular block", YUnit::Seconds, |s| s.regular_block_time.as_ref().map(|d| d.max)),
    ("peak RSS", YUnit::Bytes, |s| s.max_rss_bytes.map(|b| b as f64)),
    ("store bytes", YUnit::Bytes, |s| s.store_size_bytes.map(|b| b as f64)),
    ("read syscalls per block", YUnit::Number, |s| s.io.map(|io| io.syscr as f64 / s.blocks.max(1) as f64)),
];

/// The cost curve as one chart: each figure as a ratio to the first (smallest) rung's, against
/// the base-10 logarithm of the context's values. `None` without points.
pub fn cost_curve_chart(points: &[CurvePoint]) -> Option<Chart> {
    let first = points.first()?;
    let series = METRICS
        .iter()
        .filter_map(|(name, _, get)| {
            let base = get(&first.summary).filter(|b| *b > 0.0)?;
            let points: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| Some((libm::log10(p.context_values.max(1) as f64), get(&p.summary)? / base)))
                .collect();
            Some(Series { label: (*name).to_string(), points })
        })
        .collect();
    Some(Chart {
        title: format!("Cost against context size, as ratios to the {} rung", first.label),
        x_label: "values in the context after the setup, log10 (6 = 1 M, 7 = 10 M, 8 = 100 M)".to_string(),
        y_unit: YUnit::Number,
        series,
    })
}

/// The cost curve as a Markdown table: one row per rung.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveTable<'a>(pub &'a [CurvePoint]);

impl sfmt::Display for CurveTable<'_> {
    fn fmt(&self, f: &mut sfmt::Formatter<'_>) -> sfmt::Result {
        write!(f, "| rung | values | directories | regular blocks |")?;
        for (name, _, _) in METRICS {
            write!(f, " {name} |")?;
        }
        writeln!(f)?;
        writeln!(f, "|{}", "---|".repeat(4 + METRICS.len()))?;
        for point in self.0 {
            write!(
                f,
                "| {} | {} | {} | {} |",
                point.label,
                fmt::count(point.context_values),
                fmt::count(point.context_dirs),
                point.summary.blocks
            )?;
            for (_, unit, get) in METRICS {
                match get(&point.summary) {
                    Some(value) => write!(f, " {} |", show(unit, value))?,
                    None => write!(f, " ? |")?,
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

fn show(unit: YUnit, value: f64) -> String {
    match unit {
        YUnit::Seconds => fmt::duration(value),
        YUnit::Bytes => fmt::bytes(value),
        _ => fmt::number(value),
    }
}
