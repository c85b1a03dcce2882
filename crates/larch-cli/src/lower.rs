//! The global `--lower`: a lower directory on disk (`--lower DIR`) or a prefix in object storage
//! (`--lower s3://BUCKET/PREFIX`, `docs/object-storage.md`), with the object-storage options
//! (`--cache-dir`, `--remote-cache`, `--upload-wait`). Every command that opens a store in archive
//! mode opens its lower layer here.

use anyhow::Context;
use larch_remote::{PublishOptions, Publisher, RemoteLower, RemoteOptions, RemoteUrl, UploadStats};
use larch_store::{LowerLayer, Repo, RepoOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The object-storage options given on the command line.
#[derive(Clone, Debug)]
pub struct RemoteArgs {
    /// `--cache-dir DIR`: the spool and cache directory (default `<STORE>.remote`).
    pub cache_dir: Option<PathBuf>,
    /// `--remote-cache SIZE`: the disk cache's budget.
    pub cache_bytes: u64,
    /// `--upload-wait SECONDS`: how long a writer command waits for its uploads before exiting.
    pub upload_wait: Duration,
    /// `--manifest-interval SECONDS`: how often a writer publishes the replica manifest (zero:
    /// never).
    pub manifest_interval: Duration,
}

static REMOTE: OnceLock<RemoteArgs> = OnceLock::new();

/// Records the object-storage options (once, at start).
pub fn set_remote(args: RemoteArgs) {
    let _ = REMOTE.set(args);
}

/// The object-storage options given (`--cache-dir`, `--remote-cache`, ...).
pub fn remote_args() -> Option<RemoteArgs> {
    REMOTE.get().cloned()
}

/// The `--lower` value when it is an object-storage URL.
pub fn remote_url() -> Option<String> {
    crate::inspect::lower_raw()
        .and_then(|lower| lower.to_str().map(str::to_string))
        .filter(|lower| RemoteUrl::is_remote(lower))
}

/// The lower layer of one store, open.
#[derive(Debug, Default)]
pub struct Lower {
    remote: Option<RemoteLower>,
    /// A writer's manifest publisher (read replicas, `docs/object-storage.md`).
    publisher: Option<Publisher>,
}

/// Opens the `--lower` of `store`: nothing to open for a directory on disk (the store opens it),
/// the object-storage layer for an `s3://` URL (its writer's when `writable`).
pub fn open(store: &Path, writable: bool) -> anyhow::Result<Lower> {
    let Some(url) = remote_url() else { return Ok(Lower::default()) };
    let args = REMOTE.get().cloned().unwrap_or(RemoteArgs {
        cache_dir: None,
        cache_bytes: larch_remote::DEFAULT_CACHE_BYTES,
        upload_wait: Duration::from_secs(600),
        manifest_interval: Duration::from_secs(5),
    });
    let options = RemoteOptions {
        cache_dir: args.cache_dir,
        cache_bytes: args.cache_bytes,
        ..RemoteOptions::default()
    };
    let remote = RemoteLower::open(&url, store, writable, &options)
        .with_context(|| format!("opening the lower layer {url} of store {}", store.display()))?;
    let publisher = (writable && !args.manifest_interval.is_zero())
        .then(|| {
            let options = PublishOptions { interval: args.manifest_interval, ..PublishOptions::default() };
            Publisher::start(&remote, store, options)
                .inspect_err(|e| eprintln!("larch: not publishing the replica manifest to {url}: {e}"))
                .ok()
        })
        .flatten();
    Ok(Lower { remote: Some(remote), publisher })
}

impl Lower {
    /// `options` with the `--lower DIR` on disk (none for object storage: [`Lower::layer`]).
    pub fn apply(&self, options: RepoOptions) -> RepoOptions {
        RepoOptions { lower: crate::inspect::lower(), ..options }
    }

    /// The object-storage layer to open the store with, when `--lower` is one.
    pub fn layer(&self) -> Option<LowerLayer> {
        self.remote.as_ref().map(RemoteLower::layer)
    }

    /// Opens the store at `store` read-only with `options` and this lower layer.
    pub fn open_read_only(&self, store: &Path, options: RepoOptions) -> larch_store::Result<Repo> {
        Repo::open_read_only_layered(store, self.apply(options), self.layer())
    }

    /// Opens the store at `store` as its writer with `options` and this lower layer.
    pub fn open_writer(&self, store: &Path, options: RepoOptions) -> larch_store::Result<Repo> {
        Repo::open_with_layer(store, self.apply(options), self.layer())
    }

    /// Says on standard error what the object-storage layer's read cache did (nothing for a
    /// directory): its size, hits, misses and hit ratio.
    pub fn report_cache(&self) {
        if let Some(remote) = &self.remote {
            let cache = remote.stats().cache;
            eprintln!(
                "larch: read cache of {}: {} hits, {} misses (hit ratio {:.3}), {} of {} bytes used",
                remote.url(),
                cache.hits,
                cache.misses,
                cache.hit_ratio(),
                cache.used,
                cache.capacity
            );
        }
    }

    /// The uploads' counters so far (a writer on object storage only).
    pub fn upload_stats(&self) -> Option<UploadStats> {
        self.remote.as_ref().and_then(|remote| remote.stats().uploads)
    }

    /// A writer's end: waits for the uploads (at most `--upload-wait`) and says on standard error
    /// what is left. `None` without an object-storage layer.
    pub fn finish_uploads(&self) -> Option<UploadStats> {
        let remote = self.remote.as_ref()?;
        let wait = REMOTE.get().map_or(Duration::from_secs(600), |args| args.upload_wait);
        if !remote.wait_uploaded(wait) {
            let stats = remote.stats().uploads.unwrap_or_default();
            eprintln!(
                "larch: {} chunks ({} bytes) still wait for their upload to {} (kept in the spool, uploaded \
                 at the writer's next open); last error: {}",
                stats.backlog,
                stats.backlog_bytes,
                remote.url(),
                stats.last_error.as_deref().unwrap_or("none")
            );
        }
        // The last manifest: every state published, once its chunks are uploaded.
        if let Some(publisher) = &self.publisher
            && let Err(e) = publisher.publish_now()
        {
            eprintln!("larch: publishing the replica manifest to {} failed: {e}", remote.url());
        }
        remote.stats().uploads
    }
}
