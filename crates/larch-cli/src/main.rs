//! The `larch` command: the replay benchmark (its main job), trace tools, the store's integrity
//! check, and reports that compare and plot runs.

mod cmd_fsck;
mod cmd_replay;
mod cmd_report;
mod cmd_serve;
mod cmd_trace;
mod output;
mod progress;
mod size;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// larch: a storage engine for versioned Merkle trees (the Tezos context), and its benchmark.
#[derive(Parser, Debug)]
#[command(name = "larch", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a trace into a fresh store, checking every recorded hash, and print a summary. With
    /// no trace, generate the default Tezos-like trace into a temporary directory and replay it.
    Replay(cmd_replay::ReplayArgs),
    /// Generate, convert and describe traces.
    #[command(subcommand)]
    Trace(cmd_trace::TraceCommand),
    /// Check a store: every commit, every reachable object, every hash and offset.
    Fsck(cmd_fsck::FsckArgs),
    /// Compare and plot replay runs from their stat files.
    #[command(subcommand)]
    Report(cmd_report::ReportCommand),
    /// Serve a store's contexts over HTTP, read-only, beside a writer (Octez-like context RPCs).
    Serve(cmd_serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => cmd_replay::run(args),
        Command::Trace(command) => cmd_trace::run(command),
        Command::Fsck(args) => cmd_fsck::run(args),
        Command::Report(command) => cmd_report::run(command),
        Command::Serve(args) => cmd_serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("larch: error: {}", error_chain(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text its parent already
/// printed (many library errors show their source in their own message).
fn error_chain(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// Whether the error is stdout closed by a reader (`larch ... | head`): not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
