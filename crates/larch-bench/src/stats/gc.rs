//! The garbage-collection part of a run's summary (replays with `--gc-every`): how many GCs ran,
//! how long they took, the writer's pauses, the store's size on disk, and the block times of the
//! blocks that overlapped a GC against the others.

use crate::stats::distribution::{Distribution, FIRST_REGULAR_BLOCK};
use crate::stats::fmt;
use crate::stats::record::{BlockGc, BlockStats};
use larch_core::GcSummary;
use serde::{Deserialize, Serialize};
use std::fmt as sfmt;

/// Garbage collection over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcRunSummary {
    /// GCs started.
    pub started: u64,
    /// GCs that finished (switched) during the run (a sliced GC counts once, at its first slice).
    pub finished: u64,
    /// Of the finished GCs, those that switched after the last block (the stat file's end line):
    /// the one still running at the last block, which the replay's end waits for, and under
    /// `--gc-when-busy wait` the one the last block's due GC waited for. Counted in every
    /// aggregate as the others are.
    #[serde(default)]
    pub finished_at_close: u64,
    /// Time waited for GCs after the last block (the end line's `waited_s`), in seconds; the
    /// end's wait for the GC still running is not in the run's wall time.
    #[serde(default)]
    pub close_wait_s: f64,
    /// Later slices of sliced GCs that switched (each returns more of its GC's disk).
    #[serde(default)]
    pub extra_slices: u64,
    /// GCs abandoned (the store left unchanged).
    #[serde(default)]
    pub abandoned: u64,
    /// Wall time of each finished GC, from its start to its switch.
    pub gc_time: Option<Distribution>,
    /// The longest time the writer spent in a switch, in seconds.
    pub max_switch_pause_s: Option<f64>,
    /// Total time blocks waited for a GC still running when the next was due, in seconds.
    pub waited_s: f64,
    /// Due GCs deferred because the previous one still ran (started once it finished).
    #[serde(default)]
    pub deferred: u64,
    /// Due GCs never started: skipped while another ran, or deferred and then superseded.
    #[serde(default)]
    pub skipped: u64,
    /// Bytes copied by all finished GCs.
    pub copied_bytes: u64,
    /// The largest size of the store's files seen (the GCs' peaks and every block's end).
    pub disk_peak_bytes: Option<u64>,
    /// The largest `disk_peak / disk_before` of a GC: its extra disk, as a ratio.
    pub max_peak_over_start: Option<f64>,
    /// Regular blocks during which a GC ran, started or switched.
    pub overlapped_block_time: Option<Distribution>,
    /// Regular blocks without any GC activity.
    pub other_block_time: Option<Distribution>,
}

/// Accumulates [`GcRunSummary`] one block at a time.
#[derive(Clone, Debug, Default)]
pub struct GcAccumulator {
    seen: bool,
    started: u64,
    abandoned: u64,
    extra_slices: u64,
    gc_times: Vec<(f64, u64)>,
    max_switch_pause_s: Option<f64>,
    waited_s: f64,
    deferred: u64,
    skipped: u64,
    copied_bytes: u64,
    disk_peak: Option<u64>,
    max_peak_over_start: Option<f64>,
    overlapped: Vec<(f64, u64)>,
    other: Vec<(f64, u64)>,
    running_before: bool,
    finished_at_close: u64,
    close_wait_s: f64,
}

impl GcAccumulator {
    /// Adds one block.
    pub fn push(&mut self, block: &BlockStats) {
        let disk = block.backend.store_size_bytes;
        let Some(gc) = &block.gc else { return };
        self.seen = true;
        self.started += u64::from(gc.started);
        self.waited_s += gc.waited_s;
        self.deferred += u64::from(gc.deferred);
        self.skipped += gc.skipped;
        self.add_finished(&gc.finished, block.block, disk);
        // A GC started after the previous block ran during this one, as did one still running.
        let active = self.running_before || gc.running || gc.started || !gc.finished.is_empty();
        self.running_before = gc.running;
        if block.block >= FIRST_REGULAR_BLOCK {
            let sample = (block.wall_s, block.block);
            if active { self.overlapped.push(sample) } else { self.other.push(sample) }
        }
    }

    /// Adds the replay's end (the stat file's end line's `gc`): the GC hooks' work after the last
    /// block, `last_block`, and the GC the end waited for, counted as finished in that block.
    pub fn push_close(&mut self, gc: &BlockGc, last_block: u64) {
        self.seen = true;
        self.started += u64::from(gc.started);
        self.deferred += u64::from(gc.deferred);
        self.skipped += gc.skipped;
        self.close_wait_s += gc.waited_s;
        self.finished_at_close +=
            gc.finished.iter().filter(|done| !done.abandoned && done.slice == 0).count() as u64;
        self.add_finished(&gc.finished, last_block, None);
    }

    /// Adds the GCs that switched (or were abandoned) in `block`, whose store then had `disk` bytes.
    fn add_finished(&mut self, finished: &[GcSummary], block: u64, disk: Option<u64>) {
        let mut peak = disk;
        for done in finished {
            if done.abandoned {
                self.abandoned += 1;
                continue;
            }
            if done.slice > 0 {
                self.extra_slices += 1;
            }
            self.gc_times.push((done.total_s, block));
            self.max_switch_pause_s = Some(self.max_switch_pause_s.unwrap_or(0.0).max(done.switch_pause_s));
            self.copied_bytes += done.copied_bytes;
            peak = Some(peak.unwrap_or(0).max(done.disk_peak));
            if done.disk_before > 0 {
                let ratio = done.disk_peak as f64 / done.disk_before as f64;
                self.max_peak_over_start = Some(self.max_peak_over_start.unwrap_or(0.0).max(ratio));
            }
        }
        if let Some(peak) = peak {
            self.disk_peak = Some(self.disk_peak.unwrap_or(0).max(peak));
        }
    }

    /// The summary, `None` for a run without a GC schedule.
    pub fn finish(&self) -> Option<GcRunSummary> {
        self.seen.then(|| GcRunSummary {
            started: self.started,
            finished: self.gc_times.len() as u64 - self.extra_slices,
            finished_at_close: self.finished_at_close,
            close_wait_s: self.close_wait_s,
            extra_slices: self.extra_slices,
            abandoned: self.abandoned,
            gc_time: Distribution::of(&self.gc_times),
            max_switch_pause_s: self.max_switch_pause_s,
            waited_s: self.waited_s,
            deferred: self.deferred,
            skipped: self.skipped,
            copied_bytes: self.copied_bytes,
            disk_peak_bytes: self.disk_peak,
            max_peak_over_start: self.max_peak_over_start,
            overlapped_block_time: Distribution::of(&self.overlapped),
            other_block_time: Distribution::of(&self.other),
        })
    }
}

fn tail(d: &Option<Distribution>) -> String {
    d.as_ref().map_or_else(
        || "-".to_string(),
        |d| {
            format!(
                "{} blocks, p50 {}, p99 {}, max {}",
                fmt::count(d.count),
                fmt::duration(d.p50),
                fmt::duration(d.p99),
                fmt::duration(d.max)
            )
        },
    )
}

impl sfmt::Display for GcRunSummary {
    fn fmt(&self, f: &mut sfmt::Formatter<'_>) -> sfmt::Result {
        writeln!(f, "Garbage collection")?;
        let times = self.gc_time.as_ref().map_or_else(
            || "-".to_string(),
            |d| format!("mean {}, max {}", fmt::duration(d.mean), fmt::duration(d.max)),
        );
        writeln!(
            f,
            "  {:<16} {:>12}  ({} finished, {} abandoned, {} more slices; time of a slice {times})",
            "GCs started",
            fmt::count(self.started),
            fmt::count(self.finished),
            fmt::count(self.abandoned),
            fmt::count(self.extra_slices)
        )?;
        if self.deferred > 0 || self.skipped > 0 {
            writeln!(
                f,
                "  {:<16} {:>12}  (due while the previous GC still ran; {} never started)",
                "GCs deferred",
                fmt::count(self.deferred),
                fmt::count(self.skipped)
            )?;
        }
        if self.finished_at_close > 0 || self.close_wait_s > 0.0 {
            writeln!(
                f,
                "  {:<16} {:>12}  (switched after the last block; waited {} for them)",
                "GCs at the end",
                fmt::count(self.finished_at_close),
                fmt::duration(self.close_wait_s)
            )?;
        }
        writeln!(
            f,
            "  {:<16} {:>12}  (waited for a running GC: {})",
            "max switch pause",
            self.max_switch_pause_s.map_or_else(|| "-".to_string(), fmt::duration),
            fmt::duration(self.waited_s)
        )?;
        writeln!(
            f,
            "  {:<16} {:>12}  (largest peak/start of one GC: {}; copied {})",
            "disk peak",
            self.disk_peak_bytes.map_or_else(|| "-".to_string(), |b| fmt::bytes(b as f64)),
            self.max_peak_over_start.map_or_else(|| "-".to_string(), |r| format!("{r:.3}x")),
            fmt::bytes(self.copied_bytes as f64)
        )?;
        writeln!(f, "  {:<16} {}", "blocks with GC", tail(&self.overlapped_block_time))?;
        writeln!(f, "  {:<16} {}", "blocks without", tail(&self.other_block_time))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larch_core::BackendStats;

    fn block(n: u64, wall_s: f64, disk: u64, gc: BlockGc) -> BlockStats {
        BlockStats {
            block: n,
            wall_s,
            backend: BackendStats { store_size_bytes: Some(disk), ..BackendStats::default() },
            gc: Some(gc),
            ..BlockStats::default()
        }
    }

    #[test]
    fn blocks_are_split_by_gc_activity_and_peaks_kept() {
        let mut acc = GcAccumulator::default();
        acc.push(&block(2, 0.01, 100, BlockGc::default()));
        acc.push(&block(3, 0.02, 110, BlockGc { started: true, running: true, ..BlockGc::default() }));
        // Still running at the end of block 3: block 4 overlapped it even though it reports nothing.
        acc.push(&block(4, 0.03, 120, BlockGc::default()));
        let done = GcSummary {
            total_s: 1.5,
            switch_pause_s: 0.004,
            disk_before: 110,
            disk_after: 80,
            disk_peak: 130,
            copied_bytes: 7,
            abandoned: false,
            slice: 0,
            ..GcSummary::default()
        };
        acc.push(&block(5, 0.05, 80, BlockGc { finished: vec![done], ..BlockGc::default() }));
        let gave_up = GcSummary { abandoned: true, ..GcSummary::default() };
        acc.push(&block(6, 0.01, 85, BlockGc { finished: vec![gave_up], ..BlockGc::default() }));
        let summary = acc.finish().unwrap();
        assert_eq!(
            (summary.started, summary.finished, summary.abandoned, summary.copied_bytes),
            (1, 1, 1, 7)
        );
        assert_eq!(summary.disk_peak_bytes, Some(130));
        assert_eq!(summary.max_switch_pause_s, Some(0.004));
        assert!((summary.max_peak_over_start.unwrap() - 130.0 / 110.0).abs() < 1e-12);
        let overlapped = summary.overlapped_block_time.clone().unwrap();
        assert_eq!((overlapped.count, overlapped.max, overlapped.max_block), (4, 0.05, 5));
        // Block 6 switched nothing but ended an abandoned GC: it counts as a block with GC activity.
        let other = summary.other_block_time.clone().unwrap();
        assert_eq!(other.count, 1);
        let text = summary.to_string();
        assert!(text.contains("GCs started") && text.contains("1.182x"), "{text}");
    }

    #[test]
    fn the_gc_the_end_waited_for_counts_with_the_others() {
        let mut acc = GcAccumulator::default();
        acc.push(&block(2, 0.01, 100, BlockGc::default()));
        let done = GcSummary {
            total_s: 0.5,
            disk_before: 100,
            disk_peak: 150,
            copied_bytes: 9,
            ..GcSummary::default()
        };
        let close =
            BlockGc { started: true, waited_s: 0.25, skipped: 1, finished: vec![done], ..BlockGc::default() };
        acc.push_close(&close, 2);
        let summary = acc.finish().unwrap();
        assert_eq!(
            (summary.started, summary.finished, summary.finished_at_close, summary.skipped),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (summary.copied_bytes, summary.disk_peak_bytes, summary.close_wait_s),
            (9, Some(150), 0.25)
        );
        assert_eq!(summary.max_peak_over_start, Some(1.5));
        assert_eq!(summary.gc_time.as_ref().map(|d| (d.count, d.max_block)), Some((1, 2)));
        assert!(summary.to_string().contains("GCs at the end"), "{summary}");
    }

    #[test]
    fn runs_without_a_schedule_have_no_gc_summary() {
        let mut acc = GcAccumulator::default();
        acc.push(&BlockStats { block: 2, ..BlockStats::default() });
        assert_eq!(acc.finish(), None);
    }
}
