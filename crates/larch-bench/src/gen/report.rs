//! What a generator reports about its trace (workload page §8).

use super::GenError;
use super::dist::SIZE_BUCKETS;
use super::emit::Counts;
use super::keys::{Model, child, data};
use super::params::GenParams;
use larch_core::{Hash, Tree};
use larch_trace::op::OpKind;
use std::fmt;

/// The report of one generated trace.
#[derive(Clone, Debug, PartialEq)]
pub struct GenReport {
    /// The parameters (seed included).
    pub params: GenParams,
    /// Committed blocks, genesis and setup included.
    pub blocks: u64,
    /// Blocks of the setup: 1, or its parts ([`GenParams::setup_part_ops`]); regular blocks start
    /// at level `setup_blocks + 1`.
    pub setup_blocks: u64,
    /// Values (contents) of the context after the setup.
    pub setup_values: u64,
    /// Directories of the context after the setup.
    pub setup_dirs: u64,
    /// Level of the last commit (lower than `blocks - 1` after reorganisations).
    pub final_level: u64,
    /// Extra contexts built and abandoned without a commit.
    pub abandoned: u64,
    /// Blocks that checked out a commit two levels back and committed a sibling.
    pub reorgs: u64,
    /// Cycle boundaries crossed (each with its snapshot copy and burst).
    pub cycles: u64,
    /// Of those, the ones with a large burst.
    pub large_bursts: u64,
    /// Operations per kind, in the order of [`OpKind::ALL`].
    pub op_counts: Vec<(OpKind, u64)>,
    /// `find` and `mem` operations that found nothing.
    pub misses: u64,
    /// Added values per size bucket: label, count, and the page's target share in percent.
    pub value_sizes: Vec<(&'static str, u64, f64)>,
    /// Most operations in one committed block (the setup block, usually).
    pub max_block_ops: u64,
    /// Largest directories of the final context: path and number of entries, largest first.
    pub largest_dirs: Vec<(String, u64)>,
    /// Hash of the last commit.
    pub final_commit: Hash,
}

impl GenReport {
    /// Count of operations of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        self.op_counts.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| *n)
    }

    /// All operations.
    pub fn total_ops(&self) -> u64 {
        self.op_counts.iter().map(|(_, n)| n).sum()
    }

    /// Share in percent of `kind` among all operations.
    pub fn share(&self, kind: OpKind) -> f64 {
        percent(self.count(kind), self.total_ops())
    }

    /// Share in percent of added values in size bucket `index` of the §4 table.
    pub fn size_share(&self, index: usize) -> f64 {
        let total = self.value_sizes.iter().map(|(_, n, _)| n).sum();
        percent(self.value_sizes.get(index).map_or(0, |(_, n, _)| *n), total)
    }
}

fn percent(part: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { 100.0 * part as f64 / total as f64 }
}

/// Assembles the report.
pub(crate) struct ReportParts {
    pub(crate) blocks: u64,
    pub(crate) setup_blocks: u64,
    pub(crate) setup_values: u64,
    pub(crate) setup_dirs: u64,
    pub(crate) final_level: u64,
    pub(crate) abandoned: u64,
    pub(crate) reorgs: u64,
    pub(crate) cycles: u64,
    pub(crate) large_bursts: u64,
    pub(crate) final_commit: Hash,
}

/// Builds the report from the counters and the final context.
pub(crate) fn build(
    params: &GenParams,
    parts: ReportParts,
    counts: &Counts,
    tree: &Tree,
    model: &Model,
) -> Result<GenReport, GenError> {
    let op_counts = OpKind::ALL.iter().zip(counts.ops.iter()).map(|(k, n)| (*k, *n)).collect();
    let value_sizes = SIZE_BUCKETS
        .iter()
        .zip(counts.sizes.iter())
        .map(|((_, label, share), n)| (*label, *n, *share))
        .collect();
    Ok(GenReport {
        params: params.clone(),
        blocks: parts.blocks,
        setup_blocks: parts.setup_blocks,
        setup_values: parts.setup_values,
        setup_dirs: parts.setup_dirs,
        final_level: parts.final_level,
        abandoned: parts.abandoned,
        reorgs: parts.reorgs,
        cycles: parts.cycles,
        large_bursts: parts.large_bursts,
        op_counts,
        misses: counts.misses,
        value_sizes,
        max_block_ops: counts.max_block_ops,
        largest_dirs: largest_dirs(tree, model)?,
        final_commit: parts.final_commit,
    })
}

/// Sizes of the directories known to be large: the contract index, the big maps, the delegates,
/// the stake, the cycles; the ten largest.
fn largest_dirs(tree: &Tree, model: &Model) -> Result<Vec<(String, u64)>, GenError> {
    let mut candidates = vec![
        data(&[b"contracts", b"index"]),
        data(&[b"big_maps", b"index"]),
        data(&[b"delegates"]),
        data(&[b"staking", b"current"]),
        data(&[b"staking", b"snapshot"]),
        data(&[b"cycle"]),
        data(&[]),
    ];
    // The setup's maps by rank (the largest first, only the first ones can be among the largest
    // directories), and every map created since (copies).
    let ranks = model.setup_maps.min(256);
    for m in (0..ranks).chain(model.setup_maps..model.maps.len() as u64) {
        candidates.push(child(&Model::map_path(m), b"contents"));
    }
    let mut sizes = Vec::new();
    for path in candidates {
        let length = tree.length(&path.steps())?;
        if length > 0 {
            let name: Vec<String> =
                path.iter().map(|step| String::from_utf8_lossy(step).into_owned()).collect();
            sizes.push((name.join("/"), length));
        }
    }
    sizes.sort_by(|(a, x), (b, y)| y.cmp(x).then_with(|| a.cmp(b)));
    sizes.truncate(10);
    Ok(sizes)
}

impl fmt::Display for GenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.params;
        writeln!(f, "tezos-like/v1 trace, seed {}", p.seed)?;
        writeln!(
            f,
            "parameters: blocks {}, accounts {}, ops-per-block {}, cycle-length {}, abandon-rate {}, reorg-rate {}",
            p.blocks, p.accounts, p.ops_per_block, p.cycle_length, p.abandon_rate, p.reorg_rate
        )?;
        writeln!(
            f,
            "blocks: {} committed (genesis and setup included), final level {}, {} abandoned contexts, {} reorganisations",
            self.blocks, self.final_level, self.abandoned, self.reorgs
        )?;
        writeln!(
            f,
            "setup: {} block(s), {} values and {} directories after it",
            self.setup_blocks, self.setup_values, self.setup_dirs
        )?;
        writeln!(f, "cycles: {} boundaries, {} with a large burst", self.cycles, self.large_bursts)?;
        let total = self.total_ops();
        writeln!(f, "operations: {total} (largest block {} ops)", self.max_block_ops)?;
        for (kind, n) in &self.op_counts {
            writeln!(f, "  {:<9} {:>12} {:>6.2}%", kind.name(), n, self.share(*kind))?;
        }
        let reads = self.count(OpKind::Find) + self.count(OpKind::Mem);
        writeln!(
            f,
            "  find/mem misses: {} ({:.1}% of find and mem)",
            self.misses,
            percent(self.misses, reads)
        )?;
        writeln!(f, "value sizes (added values; target share of the workload page):")?;
        for (index, (label, n, target)) in self.value_sizes.iter().enumerate() {
            writeln!(
                f,
                "  {:<13} {:>10} {:>6.2}%  (target {:.2}%)",
                label,
                n,
                self.size_share(index),
                target
            )?;
        }
        writeln!(f, "largest directories:")?;
        for (path, n) in &self.largest_dirs {
            writeln!(f, "  {:>9}  {}", n, path)?;
        }
        write!(f, "final commit: {}", self.final_commit)
    }
}
