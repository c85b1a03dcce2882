//! `larch serve STORE --listen ADDR`: the read-only context server (crate `larch-server`); with
//! `--remote s3://BUCKET/PREFIX --cache-dir DIR` instead of `STORE`, a read replica following
//! the manifests a writer publishes there (`docs/object-storage.md` *Read replicas*).

use crate::size::parse_size;
use anyhow::Context;
use clap::Args;
use larch_server::{Limits, ServerConfig, ServerState};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `larch serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The store directory (opened read-only: a writer may commit to it at the same time).
    #[arg(required_unless_present = "remote", conflicts_with = "remote")]
    store: Option<PathBuf>,
    /// Serve a read replica of the prefix `s3://BUCKET/PREFIX` a writer publishes manifests to
    /// (docs/object-storage.md), instead of a store directory; needs `--cache-dir DIR` (its own,
    /// one per replica) and the `AWS_*` environment of `--lower s3://…`. The bucket is never written.
    #[arg(long, value_name = "URL")]
    remote: Option<String>,
    /// With `--remote`: how often the newest manifest is fetched, in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    poll_ms: u64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8732")]
    listen: SocketAddr,
    /// How often the store is reloaded to see new commits, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    reload_ms: u64,
    /// Byte budget of the store's cache (e.g. 64MiB). Sizes: `64M` and `64MiB` are binary
    /// (K = 1024), `64MB` is decimal (K = 1000).
    #[arg(long, value_parser = parse_size, default_value = "152MiB")]
    cache: u64,
    /// Largest `depth` of a `raw/bytes` request (and the depth of one without `depth`).
    #[arg(long, default_value_t = Limits::default().max_depth)]
    max_depth: u32,
    /// Most entries one response may hold (413 above).
    #[arg(long, default_value_t = Limits::default().max_nodes)]
    max_nodes: u64,
    /// Most bytes one response may hold (413 above), e.g. 16MiB (binary; 16MB is decimal).
    #[arg(long, value_parser = parse_size, default_value = "16MiB")]
    max_response: u64,
    /// Requests per second admitted (429 above); 0 for no limit.
    #[arg(long, default_value_t = Limits::default().rate_per_second)]
    rate_limit: f64,
    /// Burst admitted above the rate.
    #[arg(long, default_value_t = Limits::default().burst)]
    burst: f64,
    /// The most sealed chunk files the server keeps open at once (docs/store.md *Descriptors*);
    /// others are opened again when a read needs them.
    #[arg(long, value_name = "N", default_value_t = larch_store::DEFAULT_OPEN_FILES, value_parser = parse_open_files)]
    open_files: usize,
    /// Worker threads of the runtime (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Run store reads on the blocking thread pool instead of the worker threads.
    #[arg(long)]
    blocking_reads: bool,
}

/// `--open-files`: a count of at least 1.
pub(crate) fn parse_open_files(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("at least one chunk file must be kept open".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count of files: {e}")),
    }
}

/// Serves until SIGTERM or SIGINT, then shuts down gracefully.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logging();
    let (store, lower) = match &args.store {
        Some(store) => (store.clone(), crate::lower::open(store, false)?),
        None => (PathBuf::new(), crate::lower::Lower::default()),
    };
    let config = ServerConfig {
        limits: Limits {
            max_depth: args.max_depth,
            max_nodes: args.max_nodes,
            max_response_bytes: usize::try_from(args.max_response).unwrap_or(usize::MAX),
            rate_per_second: args.rate_limit,
            burst: args.burst,
        },
        reload_interval: Duration::from_millis(args.reload_ms.max(1)),
        cache_bytes: args.cache,
        blocking_reads: args.blocking_reads,
        open_files: args.open_files,
        // Archive mode: the global `--lower DIR` (a directory; object storage: `lower_layer`).
        lower: crate::inspect::lower(),
        lower_layer: lower.layer(),
        ..ServerConfig::default()
    };
    let state = match &args.remote {
        Some(url) => {
            let remote = crate::lower::remote_args();
            let Some(cache_dir) = remote.as_ref().and_then(|args| args.cache_dir.clone()) else {
                anyhow::bail!(
                    "larch serve --remote needs --cache-dir DIR: the replica's own cache directory"
                );
            };
            let options = larch_remote::ReplicaOptions {
                cache_dir,
                cache_bytes: remote.map_or(larch_remote::DEFAULT_CACHE_BYTES, |args| args.cache_bytes),
                // A read the bucket cannot serve answers 503 within seconds, not after 30.
                client: larch_remote::ClientSettings {
                    call_timeout: Duration::from_secs(10),
                    max_retries: 2,
                    ..larch_remote::ClientSettings::default()
                },
            };
            let config =
                ServerConfig { reload_interval: Duration::from_millis(args.poll_ms.max(1)), ..config };
            ServerState::open_remote(url, &options, config).with_context(|| format!("following {url}"))?
        }
        None => ServerState::open(&store, config)?,
    };
    match state.head() {
        Some(head) => tracing::info!(store = %state.path().display(), %head, "store opened read-only"),
        None => tracing::info!(store = %state.path().display(), "store opened read-only; no head commit yet"),
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = args.threads {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = runtime.build().context("starting the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        // The bound address on stdout (with `--listen 127.0.0.1:0`, the port the system chose).
        let addr = listener.local_addr().context("reading the bound address")?;
        println!("larch serve: listening on http://{addr}");
        std::io::Write::flush(&mut std::io::stdout()).context("writing to stdout")?;
        larch_server::serve(listener, state, shutdown_signal()).await.context("serving")
    })?;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr, filtered by `RUST_LOG` (`target=level` directives, e.g.
/// `info,larch_server=trace`; default `info`; an unparsable value is reported and `info` used).
fn init_logging() {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let default = || Targets::new().with_default(tracing::Level::INFO);
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(text) => match text.parse::<Targets>() {
            Ok(filter) => (filter, None),
            Err(err) => (default(), Some(format!("ignoring RUST_LOG={text:?}: {err}"))),
        },
        Err(_) => (default(), None),
    };
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = tracing_subscriber::registry().with(layer).with(filter).try_init();
    if let Some(message) = bad {
        tracing::warn!("{message}");
    }
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
}
