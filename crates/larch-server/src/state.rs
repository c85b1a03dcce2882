//! The shared state: the read-only store handle, the head snapshot, limits and counters.

use crate::error::{ApiError, ServerError};
use crate::limit::TokenBucket;
use crate::metrics::{Metrics, StoreView};
use crate::request::CommitRef;
use crate::{Limits, ServerConfig};
use larch_core::{Hash, Tree};
use larch_store::{CommitDetails, Repo, RepoOptions, StoreError, StoreStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

/// `max_depth` is clamped to this: the rendering recursion is at most this deep.
pub const MAX_DEPTH_CAP: u32 = 256;

/// The head commit, checked out once per change so that requests on `head` take no store lock.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub details: CommitDetails,
    pub tree: Tree,
}

/// What every request shares: the store handle and what the server knows of it.
///
/// The handle sits behind a `RwLock`: requests take the read lock only to look a commit up and
/// check it out (a tree, once checked out, reads the store through its own `Arc` of the pack
/// reader, without the lock); a reload takes the write lock for the time of reading the control
/// file and the new index entries.
#[derive(Debug)]
pub struct ServerState {
    repo: RwLock<Repo>,
    head: RwLock<Option<Arc<Snapshot>>>,
    last_reload: Mutex<Instant>,
    path: PathBuf,
    config: ServerConfig,
    pub(crate) metrics: Metrics,
    pub(crate) bucket: TokenBucket,
    /// Permits for requests answered on the blocking pool: one per core.
    pub(crate) heavy: tokio::sync::Semaphore,
    /// A read replica's follower (`larch serve --remote`, `remote.rs`): the store directory is
    /// its mirror, brought up to date before each reload.
    replica: Option<Arc<larch_remote::Replica>>,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl ServerState {
    /// Opens the store at `path` read-only (no lock, no write) and checks out its head. The
    /// configured `max_depth` is clamped to [`MAX_DEPTH_CAP`].
    pub fn open(path: impl AsRef<Path>, config: ServerConfig) -> Result<Arc<ServerState>, ServerError> {
        ServerState::open_inner(path.as_ref(), config, None)
    }

    /// Opens `path` (a store directory, or a replica's mirror with `replica`'s lower layer in
    /// `config.lower_layer`).
    pub(crate) fn open_inner(
        path: &Path,
        config: ServerConfig,
        replica: Option<Arc<larch_remote::Replica>>,
    ) -> Result<Arc<ServerState>, ServerError> {
        let path = path.to_path_buf();
        let repo = Repo::open_read_only_layered(&path, repo_options(&config), config.lower_layer.clone())
            .map_err(|source| ServerError::Open { path: path.clone(), source })?;
        let head = snapshot(&repo).map_err(|source| ServerError::Head { path: path.clone(), source })?;
        let mut config = config;
        config.limits.max_depth = config.limits.max_depth.min(MAX_DEPTH_CAP);
        let limits = &config.limits;
        Ok(Arc::new(ServerState {
            repo: RwLock::new(repo),
            head: RwLock::new(head),
            last_reload: Mutex::new(Instant::now()),
            path,
            bucket: TokenBucket::new(limits.rate_per_second, limits.burst),
            metrics: Metrics::default(),
            heavy: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            ),
            config,
            replica,
        }))
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The request limits.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The head commit, as of the last reload.
    pub fn head(&self) -> Option<Hash> {
        read(&self.head).as_ref().map(|snapshot| snapshot.details.hash)
    }

    pub(crate) fn head_snapshot(&self) -> Option<Arc<Snapshot>> {
        read(&self.head).clone()
    }

    /// The store handle's counters.
    pub fn store_stats(&self) -> StoreStats {
        read(&self.repo).stats()
    }

    /// The replica this server follows, if it is one.
    pub(crate) fn replica(&self) -> Option<&Arc<larch_remote::Replica>> {
        self.replica.as_ref()
    }

    /// Sees the commits published since the last reload (a replica: fetches the newest manifest
    /// first); returns whether there were any.
    pub fn reload(&self) -> Result<bool, ServerError> {
        self.metrics.reloads.fetch_add(1, Ordering::Relaxed);
        let result = self.reload_inner();
        match &result {
            Ok(true) => {
                self.metrics.reloads_changed.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(_) => {
                self.metrics.reload_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    fn reload_inner(&self) -> Result<bool, ServerError> {
        // A replica fetches outside the lock (the network), applies under it (local files).
        let fetched = match &self.replica {
            Some(replica) => {
                *self.last_reload.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
                replica.fetch().map_err(|source| ServerError::Replica { source })?
            }
            None => false,
        };
        let reload = |source| ServerError::Reload { source };
        let (changed, reopened) = {
            let mut repo = write(&self.repo);
            *self.last_reload.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
            if fetched && let Some(replica) = &self.replica {
                replica.apply().map_err(|source| ServerError::Replica { source })?;
            }
            match repo.reload() {
                // The store went back to an older state (a recovery, a writer's fallback): the
                // handle's commit map belongs to the timeline left, so it is replaced by a new one
                // (and the head's tree, which reads through the old one, too).
                Err(StoreError::Rewound { reason, .. }) => {
                    tracing::warn!(%reason, "the store was rewound; reopening it");
                    self.metrics.refreshes_before.fetch_add(repo.stats().layout_refreshes, Ordering::Relaxed);
                    *repo = Repo::open_read_only_layered(
                        &self.path,
                        repo_options(&self.config),
                        self.config.lower_layer.clone(),
                    )
                    .map_err(reload)?;
                    (true, true)
                }
                other => (other.map_err(reload)?, false),
            }
        };
        if changed {
            let repo = read(&self.repo);
            let current = self.head();
            if repo.head() != current || reopened {
                let snapshot = snapshot(&repo).map_err(reload)?;
                if let Some(new) = &snapshot {
                    tracing::debug!(head = %new.details.hash, commits = repo.commit_count(), "new head");
                }
                *write(&self.head) = snapshot;
            }
        }
        Ok(changed)
    }

    /// Makes sure the handle has seen every commit published before `asked` (a request naming an
    /// unknown commit): reloads unless a reload started since `asked` (then it saw them already,
    /// and a flood of requests for unknown commits costs one reload, not one each).
    fn reload_since(&self, asked: Instant) {
        let started = *self.last_reload.lock().unwrap_or_else(PoisonError::into_inner);
        if started > asked {
            return;
        }
        if let Err(err) = self.reload() {
            tracing::warn!(%err, "reload failed");
        }
    }

    pub(crate) fn seconds_since_reload(&self) -> f64 {
        self.last_reload.lock().unwrap_or_else(PoisonError::into_inner).elapsed().as_secs_f64()
    }

    /// The commit `commit` names, with its tree.
    pub(crate) fn resolve(&self, commit: CommitRef) -> Result<(CommitDetails, Tree), ApiError> {
        let hash = match commit {
            CommitRef::Head => {
                let snapshot = self.head_snapshot().ok_or_else(no_head)?;
                return Ok((snapshot.details.clone(), snapshot.tree.clone()));
            }
            CommitRef::Hash(hash) => hash,
        };
        if let Some(snapshot) = self.head_snapshot().filter(|s| s.details.hash == hash) {
            return Ok((snapshot.details.clone(), snapshot.tree.clone()));
        }
        let asked = Instant::now();
        for attempt in 0..2 {
            {
                let repo = read(&self.repo);
                if repo.contains(&hash) {
                    // A commit a writer's GC collected since the last reload: as after it.
                    let collected = |e: StoreError| match e {
                        StoreError::Collected { .. } => ApiError::not_found(
                            "unknown_commit",
                            format!("no commit {hash} in the store: {e}"),
                        ),
                        e => ApiError::store(&e),
                    };
                    let details = repo.commit_details(&hash).map_err(collected)?;
                    let tree = repo.checkout(&hash).map_err(collected)?;
                    return Ok((details, tree));
                }
            }
            if attempt == 0 {
                self.reload_since(asked);
            }
        }
        Err(ApiError::not_found("unknown_commit", format!("no commit {hash} in the store")))
    }

    pub(crate) fn store_view(&self) -> StoreView {
        let head = self.head_snapshot().map(|s| (s.details.hash.to_base58(), s.details.info.date));
        StoreView { stats: self.store_stats(), head, seconds_since_reload: self.seconds_since_reload() }
    }

    pub(crate) fn commit_count(&self) -> usize {
        read(&self.repo).commit_count()
    }
}

/// The options of the server's read-only handle.
fn repo_options(config: &ServerConfig) -> RepoOptions {
    RepoOptions {
        cache_bytes: config.cache_bytes,
        lower: config.lower.clone(),
        open_files: config.open_files,
        ..RepoOptions::default()
    }
}

fn no_head() -> ApiError {
    ApiError::not_found("no_head", "the store has no head commit yet (branch `main` is not set)")
}

fn snapshot(repo: &Repo) -> Result<Option<Arc<Snapshot>>, StoreError> {
    let Some(hash) = repo.head() else {
        return Ok(None);
    };
    let details = repo.commit_details(&hash)?;
    let tree = repo.checkout(&hash)?;
    Ok(Some(Arc::new(Snapshot { details, tree })))
}

/// Reloads the store every `reload_interval`, for as long as the server runs.
pub(crate) async fn reload_loop(state: Arc<ServerState>) {
    let mut interval = tokio::time::interval(state.config.reload_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        interval.tick().await;
        match state.reload() {
            Ok(_) => {
                if failing {
                    tracing::info!("reload works again");
                }
                failing = false;
            }
            Err(err) => {
                // Logged once per failure streak, not every tick.
                if !failing {
                    tracing::warn!(%err, "reload failed; serving the last state seen");
                }
                failing = true;
            }
        }
    }
}
