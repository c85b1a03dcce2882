//! Errors: the server's startup errors, and the JSON errors of requests.

use larch_core::TreeError;
use larch_store::StoreError;
use std::path::PathBuf;

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The store cannot be opened read-only.
    #[error("cannot open the store {path} read-only: {source}")]
    Open {
        /// The store directory.
        path: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The store's head commit cannot be read.
    #[error("cannot read the head commit of the store {path}: {source}")]
    Head {
        /// The store directory.
        path: PathBuf,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A reload of the store handle failed.
    #[error("reloading the store: {source}")]
    Reload {
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A read replica could not open or follow its prefix (`larch serve --remote`).
    #[error("{source}")]
    Replica {
        /// The replica's error.
        #[source]
        source: larch_remote::ReplicaError,
    },
}

const OFFLOAD_KIND: &str = "offload";

/// A failed request: its HTTP status and the JSON body `{"error": message, "kind": kind}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into() }
    }

    pub fn bad_request(kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, kind, message)
    }

    pub fn not_found(kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(404, kind, message)
    }

    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "response_too_large", message)
    }

    /// Not an answer: the request grew past what is rendered on a worker thread and must be
    /// answered again on the blocking pool.
    pub fn offload() -> ApiError {
        ApiError::new(503, OFFLOAD_KIND, "request too large to answer on a worker thread")
    }

    /// Whether this is [`ApiError::offload`].
    pub fn is_offload(&self) -> bool {
        self.kind == OFFLOAD_KIND
    }

    /// A failure of the store under a well-formed request (I/O, corruption).
    pub fn store(err: &StoreError) -> ApiError {
        tracing::warn!(%err, "store read failed");
        if crate::remote::unavailable(err) {
            return crate::remote::unavailable_error(err);
        }
        ApiError::new(500, "store_error", err.to_string())
    }

    /// A failure of a tree walk under a well-formed request.
    pub fn tree(err: &TreeError) -> ApiError {
        tracing::warn!(%err, "tree read failed");
        if crate::remote::unavailable(err) {
            return crate::remote::unavailable_error(err);
        }
        ApiError::new(500, "store_error", err.to_string())
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({ "error": self.message, "kind": self.kind }).to_string()
    }
}
