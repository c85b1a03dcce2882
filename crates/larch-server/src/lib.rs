//! larch-server: a read-only HTTP server of a larch store's contexts, shaped like Octez's context
//! RPCs (`raw/bytes` with `depth`, `list` with `offset`/`length`, hashes, commits), that serves
//! new commits as soon as a writer in another process publishes them.
//!
//! The server opens the store with [`larch_store::Repo::open_read_only_options`]: it never takes the writer
//! lock and never writes to the store directory. A background task [`larch_store::Repo::reload`]s the handle
//! every [`ServerConfig::reload_interval`] (and a request naming an unknown commit reloads it once
//! more, at most every few milliseconds), so `/commits/head` follows the writer.
//!
//! Store reads are lazy tree walks through the store's shared cache; they run on the runtime's
//! worker threads (a cache hit costs microseconds; a miss is one `pread` of a page-cached file),
//! see `docs/server.md` for the measurements behind that choice. The endpoints, their JSON and
//! their errors are described in `docs/server.md`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use larch_server::{ServerConfig, ServerState, serve};
//! let state = ServerState::open("/path/to/store", ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8732").await?;
//! serve(listener, state, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(())
//! # }
//! ```

mod error;
mod handlers;
mod limit;
mod metrics;
mod remote;
mod render;
mod request;
mod state;

pub use error::ServerError;
pub use state::{MAX_DEPTH_CAP, ServerState};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Bounds on what one request may ask, and on the request rate.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest `depth` a `raw/bytes` request may ask (a request without `depth` gets this depth);
    /// at most [`MAX_DEPTH_CAP`].
    pub max_depth: u32,
    /// Most tree entries (values, directories and cut-offs) one response may hold; a `raw/bytes`
    /// or `list` response that would hold more is refused with 413.
    pub max_nodes: u64,
    /// Most bytes one response body may hold; more is refused with 413.
    pub max_response_bytes: usize,
    /// Requests per second admitted by the token bucket (0: no limit); more get 429.
    pub rate_per_second: f64,
    /// Size of the token bucket: the burst admitted above the steady rate.
    pub burst: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 32,
            max_nodes: 100_000,
            max_response_bytes: 16 << 20,
            rate_per_second: 100_000.0,
            burst: 20_000.0,
        }
    }
}

/// How the server opens the store and serves it.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Request limits.
    pub limits: Limits,
    /// How often the store handle is reloaded to see new commits.
    pub reload_interval: Duration,
    /// Byte budget of the store's decoded-object cache.
    pub cache_bytes: u64,
    /// Run each request's store reads on tokio's blocking pool (`spawn_blocking`) instead of the
    /// worker thread that parsed the request. Off by default: measured slower (docs/server.md).
    pub blocking_reads: bool,
    /// How long a graceful shutdown waits for open connections to finish their requests.
    pub shutdown_grace: Duration,
    /// How long a connection may take to send a request's headers (an idle keep-alive connection
    /// included) before it is closed.
    pub header_read_timeout: Duration,
    /// The lower directory of a store in archive mode (`--lower DIR`): chunk files moved there
    /// are read from it.
    pub lower: Option<std::path::PathBuf>,
    /// A lower layer that is not a directory on disk (object storage, `larch-remote`): takes
    /// precedence over `lower` ([`larch_store::Repo::open_read_only_layered`]).
    pub lower_layer: Option<larch_store::LowerLayer>,
    /// The most sealed chunk files the server's handle keeps open at once
    /// ([`larch_store::RepoOptions::open_files`], `docs/store.md` *Descriptors*).
    pub open_files: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            limits: Limits::default(),
            reload_interval: Duration::from_millis(100),
            cache_bytes: larch_store::DEFAULT_CACHE_BYTES,
            blocking_reads: false,
            shutdown_grace: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(10),
            lower: None,
            lower_layer: None,
            open_files: larch_store::DEFAULT_OPEN_FILES,
        }
    }
}

/// Serves `state` on `listener` until `shutdown` completes, then stops accepting, lets open
/// connections finish their current request (up to [`ServerConfig::shutdown_grace`]) and returns.
/// Also runs the reload task for as long as it serves.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let reloader = tokio::spawn(state::reload_loop(state.clone()));
    tokio::pin!(shutdown);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving");
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // EMFILE and the like: wait a little rather than spin.
                        tracing::warn!(%err, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let header_timeout = state.config().header_read_timeout;
                let state = state.clone();
                let service = service_fn(move |request| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handlers::handle(state, request).await) }
                });
                // A client that does not send its headers within the timeout is dropped (slow
                // clients cannot pin connections forever).
                let connection = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(%peer, %err, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    reloader.abort();
    tracing::info!("shutting down: waiting for open connections");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(state.config().shutdown_grace) => {
            tracing::warn!("connections still open after the grace period; closing them");
        }
    }
    Ok(())
}

/// A response body.
pub(crate) type Body = Full<Bytes>;
