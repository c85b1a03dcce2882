//! The `larch` command: the replay benchmark (its main job), trace tools, the store's integrity
//! check, and reports that compare and plot runs.

mod allocator;
mod cmd_archive;
mod cmd_cat;
mod cmd_diff;
mod cmd_export;
mod cmd_fsck;
mod cmd_gc;
mod cmd_import;
mod cmd_log;
mod cmd_ls;
mod cmd_octez;
mod cmd_proof;
mod cmd_recover;
mod cmd_replay;
mod cmd_report;
mod cmd_serve;
mod cmd_snapshot;
mod cmd_stats;
mod cmd_trace;
mod inspect;
mod interrupt;
mod limits;
mod lower;
mod output;
mod progress;
mod replay_archive;
mod replay_args;
mod replay_record;
mod size;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// larch: a storage engine for versioned Merkle trees (the Tezos context), and its benchmark.
#[derive(Parser, Debug)]
#[command(name = "larch", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The lower layer of a store in archive mode (`larch archive`): a directory, or a prefix in
    /// object storage, `s3://BUCKET/PREFIX` (docs/object-storage.md; credentials and endpoint from
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT, AWS_REGION, AWS_ALLOW_HTTP). The
    /// chunk files moved there are read from it. Needed by every command on such a store.
    #[arg(long, global = true, value_name = "DIR|URL")]
    lower: Option<std::path::PathBuf>,
    /// With `--lower s3://…`: the local directory of the upload spool and the read cache
    /// (default: `STORE.remote` beside the store; one per prefix).
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
    /// With `--lower s3://…`: the read cache's budget on disk.
    #[arg(long, global = true, value_name = "SIZE", default_value = "1G", value_parser = size::parse_size)]
    remote_cache: u64,
    /// With `--lower s3://…`: how long a writer command waits for its uploads before it exits
    /// (what is left stays in the spool and is uploaded at the writer's next open).
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 600)]
    upload_wait: u64,
    /// With `--lower s3://…`: a writer publishes the read replicas' manifest after each sealed
    /// chunk and at least this often while it commits (`larch serve --remote`); 0: never.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 5.0)]
    manifest_interval: f64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay a trace into a fresh store (or, `--onto-store`, onto the commits a store holds),
    /// checking every recorded hash, and print a summary. With no trace, generate the default
    /// Tezos-like trace into a temporary directory and replay it.
    Replay(replay_args::ReplayArgs),
    /// Generate, convert and describe traces.
    #[command(subcommand)]
    Trace(cmd_trace::TraceCommand),
    /// Check a store: every commit, every reachable object, every hash and offset.
    Fsck(cmd_fsck::FsckArgs),
    /// Import commits from another store format into a new larch store.
    #[command(subcommand)]
    Import(cmd_import::ImportCommand),
    /// Export a commit to another store format: a one-commit irmin-pack store (an Octez
    /// snapshot's context).
    #[command(subcommand)]
    Export(cmd_export::ExportCommand),
    /// Collect garbage: keep a commit, every later commit and what they reach; reclaim the rest
    /// and give its disk space back.
    Gc(cmd_gc::GcArgs),
    /// Find the newest complete commit of a damaged store, report what publishing it would drop,
    /// and publish it with `--apply`.
    Recover(cmd_recover::RecoverArgs),
    /// Compare and plot replay runs from their stat files.
    #[command(subcommand)]
    Report(cmd_report::ReportCommand),
    /// Show the commits of a store, newest first.
    Log(cmd_log::LogArgs),
    /// List the entries of a directory of a commit (kind, hash, size), paginated.
    Ls(cmd_ls::LsArgs),
    /// Print the bytes of a value of a commit.
    Cat(cmd_cat::CatArgs),
    /// Show the paths added, removed and changed between two commits.
    Diff(cmd_diff::DiffArgs),
    /// Sizes, commits, records and bytes by kind, patch chains: one pass, no full check.
    Stats(cmd_stats::StatsArgs),
    /// Produce and verify Merkle proofs of a store's context (Octez V1/V2, Irmin JSON).
    #[command(subcommand)]
    Proof(cmd_proof::ProofCommand),
    /// Export one commit to a portable snapshot file, import one into a new store, verify one.
    #[command(subcommand)]
    Snapshot(cmd_snapshot::SnapshotCommand),
    /// Serve a store's contexts over HTTP, read-only, beside a writer (Octez-like context RPCs).
    Serve(cmd_serve::ServeArgs),
    /// Archive mode: move the sealed chunk files below a commit's to a lower directory (another
    /// disk); every commit stays readable with `--lower DIR`.
    Archive(cmd_archive::ArchiveArgs),
}

fn main() -> ExitCode {
    allocator::tune();
    limits::raise_open_files();
    let cli = Cli::parse_from(join_sync_every(std::env::args_os()));
    inspect::set_lower(cli.lower);
    lower::set_remote(lower::RemoteArgs {
        cache_dir: cli.cache_dir,
        cache_bytes: cli.remote_cache,
        upload_wait: std::time::Duration::from_secs(cli.upload_wait),
        manifest_interval: std::time::Duration::from_secs_f64(cli.manifest_interval.max(0.0)),
    });
    let result = match cli.command {
        Command::Replay(args) => cmd_replay::run(args),
        Command::Trace(command) => cmd_trace::run(command),
        Command::Fsck(args) => cmd_fsck::run(args),
        Command::Import(command) => cmd_import::run(command),
        Command::Export(command) => cmd_export::run(command),
        Command::Gc(args) => cmd_gc::run(args),
        Command::Recover(args) => cmd_recover::run(args),
        Command::Report(command) => cmd_report::run(command),
        Command::Log(args) => cmd_log::run(args),
        Command::Ls(args) => cmd_ls::run(args),
        Command::Cat(args) => cmd_cat::run(args),
        Command::Diff(args) => cmd_diff::run(args),
        Command::Stats(args) => cmd_stats::run(args),
        Command::Proof(command) => cmd_proof::run(command),
        Command::Snapshot(command) => cmd_snapshot::run(command),
        Command::Serve(args) => cmd_serve::run(args),
        Command::Archive(args) => cmd_archive::run(args),
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

/// Joins `--sync every N` (two words, as the README writes it) into `--sync every:N`, the one value
/// clap hands to the sync policy's parser.
fn join_sync_every(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let after_sync = out.last().is_some_and(|last| last == "--sync");
        if after_sync
            && arg == "every"
            && let Some(n) = args.next_if(|next| next.to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
        {
            let mut joined = std::ffi::OsString::from("every:");
            joined.push(n);
            out.push(joined);
            continue;
        }
        out.push(arg);
    }
    out
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
