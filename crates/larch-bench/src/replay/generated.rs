//! A streamed replay (`larch replay --generate`, the scale ladder's large rungs): the generator's
//! operations are applied to the repository as they are drawn, with no trace file, and after each
//! commit the generator goes on from the tree the repository checks out (a store's, loaded
//! lazily), so that neither holds the context in memory. The setup (genesis and the setup blocks)
//! and the regular blocks are measured apart: each has its own summary, clocks and peak RSS.

use super::{ReplayError, ReplayOptions, Replayer, RunMeta};
use crate::r#gen::{BlockKind, GenError, GenReport, Generator};
use crate::stats::record::{BlockStats, StatEnd, StatLine, write_line};
use crate::stats::summary::{RunSummary, Summariser};
use larch_core::{ContextRepo, Hash, Tree};
use larch_trace::format::OpSink;
use larch_trace::op::Op;
use std::cell::RefCell;
use std::io::Write;

/// What a streamed replay measured and generated.
#[derive(Clone, Debug)]
pub struct GeneratedRun {
    /// Genesis and the setup blocks: the setup's time, memory and store size.
    pub setup: RunSummary,
    /// The regular blocks, measured from the end of the setup (its clocks, store growth and peak
    /// RSS start again there).
    pub regular: RunSummary,
    /// The generator's report (the context's size after the setup, operation counts, the final
    /// commit).
    pub report: GenReport,
}

/// The state shared by the generator's sink and its reload callback.
struct Stream<'s, 'r, R: ContextRepo> {
    replayer: Replayer<'r, R>,
    meta: &'s RunMeta,
    summariser: Summariser,
    setup: Option<RunSummary>,
    stats_out: Option<&'s mut dyn Write>,
    /// Where the regular blocks' operations (those after the setup's summary) are recorded, if
    /// anywhere.
    record: Option<&'s mut dyn OpSink>,
    /// The last block's statistics, until the generator tells what kind of block it was.
    block: Option<BlockStats>,
    progress: &'s mut dyn FnMut(BlockKind, &BlockStats),
}

impl<R: ContextRepo> Stream<'_, '_, R> {
    fn op(&mut self, op: Op) -> Result<(), ReplayError> {
        if let (true, Some(record)) = (self.setup.is_some(), self.record.as_deref_mut()) {
            record.write_op(&op).map_err(ReplayError::Record)?;
        }
        if let Some(block) = self.replayer.apply(op)? {
            self.block = Some(block);
        }
        Ok(())
    }

    fn write(&mut self, line: &StatLine) -> Result<(), ReplayError> {
        if let Some(out) = self.stats_out.as_deref_mut() {
            let bytes = write_line(out, line).map_err(ReplayError::StatsOutput)?;
            self.replayer.exclude_output_bytes(bytes);
        }
        Ok(())
    }

    /// After the commit of a block of `kind`: records the block, ends the setup's measurements
    /// after its last block, and gives the generator the commit's tree from the repository.
    fn committed(&mut self, kind: BlockKind) -> Result<Option<Tree>, ReplayError> {
        if let Some(block) = self.block.take() {
            self.summariser.push(&block);
            if kind == BlockKind::Regular {
                self.write(&StatLine::Block(block.clone()))?;
            }
            (self.progress)(kind, &block);
        }
        if kind == BlockKind::SetupEnd {
            // The setup ends once its commits are durable.
            self.replayer.wait_durable()?;
            let end = self.replayer.end();
            self.setup = Some(self.summariser.finish(Some(&end)));
            let header = self.replayer.restart_measurements(self.meta);
            self.summariser = Summariser::new(&header);
            self.write(&StatLine::Header(header))?;
        }
        match self.replayer.last_commit() {
            Some(real) => self.replayer.checkout_tree(&real).map(Some),
            None => Ok(None),
        }
    }
}

/// Generates the trace of `generator` and replays it at once into `repo`, checking every read
/// and commit hash as [`super::replay`] does, though the generator reads and hashes the replay's
/// own tree but in abandoned contexts (so those checks hold by construction: the tests compare
/// the commits with [`crate::Generator::run`]'s) (`options.max_blocks` is ignored: the generator's
/// parameters decide). Writes the regular blocks' stat file (header, block lines, end line) to
/// `stats_out` if given, the regular blocks' operations to `record` if given (and finishes it: a
/// trace that [`super::replay`] with [`ReplayOptions::store_commits`] replays onto a store
/// holding the setup's commits, that is a streamed replay's store made with no regular block),
/// calls `progress` after every block with its kind, and returns both phases' summaries and the
/// generator's report.
///
/// Memory: during the setup, the replay holds the current part's modified nodes
/// ([`crate::GenParams::setup_part_ops`], [`crate::GenParams::setup_part_items`]) and the generator
/// none (it reads and hashes the replay's tree of its context, so the setup's commit hashes are the
/// replay's own: `crates/larch-bench/tests/ladder.rs` checks them against [`Generator::run`]'s);
/// during regular blocks too, the replay alone holds the block's modified nodes (the generator
/// reads and hashes the replay's tree, but for an abandoned context, which it builds on a tree of
/// its own); everything else is loaded through the repository's cache. The commit hashes are those of [`Generator::run`] for the
/// same parameters.
pub fn replay_generated<'s, R: ContextRepo>(
    repo: &mut R,
    generator: Generator,
    options: &ReplayOptions,
    meta: &'s RunMeta,
    stats_out: Option<&'s mut dyn Write>,
    record: Option<&'s mut dyn OpSink>,
    progress: &'s mut dyn FnMut(BlockKind, &BlockStats),
) -> Result<GeneratedRun, ReplayError> {
    let replayer = Replayer::new(repo, ReplayOptions { max_blocks: None, ..options.clone() });
    let summariser = Summariser::new(&replayer.header(meta));
    let stream = RefCell::new(Stream {
        replayer,
        meta,
        summariser,
        setup: None,
        stats_out,
        record,
        block: None,
        progress,
    });
    let report = generator.run_streamed(
        &mut |op| stream.borrow_mut().op(op),
        &mut |_hash: &Hash, kind| stream.borrow_mut().committed(kind),
        &mut |id| Ok::<_, ReplayError>(stream.borrow().replayer.context_tree(id)),
        &mut |_, _| {},
    );
    let mut stream = stream.into_inner();
    let report = report.map_err(|err| match err {
        GenError::Sink(source) => match source.downcast::<ReplayError>() {
            Ok(replay) => *replay,
            Err(other) => ReplayError::Generator(Box::new(GenError::Sink(other))),
        },
        other => ReplayError::Generator(Box::new(other)),
    })?;
    stream.replayer.wait_durable()?;
    // The regular phase's blocks (the replay's count includes the setup's).
    let mut end = StatEnd { blocks: stream.summariser.blocks(), ..stream.replayer.end() };
    end.gc = stream.replayer.finish_gc()?;
    stream.write(&StatLine::End(end.clone()))?;
    if let Some(out) = stream.stats_out.as_deref_mut() {
        out.flush().map_err(ReplayError::StatsOutput)?;
    }
    if let Some(record) = stream.record.as_deref_mut() {
        record.finish().map_err(ReplayError::Record)?;
    }
    let regular = stream.summariser.finish(Some(&end));
    let setup = stream.setup.take().unwrap_or_else(|| regular.clone());
    Ok(GeneratedRun { setup, regular, report })
}
