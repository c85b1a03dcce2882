//! Read replicas (`larch serve --remote s3://BUCKET/PREFIX`, `docs/object-storage.md` *Read
//! replicas*): the server follows a prefix a writer publishes manifests to, with no store
//! directory of its own. Its store directory is the replica's mirror, opened with the replica's
//! lower layer; every reload fetches the newest manifest first (`state.rs`). What the object
//! store cannot give while it is unreachable or failing is answered 503, not 500.

use crate::ServerConfig;
use crate::error::{ApiError, ServerError};
use crate::state::ServerState;
use larch_remote::{RemoteError, Replica, ReplicaOptions};
use std::error::Error;
use std::sync::Arc;

impl ServerState {
    /// Opens a read replica of `url` (`s3://BUCKET/PREFIX`) in `options.cache_dir` and serves its
    /// newest manifest's state; reloads (every [`ServerConfig::reload_interval`]) follow newer
    /// manifests. The bucket is never written.
    pub fn open_remote(
        url: &str,
        options: &ReplicaOptions,
        config: ServerConfig,
    ) -> Result<Arc<ServerState>, ServerError> {
        let replica =
            Arc::new(Replica::open(url, options).map_err(|source| ServerError::Replica { source })?);
        ServerState::open_replica(replica, config)
    }

    /// Serves the replica `replica` (opened by the caller).
    pub fn open_replica(
        replica: Arc<Replica>,
        config: ServerConfig,
    ) -> Result<Arc<ServerState>, ServerError> {
        let config = ServerConfig { lower: None, lower_layer: Some(replica.layer()), ..config };
        let mirror = replica.mirror().to_path_buf();
        ServerState::open_inner(&mirror, config, Some(replica))
    }

    /// The `replica` object of `/health`: how fresh the state served is.
    pub(crate) fn replica_health(&self) -> Option<serde_json::Value> {
        let status = self.replica()?.status();
        Some(serde_json::json!({
            "url": status.url,
            "manifest_generation": status.generation,
            "manifest_head": status.head.map(|hash| hash.to_base58()),
            "manifest_age_seconds": status.manifest_age.map(|age| age.as_secs_f64()),
            "seconds_since_fetch": status.since_success.as_secs_f64(),
            "last_error": status.last_error,
            "cache_bytes": status.cache.used,
            "cache_hits": status.cache.hits,
            "cache_misses": status.cache.misses,
        }))
    }
}

/// Whether `err` comes from a request to the object store that failed (unreachable, 5xx,
/// throttled, timed out), rather than from what the store holds.
pub(crate) fn unavailable(err: &(dyn Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        let remote = err.downcast_ref::<RemoteError>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref())
        });
        if matches!(remote, Some(RemoteError::Request { not_found: false, .. })) {
            return true;
        }
        next = err.source();
    }
    false
}

/// The 503 answer to a read the object store could not serve.
pub(crate) fn unavailable_error(err: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(503, "remote_unavailable", format!("the object store cannot serve this read now: {err}"))
}
