//! SVG charts of one or several runs over their blocks: block time, RSS, store size and context
//! operations per second. Plain hand-written SVG (one `<polyline>` per run), viewable in any
//! browser. Long runs are reduced to at most [`MAX_POINTS`] points per series by averaging
//! consecutive blocks.

use crate::stats::distribution::FIRST_REGULAR_BLOCK;
use crate::stats::fmt;
use crate::stats::record::{BlockStats, StatFile, StatsError, read_stat_path};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Most points drawn per series.
pub const MAX_POINTS: usize = 1500;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 90.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// How the y axis values are labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum YUnit {
    /// Seconds.
    Seconds,
    /// Bytes.
    Bytes,
    /// A plain number.
    Number,
}

impl YUnit {
    fn show(self, value: f64) -> String {
        match self {
            YUnit::Seconds => fmt::duration(value),
            YUnit::Bytes => fmt::bytes(value),
            YUnit::Number => fmt::number(value),
        }
    }
}

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Unit of the y axis.
    pub y_unit: YUnit,
    /// The lines.
    pub series: Vec<Series>,
}

/// Escapes text for XML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Averages consecutive points so that at most `max` remain.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max == 0 {
        return points.to_vec();
    }
    let per_bucket = points.len().div_ceil(max);
    points
        .chunks(per_bucket)
        .map(|chunk| {
            let n = chunk.len() as f64;
            let x = chunk.iter().map(|p| p.0).sum::<f64>() / n;
            let y = chunk.iter().map(|p| p.1).sum::<f64>() / n;
            (x, y)
        })
        .collect()
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) dividing `range` into about `ticks` parts.
pub fn nice_step(range: f64, ticks: usize) -> f64 {
    if range.is_nan() || range <= 0.0 || range.is_infinite() {
        return 1.0;
    }
    let raw = range / ticks.max(1) as f64;
    let magnitude = 10_f64.powf(raw.log10().floor());
    let normalised = raw / magnitude;
    let nice = if normalised <= 1.0 {
        1.0
    } else if normalised <= 2.0 {
        2.0
    } else if normalised <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// Renders `chart` as a standalone SVG document.
pub fn render_svg(chart: &Chart) -> String {
    let finite = |v: &f64| v.is_finite();
    let xs = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(finite);
    let (x_min, x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let ys = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(finite);
    let y_data_max = ys.fold(0.0_f64, f64::max);
    let (x_min, x_max) = if x_min.is_finite() { (x_min, x_max.max(x_min + 1.0)) } else { (0.0, 1.0) };
    let y_range = if y_data_max > 0.0 { y_data_max } else { 1.0 };
    let y_step = match chart.y_unit {
        // Steps of 1, 2 or 5 times a power of ten in the binary unit the labels use (KiB, MiB, …).
        YUnit::Bytes => {
            let unit = 1024_f64.powf((y_range.log2() / 10.0).floor().max(0.0));
            nice_step(y_range / unit, 5) * unit
        }
        _ => nice_step(y_range, 5),
    };
    let y_max = (y_data_max / y_step).ceil().max(1.0) * y_step;
    let x_step = nice_step(x_max - x_min, 6).max(1.0);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x - x_min) / (x_max - x_min) * plot_w;
    let sy = |y: f64| TOP + plot_h - y / y_max * plot_h;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        WIDTH / 2.0,
        escape(&chart.title)
    );
    // Horizontal grid lines with y labels.
    let mut y = 0.0;
    while y <= y_max * (1.0 + 1e-9) {
        let py = sy(y);
        let _ = writeln!(
            svg,
            r##"<line class="grid" x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            py + 4.0,
            escape(&chart.y_unit.show(y))
        );
        y += y_step;
    }
    // X labels at multiples of the step.
    let mut x = (x_min / x_step).ceil() * x_step;
    while x <= x_max {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            sx(x),
            TOP + plot_h + 18.0,
            fmt::count(x.max(0.0).round() as u64)
        );
        x += x_step;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    let longest = chart.series.iter().map(|s| s.points.len()).max().unwrap_or(0);
    let x_label = if longest > MAX_POINTS {
        format!("{} (each point: mean of {} consecutive blocks)", chart.x_label, longest.div_ceil(MAX_POINTS))
    } else {
        chart.x_label.clone()
    };
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 40.0,
        escape(&x_label)
    );
    for (i, series) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points = downsample(&series.points, MAX_POINTS);
        let mut coords = String::new();
        for (x, y) in points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
            let _ = write!(coords, "{:.1},{:.1} ", sx(*x), sy(*y));
        }
        let _ = writeln!(
            svg,
            r#"<polyline class="series" fill="none" stroke="{color}" stroke-width="1.2" points="{}"><title>{}</title></polyline>"#,
            coords.trim_end(),
            escape(&series.label)
        );
        let legend_y = HEIGHT - 30.0 + 16.0 * (i / 4) as f64;
        let legend_x = LEFT + 220.0 * (i % 4) as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{legend_x:.1}" y1="{legend_y:.1}" x2="{:.1}" y2="{legend_y:.1}" stroke="{color}" stroke-width="3"/>"#,
            legend_x + 20.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            legend_x + 26.0,
            legend_y + 4.0,
            escape(&series.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn series_of(
    label: &str,
    blocks: &[BlockStats],
    first_block: u64,
    y: impl Fn(&BlockStats) -> Option<f64>,
) -> Option<Series> {
    let points: Vec<(f64, f64)> = blocks
        .iter()
        .filter(|b| b.block >= first_block)
        .filter_map(|b| y(b).map(|y| (b.block as f64, y)))
        .collect();
    (!points.is_empty()).then(|| Series { label: label.to_string(), points })
}

/// The standard charts of `runs` (label, stat file): `block_time`, `rss`, `store_size` and
/// `context_ops_per_s`, each with one series per run that has the data. Charts with no data at
/// all are left out. The per-block time and rate charts start at the first regular block (2):
/// genesis and the setup block would flatten everything else.
pub fn charts(runs: &[(String, &StatFile)]) -> Vec<(&'static str, Chart)> {
    type Getter = fn(&BlockStats) -> Option<f64>;
    let regular = FIRST_REGULAR_BLOCK;
    let specs: [(&'static str, &str, u64, YUnit, Getter); 4] = [
        ("block_time", "Block time (wall), regular blocks", regular, YUnit::Seconds, |b| Some(b.wall_s)),
        ("rss", "Resident set size after each block", 0, YUnit::Bytes, |b| b.rss_bytes.map(|v| v as f64)),
        ("store_size", "Store size on disk", 0, YUnit::Bytes, |b| {
            b.backend.store_size_bytes.map(|v| v as f64)
        }),
        (
            "context_ops_per_s",
            "Context operations per wall second, regular blocks",
            regular,
            YUnit::Number,
            |b| {
                let ops = b.ops.saturating_sub(b.op_times.checkout.count + b.op_times.commit.count);
                (b.wall_s > 0.0).then(|| ops as f64 / b.wall_s)
            },
        ),
    ];
    specs
        .into_iter()
        .filter_map(|(name, title, first_block, y_unit, get)| {
            let series: Vec<Series> = runs
                .iter()
                .filter_map(|(label, file)| series_of(label, &file.blocks, first_block, get))
                .collect();
            (!series.is_empty()).then(|| {
                (name, Chart { title: title.to_string(), x_label: "block".to_string(), y_unit, series })
            })
        })
        .collect()
}

/// Writes the [`charts`] of `runs` as `<name>.svg` into `out_dir` (created if missing); returns the
/// files written.
pub fn write_charts(runs: &[(String, &StatFile)], out_dir: &Path) -> Result<Vec<PathBuf>, StatsError> {
    std::fs::create_dir_all(out_dir)?;
    let mut written = Vec::new();
    for (name, chart) in charts(runs) {
        let path = out_dir.join(format!("{name}.svg"));
        std::fs::write(&path, render_svg(&chart))?;
        written.push(path);
    }
    Ok(written)
}

/// Reads stat files and writes their [`charts`] into `out_dir`. Each run is labelled with its
/// given label, or else its file's name.
pub fn plot_stat_files(
    files: &[(Option<String>, PathBuf)],
    out_dir: &Path,
) -> Result<Vec<PathBuf>, StatsError> {
    let mut loaded = Vec::with_capacity(files.len());
    for (label, path) in files {
        let label = label.clone().unwrap_or_else(|| file_label(path));
        loaded.push((label, read_stat_path(path)?));
    }
    let runs: Vec<(String, &StatFile)> = loaded.iter().map(|(label, file)| (label.clone(), file)).collect();
    write_charts(&runs, out_dir)
}

/// The default label of a run: its file's name.
pub(crate) fn file_label(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsample_averages() {
        let points: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(downsample(&points, 5), vec![(0.5, 0.5), (2.5, 2.5), (4.5, 4.5), (6.5, 6.5), (8.5, 8.5)]);
        assert_eq!(downsample(&points, 20).len(), 10);
    }

    #[test]
    fn escapes_labels() {
        let chart = Chart {
            title: "a<b & c".to_string(),
            x_label: "block".to_string(),
            y_unit: YUnit::Number,
            series: vec![Series { label: "\"x\"".to_string(), points: vec![(0.0, 1.0), (1.0, 2.0)] }],
        };
        let svg = render_svg(&chart);
        assert!(svg.contains("a&lt;b &amp; c"));
        assert!(svg.contains("&quot;x&quot;"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
        assert!((nice_step(0.0042, 5) - 0.001).abs() < 1e-15);
        assert_eq!(nice_step(0.0, 5), 1.0);
    }
}
