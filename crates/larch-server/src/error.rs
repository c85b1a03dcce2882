//! Errors: the server's startup errors, and the JSON errors of requests.

use larch_core::{LoadError, TreeError};
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
}

const OFFLOAD_KIND: &str = "offload";

/// A failed request: its HTTP status and the JSON body `{"error": message, "kind": kind}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    /// The store read failed on a chunk file that is gone ([`StoreError::MissingFile`]): a GC
    /// retired it since the handle's last reload, after the handle's pool of descriptors had
    /// closed it. Reloading the handle moves it to the new layout, so the request is worth
    /// answering once more (`handlers::respond_retrying`).
    pub missing_file: bool,
}

/// Whether `err`, or an error in its chain of causes, is [`StoreError::MissingFile`]; a tree
/// walk's [`TreeError::Load`] is looked through to the source's own error (its `reason`). Decided
/// by type, never by the message's text.
pub(crate) fn is_missing_file(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(err) = current {
        if let Some(store) = err.downcast_ref::<StoreError>() {
            if matches!(store, StoreError::MissingFile { .. }) {
                return true;
            }
        } else if let Some(TreeError::Load(load)) = err.downcast_ref::<TreeError>() {
            current = Some(load.reason.as_ref());
            continue;
        } else if let Some(load) = err.downcast_ref::<LoadError>() {
            current = Some(load.reason.as_ref());
            continue;
        }
        current = err.source();
    }
    false
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into(), missing_file: false }
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
        ApiError { missing_file: is_missing_file(err), ..ApiError::new(500, "store_error", err.to_string()) }
    }

    /// A failure of a tree walk under a well-formed request.
    pub fn tree(err: &TreeError) -> ApiError {
        tracing::warn!(%err, "tree read failed");
        ApiError { missing_file: is_missing_file(err), ..ApiError::new(500, "store_error", err.to_string()) }
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({ "error": self.message, "kind": self.kind }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{ApiError, is_missing_file};
    use larch_core::{Hash, LoadError, ObjectKey, StoreId, TreeError};
    use larch_store::{FileKind, StoreError};

    fn missing() -> StoreError {
        StoreError::MissingFile {
            file: FileKind::Pack,
            what: "chunk",
            name: "chunk.000003".into(),
            detail: "no such file".into(),
        }
    }

    fn load(reason: StoreError) -> TreeError {
        TreeError::Load(LoadError {
            what: "node",
            key: ObjectKey::new(StoreId::fresh(), 4096),
            hash: Hash::of_bytes(b"node"),
            reason: Box::new(reason),
        })
    }

    fn corrupt() -> StoreError {
        StoreError::Corrupt { file: FileKind::Pack, offset: 4096, reason: "missing file".into() }
    }

    /// The chunk file gone is found directly and through a lazy tree walk's `LoadError`; other
    /// store errors are not (even one whose text says "missing file").
    #[test]
    fn a_missing_chunk_is_detected_directly_and_through_a_tree_load() {
        assert!(is_missing_file(&missing()));
        assert!(ApiError::store(&missing()).missing_file);
        let wrapped = load(missing());
        assert!(is_missing_file(&wrapped));
        let api = ApiError::tree(&wrapped);
        assert!(api.missing_file, "{api:?}");
        assert_eq!(api.status, 500);

        assert!(!is_missing_file(&corrupt()));
        assert!(!ApiError::store(&corrupt()).missing_file);
        assert!(!ApiError::tree(&load(corrupt())).missing_file);
        assert!(!ApiError::tree(&TreeError::Malformed("missing file")).missing_file);
        assert!(!ApiError::new(500, "store_error", "missing file").missing_file);
    }
}
