//! larch-remote: archive mode's lower layer in object storage (S3 and compatible servers), for
//! stores whose history outgrows a machine (`docs/object-storage.md`).
//!
//! [`RemoteLower::open`] checks that the bucket prefix serves the store (its `larch-lower`
//! object names the store's identity; a writer claims an empty prefix; a reader never writes),
//! and gives a [`larch_store::LowerLayer`] to open the store with
//! ([`larch_store::Repo::open_with_layer`], [`larch_store::Repo::open_read_only_layered`]). [`larch_store::Repo::archive`] then moves sealed
//! chunks to it: into a local spool first, uploaded in the background, verified by reading them
//! back, marked complete by a checksum object, and only then removed locally. Reads of uploaded
//! chunks are range requests of 256 KiB blocks, each verified against the checksum object, kept in a
//! bounded disk cache. The client is `object_store`'s, on a tokio runtime of its own behind a
//! synchronous API.

pub mod cache;
pub mod client;
pub mod dir;
pub mod error;
pub mod manifest;
pub mod publish;
pub mod replica;
pub mod retire;
pub mod sums;
pub mod upload;
pub mod url;

pub use cache::CacheStats;
pub use client::{Client, ClientSettings};
pub use error::RemoteError;
pub use manifest::{Manifest, ManifestError};
pub use publish::{PublishOptions, PublishStats, Publisher};
pub use replica::{Replica, ReplicaError, ReplicaOptions, ReplicaStatus};
pub use upload::UploadStats;
pub use url::RemoteUrl;

use crate::cache::BlockCache;
use crate::dir::RemoteDirectory;
use crate::error::local;
use crate::upload::{Uploader, larch_store_names};
use larch_store::{LOWER_MARKER, LowerLayer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default budget of the disk cache: 1 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;

/// The name of the file, in the cache directory, that says which prefix and store it serves.
const ORIGIN_FILE: &str = "origin";

/// How to open a lower layer in object storage.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// The local directory of the spool (chunks waiting for their upload) and of the cache;
    /// `None`: [`default_cache_dir`] of the store.
    pub cache_dir: Option<PathBuf>,
    /// The disk cache's budget in bytes ([`DEFAULT_CACHE_BYTES`]).
    pub cache_bytes: u64,
    /// The client's timeouts and retries.
    pub client: ClientSettings,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions { cache_dir: None, cache_bytes: DEFAULT_CACHE_BYTES, client: ClientSettings::default() }
    }
}

/// The cache directory of the store at `store` when none is given: `<store>.remote` beside it.
pub fn default_cache_dir(store: &Path) -> PathBuf {
    let mut name = store.file_name().map(|name| name.to_os_string()).unwrap_or_else(|| "store".into());
    name.push(".remote");
    store.with_file_name(name)
}

/// What a lower layer in object storage did so far.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteStats {
    /// The disk cache.
    pub cache: CacheStats,
    /// The uploads (a writer only).
    pub uploads: Option<UploadStats>,
}

/// A store's lower layer in object storage, open.
#[derive(Debug)]
pub struct RemoteLower {
    url: RemoteUrl,
    dir: Arc<RemoteDirectory>,
    cache: Arc<BlockCache>,
    uploader: Option<Arc<Uploader>>,
}

/// Whether an object may be in a prefix that has no `larch-lower` marker yet.
fn is_archive_object(name: &str) -> bool {
    let base = name.strip_suffix(sums::SUMS_SUFFIX).unwrap_or(name);
    larch_store_names::is_chunk(base)
}

impl RemoteLower {
    /// Opens the prefix `url` (`s3://BUCKET/PREFIX`) as the lower layer of the store at `store`,
    /// for its writer when `writable` (which starts the uploads of chunks left in the spool).
    ///
    /// Refused with [`RemoteError::Foreign`] when the prefix's `larch-lower` object names another
    /// store, or, without one, when it holds anything but chunk objects; a writer then claims it
    /// (written only if still absent: `If-None-Match`), giving the store an identity if it has
    /// none. A reader never writes the bucket.
    pub fn open(
        url: &str,
        store: &Path,
        writable: bool,
        options: &RemoteOptions,
    ) -> Result<RemoteLower, RemoteError> {
        let url = RemoteUrl::parse(url)?;
        let client = Arc::new(Client::connect(&url, options.client.clone())?);
        let cache_dir = options.cache_dir.clone().unwrap_or_else(|| default_cache_dir(store));
        let (spool, sums_dir, blocks) =
            (cache_dir.join("spool"), cache_dir.join("sums"), cache_dir.join("blocks"));
        for dir in [&cache_dir, &spool, &sums_dir] {
            std::fs::create_dir_all(dir).map_err(|e| local(dir, "create", e))?;
        }
        // The cache directory's `origin` file: `<url> <store identity>`, written once the prefix
        // was found to serve the store. The marker never changes once written, so a later open
        // trusts it without a request (a writer opens while the object store is unreachable).
        let origin = cache_dir.join(ORIGIN_FILE);
        let own = larch_store::store_identity(store, false)?;
        let recorded = match std::fs::read_to_string(&origin) {
            Ok(text) => Some(text.trim_end().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(local(&origin, "read", e)),
        };
        let expected = own.map(|own| format!("{url} {own}"));
        match recorded {
            Some(text) if Some(&text) == expected.as_ref() => {}
            Some(text) if text.split(' ').next() != Some(url.to_string().as_str()) || own.is_some() => {
                return Err(RemoteError::Foreign {
                    url: url.to_string(),
                    store: store.display().to_string(),
                    reason: format!(
                        "the cache directory {} serves {text:?} (give each store and prefix its own --cache-dir)",
                        cache_dir.display()
                    ),
                });
            }
            _ => {
                // Recorded only once the prefix's marker names this store (a reader of a prefix
                // without one records nothing, so a later writer still claims it).
                let claimed = claim(&client, store, writable)?;
                if let Some(own) = larch_store::store_identity(store, false)?.filter(|_| claimed) {
                    dir::write_atomically(&cache_dir, ORIGIN_FILE, format!("{url} {own}\n").as_bytes())?;
                }
            }
        }
        let cache = Arc::new(BlockCache::open(&blocks, options.cache_bytes)?);
        let uploader = if writable {
            let retired = Arc::new(retire::Retired::open(&cache_dir.join(retire::RETIRED_DIR))?);
            Some(Arc::new(Uploader::start(client.clone(), &spool, &sums_dir, retired)?))
        } else {
            None
        };
        let dir = Arc::new(RemoteDirectory::new(client, cache.clone(), spool, sums_dir, uploader.clone()));
        Ok(RemoteLower { url, dir, cache, uploader })
    }

    /// The layer to open the store with ([`larch_store::Repo::open_with_layer`],
    /// [`larch_store::Repo::open_read_only_layered`]).
    pub fn layer(&self) -> LowerLayer {
        LowerLayer { dir: self.dir.clone(), name: self.url.to_string() }
    }

    /// The directory over the bucket (read replicas' publisher, `publish.rs`).
    pub(crate) fn directory(&self) -> &Arc<RemoteDirectory> {
        &self.dir
    }

    /// The URL of the prefix.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    /// The cache's and the uploads' counters.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats { cache: self.cache.stats(), uploads: self.uploader.as_ref().map(|u| u.stats()) }
    }

    /// Waits until every spooled chunk is uploaded and verified, at most `timeout`; whether it
    /// is (a reader: at once, `true`).
    pub fn wait_uploaded(&self, timeout: Duration) -> bool {
        self.uploader.as_ref().is_none_or(|u| u.wait_idle(timeout))
    }
}

/// Checks (and for a writer, makes) the prefix's claim to serve the store at `store`: `true` when
/// its marker names the store, `false` for a reader of a prefix without a marker.
fn claim(client: &Client, store: &Path, writable: bool) -> Result<bool, RemoteError> {
    let refuse = |reason: String| RemoteError::Foreign {
        url: client.url().to_string(),
        store: store.display().to_string(),
        reason,
    };
    let own = larch_store::store_identity(store, false)?;
    let marker = |id: larch_store::StoreId| format!("larch lower {id}\n");
    match client.get_opt(LOWER_MARKER)? {
        Some(bytes) => match own {
            Some(own) if bytes.as_ref() == marker(own).as_bytes() => Ok(true),
            _ => Err(refuse(format!(
                "its {LOWER_MARKER} object says {:?}; this store is {}",
                String::from_utf8_lossy(&bytes).trim_end(),
                own.map_or_else(|| "another (it has no identity yet)".to_string(), |own| own.to_string())
            ))),
        },
        None if !writable => Ok(false),
        None => {
            if let Some((other, _)) = client.list()?.into_iter().find(|(name, _)| !is_archive_object(name)) {
                return Err(refuse(format!(
                    "it has no {LOWER_MARKER} object and holds {other:?}, which is not a chunk"
                )));
            }
            let own = larch_store::store_identity(store, true)?
                .ok_or_else(|| refuse("the store's identity could not be written".into()))?;
            if !client.put_new(LOWER_MARKER, marker(own).into_bytes().into())? {
                // Claimed by someone else since: it must be this store.
                let bytes = client.get(LOWER_MARKER)?;
                if bytes.as_ref() != marker(own).as_bytes() {
                    return Err(refuse(format!(
                        "another store claimed it at the same time; this store is {own}"
                    )));
                }
            }
            Ok(true)
        }
    }
}
