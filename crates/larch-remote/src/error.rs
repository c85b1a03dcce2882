//! The errors of object storage: each names the URL, the object and the operation.

use std::io;

/// A failure of the object-storage layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The URL is not `s3://BUCKET[/PREFIX]`.
    #[error("{url:?} is not an object-storage URL s3://BUCKET[/PREFIX]: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client could not be configured (environment, endpoint).
    #[error("configuring the object-storage client for {url}: {source}")]
    Config {
        /// The URL.
        url: String,
        /// The client's error.
        source: object_store::Error,
    },
    /// A request failed (after the client's retries) or timed out.
    #[error("{op} {url}/{name}: {message}")]
    Request {
        /// The URL of the prefix.
        url: String,
        /// The object, relative to the prefix.
        name: String,
        /// The operation (`get`, `put`, `list`, ...).
        op: &'static str,
        /// What went wrong.
        message: String,
        /// Whether the object does not exist.
        not_found: bool,
    },
    /// An object's bytes differ from what its checksums say (damaged or replaced in the bucket).
    #[error("{url}/{name}: {reason}")]
    Corrupt {
        /// The URL of the prefix.
        url: String,
        /// The object.
        name: String,
        /// What does not match.
        reason: String,
    },
    /// The prefix serves another store, or holds something else.
    #[error("the object-storage prefix {url} is refused for the store {store}: {reason}")]
    Foreign {
        /// The URL of the prefix.
        url: String,
        /// The store's directory.
        store: String,
        /// Why.
        reason: String,
    },
    /// A local file of the cache or spool directory.
    #[error("{op} {path}: {source}")]
    Local {
        /// The file or directory.
        path: String,
        /// The operation.
        op: &'static str,
        /// The system's error.
        source: io::Error,
    },
    /// The store's identity could not be read or written.
    #[error(transparent)]
    Store(#[from] larch_store::StoreError),
}

impl RemoteError {
    /// Whether the error says an object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, RemoteError::Request { not_found: true, .. })
    }

    /// The error as an `io::Error` for the storage seam (`NotFound` kept, corruption as
    /// `InvalidData`).
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            RemoteError::Request { not_found: true, .. } => io::ErrorKind::NotFound,
            RemoteError::Corrupt { .. } => io::ErrorKind::InvalidData,
            RemoteError::Local { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

/// A local file error.
pub(crate) fn local(path: &std::path::Path, op: &'static str, source: io::Error) -> RemoteError {
    RemoteError::Local { path: path.display().to_string(), op, source }
}
