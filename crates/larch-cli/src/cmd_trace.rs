//! `larch trace gen|convert|info`: the Tezos-like generator, format conversion, and trace summaries.

use crate::output::{emit, emit_line};
use crate::progress::blocks_bar;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use larch_bench::{GenParams, GenReport, Generator, Rung};
use larch_trace::format::create_trace;
use larch_trace::info::{InfoOptions, trace_info_with};
use larch_trace::{TraceFormat, convert_file, open_trace};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Subcommands of `larch trace`.
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Generate a Tezos-like trace (`docs/workload.md`), deterministic from `--seed`.
    Gen {
        /// The trace file to write.
        #[arg(long, short)]
        out: PathBuf,
        /// Format of the trace: `larch` (larch's own) or `irmin` (Irmin's replay trace,
        /// `IrmRepBT`, which Irmin's replay benchmark reads).
        #[arg(long, default_value = "larch")]
        format: TraceFormat,
        /// The generator's parameters.
        #[command(flatten)]
        params: GenArgs,
    },
    /// Convert a trace (either format, sniffed) into the other format, or the same one.
    Convert {
        /// The trace to read.
        input: PathBuf,
        /// The trace to write.
        output: PathBuf,
        /// Format of the output: `larch` or `irmin`.
        #[arg(long)]
        to: TraceFormat,
    },
    /// Describe a trace: operations per kind, blocks, value sizes, largest directories.
    Info {
        /// The trace to read (either format).
        trace: PathBuf,
        /// How many of the largest directories of the last commit to list (0: skip applying the
        /// operations, which is faster).
        #[arg(long, default_value_t = 10)]
        largest: usize,
    },
}

/// The generator's parameters on the command line (defaults of `docs/workload.md` §7, or of the
/// rung of the scale ladder named by `--scale`).
#[derive(Args, Debug, Clone)]
pub struct GenArgs {
    /// The rung of the scale ladder: `1x` (the default context), `10x`, or `mainnet` (about 82 M
    /// values and 30 M directories after the setup, docs/workload.md). The options below change
    /// the rung's parameters.
    #[arg(long, default_value = "1x")]
    pub scale: Rung,
    /// Regular blocks after genesis and the setup.
    #[arg(long, default_value_t = GenParams::default().blocks)]
    pub blocks: u64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = GenParams::default().seed)]
    pub seed: u64,
    /// Implicit accounts created by the setup (default: the rung's; 20,000 at 1x).
    #[arg(long)]
    pub accounts: Option<u64>,
    /// Mean context operations per regular block (default 2,000).
    #[arg(long)]
    pub ops_per_block: Option<u64>,
    /// Blocks per cycle (default 256).
    #[arg(long)]
    pub cycle_length: Option<u64>,
    /// Commit the setup in parts of about N operations (0: in one block, the 1x default; the
    /// larger rungs' default is 262,144).
    #[arg(long, value_name = "N")]
    pub setup_part_ops: Option<u64>,
}

impl GenArgs {
    /// The generator parameters these arguments describe.
    pub fn params(&self) -> GenParams {
        let rung = self.scale.params(self.seed, self.blocks);
        GenParams {
            accounts: self.accounts.unwrap_or(rung.accounts),
            ops_per_block: self.ops_per_block.unwrap_or(rung.ops_per_block),
            cycle_length: self.cycle_length.unwrap_or(rung.cycle_length),
            setup_part_ops: self.setup_part_ops.unwrap_or(rung.setup_part_ops),
            ..rung
        }
    }
}

/// The header metadata of a generated trace: the generator and its parameters.
pub fn trace_metadata(params: &GenParams) -> Vec<(String, String)> {
    let mut metadata = vec![
        ("generator".to_string(), "larch tezos-like".to_string()),
        ("seed".to_string(), params.seed.to_string()),
        ("blocks".to_string(), params.blocks.to_string()),
        ("accounts".to_string(), params.accounts.to_string()),
        ("ops_per_block".to_string(), params.ops_per_block.to_string()),
        ("cycle_length".to_string(), params.cycle_length.to_string()),
    ];
    // The ladder's parameters, when they differ from the defaults (1x traces stay as they were).
    let extra = [
        ("setup_part_ops", (params.setup_part_ops != 0).then_some(params.setup_part_ops)),
        ("largest_map", params.largest_map),
        ("delegates", params.delegates),
    ];
    for (key, value) in extra {
        if let Some(value) = value {
            metadata.push((key.to_string(), value.to_string()));
        }
    }
    metadata
}

/// Generates the trace of `params` into `path`, with a progress bar; returns the report.
pub fn generate(params: GenParams, path: &Path, format: TraceFormat) -> anyhow::Result<GenReport> {
    let metadata = trace_metadata(&params);
    let mut sink =
        create_trace(path, format, &metadata).with_context(|| format!("creating {}", path.display()))?;
    let generator = Generator::new(params)?;
    let bar = blocks_bar("generate", None);
    let report = generator.run(&mut |op| sink.write_op(&op), &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let report = report.with_context(|| format!("generating {}", path.display()))?;
    sink.finish().with_context(|| format!("writing {}", path.display()))?;
    Ok(report)
}

/// Runs a `trace` subcommand.
pub fn run(command: TraceCommand) -> anyhow::Result<ExitCode> {
    match command {
        TraceCommand::Gen { out, format, params } => {
            let report = generate(params.params(), &out, format)?;
            emit_line(format_args!("wrote {} ({format})", out.display()))?;
            emit(&report)?;
        }
        TraceCommand::Convert { input, output, to } => {
            if same_file(&input, &output) {
                bail!("{} is both the input and the output", input.display());
            }
            let stats = convert_file(&input, &output, to)?;
            emit_line(&stats)?;
        }
        TraceCommand::Info { trace, largest } => {
            let mut source = open_trace(&trace)?;
            let options = InfoOptions { largest_dirs: largest, ..InfoOptions::default() };
            let info = trace_info_with(&mut *source, &options).map_err(|err| err.in_file(&trace))?;
            emit_line(&info)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
