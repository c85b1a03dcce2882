//! larch-bench: the replay benchmark harness. The Tezos-like trace generator ([`Generator`],
//! `docs/workload.md`), the [`replay`](mod@replay)er that applies a trace to any [`larch_core::ContextRepo`]
//! with every read and hash checked and every block measured, per-block statistics (the stat file,
//! `docs/stats-format.md`), run summaries, comparisons of runs and SVG charts.
//!
//! It builds on `larch-trace` (the op model and the formats) and runs on any store through the
//! `ContextRepo` seam of `larch-core`; it prints nothing itself (the `larch` command does).

pub mod r#gen;
pub mod replay;
pub mod stats;

pub use r#gen::{BlockKind, GenError, GenParams, GenReport, Generator, ParamError, Rung};
pub use replay::{
    GcSchedule, GcWhenBusy, GeneratedRun, ReadAhead, ReadAheadCounts, ReplayError, ReplayOptions, Replayer,
    RunMeta, replay, replay_generated,
};
pub use stats::{Comparison, RunSummary, compare};
