//! Statistics of a replay: process probes, the stat file (JSON lines, one per block), the run
//! summary, comparisons of runs and SVG charts. The format is documented in
//! `docs/stats-format.md`.

pub mod compare;
pub mod curve;
pub mod distribution;
pub mod fmt;
pub mod gc;
pub mod plot;
pub mod probe;
pub mod record;
pub mod summary;

pub use compare::{
    Comparison, ComparisonRow, LoadedRun, SetupRow, Unit, compare, compare_stat_files, load_run,
};
pub use curve::{CurvePoint, CurveTable, cost_curve_chart};
pub use gc::GcRunSummary;
pub use plot::{Chart, Series, YUnit, charts, plot_stat_files, render_svg, write_charts};
pub use probe::{IoCounters, ProcessSample, dir_bytes};
pub use record::{
    BlockStats, OpStat, OpTable, StatEnd, StatFile, StatHeader, StatLine, StatsError, read_stat_file,
    read_stat_path, write_line,
};
pub use summary::{
    Distribution, OpKindSummary, RunSummary, STREAMED_TRACE, Summariser, summarise, summarise_stat_path,
};
