//! The writer's side of read replicas: [`Publisher`] publishes the replica manifest
//! ([`crate::manifest`], `docs/object-storage.md` *Read replicas*) after each sealed chunk and at
//! an interval, from a thread of its own beside the writer.
//!
//! A publish reads the store's `control` file as a reader in another process would (the state
//! it stands on, [`larch_store::published_state`]), then makes every file that state needs
//! readable from the bucket: archived chunks already are (their object and `.sums`, verified by
//! the uploader); every other file (`commits`, the head chunk up to the published end, sealed
//! chunks still in the store directory or the spool, GC segments) is published as immutable
//! *pieces* (`tail.<file>.<from>-<to>.g<generation>`), each uploaded, read back, compared block by
//! block and marked complete by its `.sums` object like a chunk. A file grows by a new piece per
//! publish; a new piece absorbs the pieces before it no longer than itself (so a byte is uploaded
//! again O(log n) times and a file has few pieces). Only then is `manifest` written (and read
//! back). Pieces the new manifest no longer names are deleted after the grace period, never
//! before.

use crate::RemoteLower;
use crate::client::Client;
use crate::error::{RemoteError, local};
use crate::manifest::{MANIFEST_OBJECT, Manifest, PIECE_PREFIX, Piece, PiecedFile};
use crate::sums::{BLOCK_BYTES, SUMS_SUFFIX, Sums};
use bytes::Bytes;
use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// A new piece absorbs the previous pieces shorter than [`MAX_PIECE_BYTES`] anyway once a file
/// has this many of them.
const MAX_PIECES: usize = 24;

/// The longest piece: a longer range (a large GC segment) is published as several pieces of at
/// most this size, each read into memory and uploaded with one `PUT`. Pieces of this size are
/// never absorbed by a later one.
const MAX_PIECE_BYTES: u64 = 64 << 20;

/// When and how the writer publishes manifests.
#[derive(Clone, Debug)]
pub struct PublishOptions {
    /// The longest a new published state waits for its manifest (a sealed chunk publishes at
    /// once, at the next poll).
    pub interval: Duration,
    /// How long objects a newer manifest no longer names are kept before they are deleted:
    /// replicas that reload more often than this never miss one.
    pub grace: Duration,
    /// How often the thread reads the control file.
    pub poll: Duration,
}

impl Default for PublishOptions {
    fn default() -> PublishOptions {
        PublishOptions {
            interval: Duration::from_secs(5),
            grace: Duration::from_secs(60),
            poll: Duration::from_millis(250),
        }
    }
}

/// What the publisher did so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishStats {
    /// The generation of the last manifest published (0: none yet).
    pub generation: u64,
    /// Manifests this process published.
    pub published: u64,
    /// Pieces uploaded and verified.
    pub pieces: u64,
    /// Their bytes.
    pub piece_bytes: u64,
    /// Objects deleted after their grace period.
    pub deleted: u64,
    /// Objects waiting for their grace period to end.
    pub retiring: u64,
    /// A publish that could not complete since the last one that did: why.
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct Core {
    client: Arc<Client>,
    store: PathBuf,
    spool: PathBuf,
    sums_dir: PathBuf,
    identity: [u8; 16],
    last: Option<Manifest>,
    /// The objects named by manifests whose `PUT` was sent since `last` but not confirmed by
    /// the read-back: any of them may be in the bucket (and applied by replicas), so these
    /// objects are retired only once a later manifest is confirmed.
    unconfirmed: HashSet<String>,
    /// Never used twice, even by a manifest that may not have been written.
    next_generation: u64,
    last_publish: Option<Instant>,
    retired: Vec<(String, Instant)>,
    /// Chunks known archived and verified in the bucket.
    archived: HashSet<String>,
    stats: PublishStats,
}

/// Why a publish did not complete (internal: a file not yet readable from the bucket is not an
/// error, the next poll tries again).
enum Skip {
    /// A chunk waits for its upload.
    Waiting(String),
    Failed(RemoteError),
}

impl From<RemoteError> for Skip {
    fn from(e: RemoteError) -> Skip {
        Skip::Failed(e)
    }
}

/// The thread publishing a writer's replica manifests (see the module's documentation).
#[derive(Debug)]
pub struct Publisher {
    core: Arc<Mutex<Core>>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Publisher {
    /// Starts publishing the store at `store`, whose writer's lower layer is `lower`. Continues
    /// the generations of the manifest found in the bucket, and schedules the deletion (after the
    /// grace period) of pieces no manifest names (left by a writer that stopped between uploading
    /// them and publishing). With `options.poll` zero no thread is started: the caller publishes
    /// with [`Publisher::publish_now`].
    pub fn start(
        lower: &RemoteLower,
        store: &Path,
        options: PublishOptions,
    ) -> Result<Publisher, RemoteError> {
        let dir = lower.directory();
        let client = dir.client().clone();
        let (spool, sums_dir) = dir.local_dirs();
        let identity = larch_store::store_identity(store, false)?.ok_or_else(|| RemoteError::Foreign {
            url: client.url().to_string(),
            store: store.display().to_string(),
            reason: "the store has no identity: open its writer with this lower layer first".into(),
        })?;
        let last = match client.get_opt(MANIFEST_OBJECT)? {
            Some(bytes) => match Manifest::decode(&bytes) {
                Ok(manifest) if manifest.store != identity.0 => {
                    return Err(RemoteError::Foreign {
                        url: client.url().to_string(),
                        store: store.display().to_string(),
                        reason: "its manifest names another store".into(),
                    });
                }
                Ok(manifest) => Some(manifest),
                Err(e) => {
                    tracing::warn!("the manifest in the bucket is refused ({e}); a new one replaces it");
                    None
                }
            },
            None => None,
        };
        // Pieces no manifest names, and the largest generation any piece carries (a damaged
        // manifest's successor must still be newer).
        let named: HashSet<String> = last.iter().flat_map(Manifest::objects).collect();
        let mut top = last.as_ref().map_or(0, |m| m.generation);
        let mut retired = Vec::new();
        for (name, _) in client.list()? {
            let Some(object) = name.strip_prefix(PIECE_PREFIX).map(|_| name.trim_end_matches(SUMS_SUFFIX))
            else {
                continue;
            };
            if let Some(generation) = object.rsplit_once(".g").and_then(|(_, g)| g.parse::<u64>().ok()) {
                top = top.max(generation);
            }
            if !named.contains(object) && !name.ends_with(SUMS_SUFFIX) {
                retired.push((object.to_string(), Instant::now()));
            }
        }
        let core = Core {
            client,
            store: store.to_path_buf(),
            spool: spool.to_path_buf(),
            sums_dir: sums_dir.to_path_buf(),
            identity: identity.0,
            stats: PublishStats {
                generation: last.as_ref().map_or(0, |m| m.generation),
                retiring: retired.len() as u64,
                ..PublishStats::default()
            },
            last,
            unconfirmed: HashSet::new(),
            next_generation: top + 1,
            last_publish: None,
            retired,
            archived: HashSet::new(),
        };
        let core = Arc::new(Mutex::new(core));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = if options.poll.is_zero() {
            None
        } else {
            let (core, stop) = (core.clone(), stop.clone());
            Some(
                std::thread::Builder::new()
                    .name("larch-publish".into())
                    .spawn(move || run(&core, &stop, &options))
                    .map_err(|e| local(store, "start the publishing thread", e))?,
            )
        };
        Ok(Publisher { core, stop, thread })
    }

    /// Publishes a manifest of the store's published state now, if it differs from the last
    /// one's; the new generation, `None` when there was nothing new or a chunk still waits for
    /// its upload.
    pub fn publish_now(&self) -> Result<Option<u64>, RemoteError> {
        let mut core = lock(&self.core);
        match core.publish(true, Duration::ZERO) {
            Ok(generation) => Ok(generation),
            Err(Skip::Waiting(_)) => Ok(None),
            Err(Skip::Failed(e)) => Err(e),
        }
    }

    /// Deletes the retired objects whose grace period `grace` ended; how many.
    pub fn sweep(&self, grace: Duration) -> u64 {
        lock(&self.core).sweep(grace)
    }

    /// Its counters.
    pub fn stats(&self) -> PublishStats {
        lock(&self.core).stats.clone()
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(core: &Mutex<Core>) -> std::sync::MutexGuard<'_, Core> {
    core.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(core: &Mutex<Core>, stop: &(Mutex<bool>, Condvar), options: &PublishOptions) {
    loop {
        {
            let stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
            let (stopped, _) =
                stop.1.wait_timeout_while(stopped, options.poll, |s| !*s).unwrap_or_else(|p| p.into_inner());
            if *stopped {
                return;
            }
        }
        let mut core = lock(core);
        match core.publish(false, options.interval) {
            Ok(_) => {}
            Err(Skip::Waiting(name)) => tracing::debug!("the manifest waits for the upload of {name}"),
            Err(Skip::Failed(e)) => {
                if core.stats.last_error.is_none() {
                    tracing::warn!("publishing the replica manifest failed (retried): {e}");
                }
                core.stats.last_error = Some(e.to_string());
            }
        }
        core.sweep(options.grace);
    }
}

/// A local copy of a pack file: the store directory's, else the spool's.
fn open_local(dirs: [&Path; 2], name: &str) -> Result<Option<File>, RemoteError> {
    for dir in dirs {
        let path = dir.join(name);
        match File::open(&path) {
            Ok(file) => return Ok(Some(file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(local(&path, "open", e)),
        }
    }
    Ok(None)
}

/// Uploads `bytes` as the object `name`, reads it back whole, compares every block, then writes
/// its `.sums` object (what marks it complete), as the uploader does for chunks.
fn put_verified(client: &Client, name: &str, bytes: Bytes) -> Result<(), RemoteError> {
    let sums = Sums::of(&bytes, BLOCK_BYTES);
    client.put(name, bytes.clone())?;
    let back = client.get(name)?;
    let matches = back.len() == bytes.len()
        && (0..sums.blocks()).all(|block| {
            let range = sums.range(block);
            sums.check(block, back.get(range.start as usize..range.end as usize).unwrap_or_default())
        });
    if !matches {
        return Err(RemoteError::Corrupt {
            url: client.url().to_string(),
            name: name.to_string(),
            reason: "the object read back differs from the bytes uploaded".into(),
        });
    }
    client.put(&format!("{name}{SUMS_SUFFIX}"), Bytes::from(sums.encode()))
}

impl Core {
    /// Publishes when the published state changed and (unless `now`) a chunk was sealed since
    /// the last manifest or `interval` passed.
    fn publish(&mut self, now: bool, interval: Duration) -> Result<Option<u64>, Skip> {
        let path = self.store.join("control");
        let bytes = std::fs::read(&path).map_err(|e| local(&path, "read", e))?;
        let Some(state) = larch_store::published_state(&bytes).map_err(RemoteError::Store)? else {
            return Ok(None);
        };
        if let Some(last) = &self.last {
            let same = last.store_generation == state.generation && last.lineage == state.lineage;
            let sealed = last.head_chunk != state.head_chunk;
            let due = self.last_publish.is_none_or(|at| at.elapsed() >= interval);
            if same || !(now || sealed || due) {
                return Ok(None);
            }
        }
        // A timeline that went back (a recovery) or a store replaced: publish every file afresh.
        let fresh = self.last.as_ref().is_none_or(|last| {
            last.lineage != state.lineage
                || last.pack_end > state.pack_end
                || last.index_end > state.index_end
        });
        let previous =
            if fresh { Vec::new() } else { self.last.as_ref().map(|m| m.files.clone()).unwrap_or_default() };
        let generation = self.next_generation;
        let mut files = Vec::new();
        let index = File::open(self.store.join("commits"))
            .map_err(|e| local(&self.store.join("commits"), "open", e))?;
        files.push(self.extend("commits", &index, state.index_end, &previous, generation)?);
        let head = state.chunk_names().pop();
        let names = state.segments.iter().cloned();
        let chunks = state.chunk_names().into_iter().map(|name| {
            let len = (Some(&name) == head.as_ref()).then(|| state.head_chunk_len());
            (name, len)
        });
        for (name, len) in names.chain(chunks) {
            match open_local([&self.store, &self.spool], &name)? {
                Some(file) => {
                    let len = match len {
                        Some(len) => len,
                        None => file.metadata().map_err(|e| local(&self.store.join(&name), "stat", e))?.len(),
                    };
                    files.push(self.extend(&name, &file, len, &previous, generation)?);
                }
                None if self.is_archived(&name)? => {}
                None => return Err(Skip::Waiting(name)),
            }
        }
        let manifest = Manifest {
            generation,
            published_ms: now_ms(),
            store: self.identity,
            store_generation: state.generation,
            lineage: state.lineage,
            pack_end: state.pack_end,
            index_end: state.index_end,
            first_chunk: state.first_chunk,
            head_chunk: state.head_chunk,
            head: state.head,
            slot: Vec::new(),
            confirm: [0; 20],
            files,
        };
        let (slot, confirm) = Manifest::split_image(&state.image).ok_or_else(|| RemoteError::Corrupt {
            url: self.client.url().to_string(),
            name: "control".into(),
            reason: "the published state's control image is not one slot".into(),
        })?;
        let manifest = Manifest { slot, confirm, ..manifest };
        let encoded = manifest.encode();
        // The generation is spent once the `PUT` is sent: a manifest that may have been written
        // (a `PUT` answered with an error, a read-back that failed) must not share it with a
        // different one, which replicas that applied the first would ignore.
        self.next_generation = generation + 1;
        if let Err(e) = self.write_manifest(encoded) {
            self.unconfirmed.extend(manifest.objects());
            return Err(Skip::Failed(e));
        }
        // Objects no longer named by the new manifest (nor by one that may have been written
        // before it): deleted once the grace period is over.
        let named: HashSet<String> = manifest.objects().into_iter().collect();
        let now_at = Instant::now();
        let mut retiring = std::mem::take(&mut self.unconfirmed);
        retiring.extend(self.last.iter().flat_map(Manifest::objects));
        let mut retiring: Vec<String> = retiring.into_iter().filter(|o| !named.contains(o)).collect();
        retiring.sort();
        self.retired.extend(retiring.into_iter().map(|object| (object, now_at)));
        self.last = Some(manifest);
        self.last_publish = Some(now_at);
        self.stats.generation = generation;
        self.stats.published += 1;
        self.stats.retiring = self.retired.len() as u64;
        self.stats.last_error = None;
        Ok(Some(generation))
    }

    /// Writes the manifest `encoded`, then reads it back and compares.
    fn write_manifest(&self, encoded: Vec<u8>) -> Result<(), RemoteError> {
        self.client.put(MANIFEST_OBJECT, Bytes::from(encoded.clone()))?;
        if self.client.get(MANIFEST_OBJECT)?.as_ref() != encoded.as_slice() {
            return Err(RemoteError::Corrupt {
                url: self.client.url().to_string(),
                name: MANIFEST_OBJECT.into(),
                reason: "the manifest read back differs from the bytes uploaded".into(),
            });
        }
        Ok(())
    }

    /// The pieces of `name` covering `[0, len)`: the previous manifest's, and a new piece for
    /// what they do not cover, absorbing the pieces before it that are not longer than it.
    fn extend(
        &mut self,
        name: &str,
        file: &File,
        len: u64,
        previous: &[PiecedFile],
        generation: u64,
    ) -> Result<PiecedFile, Skip> {
        let mut pieces = previous
            .iter()
            .find(|f| f.name == name && f.len <= len)
            .map(|f| f.pieces.clone())
            .unwrap_or_default();
        let mut from = pieces.last().map_or(0, |p| p.to);
        if from == len {
            return Ok(PiecedFile { name: name.to_string(), len, pieces });
        }
        let mut small = pieces.iter().filter(|p| p.len() < MAX_PIECE_BYTES).count();
        while let Some(last) = pieces.last() {
            if last.len() >= MAX_PIECE_BYTES || (last.len() > len - from && small < MAX_PIECES) {
                break;
            }
            from = last.from;
            pieces.pop();
            small -= 1;
        }
        while from < len {
            let piece = Piece { from, to: len.min(from.saturating_add(MAX_PIECE_BYTES)), generation };
            let mut bytes = vec![0u8; piece.len() as usize];
            file.read_exact_at(&mut bytes, from).map_err(|e| local(&self.store.join(name), "read", e))?;
            put_verified(&self.client, &piece.object(name), Bytes::from(bytes))?;
            self.stats.pieces += 1;
            self.stats.piece_bytes += piece.len();
            from = piece.to;
            pieces.push(piece);
        }
        Ok(PiecedFile { name: name.to_string(), len, pieces })
    }

    /// Whether the chunk `name` is archived: its `.sums` object exists (the local copy the
    /// uploader wrote, else the bucket's).
    fn is_archived(&mut self, name: &str) -> Result<bool, RemoteError> {
        if self.archived.contains(name) {
            return Ok(true);
        }
        let sums = format!("{name}{SUMS_SUFFIX}");
        let found = self.sums_dir.join(&sums).exists() || self.client.get_opt(&sums)?.is_some();
        if found {
            self.archived.insert(name.to_string());
        }
        Ok(found)
    }

    /// Deletes the retired objects older than `grace` (their `.sums` first); how many.
    fn sweep(&mut self, grace: Duration) -> u64 {
        let mut deleted = 0;
        let client = self.client.clone();
        self.retired.retain(|(object, at)| {
            if at.elapsed() < grace {
                return true;
            }
            let gone = client.delete(&format!("{object}{SUMS_SUFFIX}")).and_then(|()| client.delete(object));
            match gone {
                Ok(()) => {
                    deleted += 1;
                    false
                }
                Err(e) => {
                    tracing::debug!("deleting {object} failed (retried later): {e}");
                    true
                }
            }
        });
        self.stats.deleted += deleted;
        self.stats.retiring = self.retired.len() as u64;
        deleted
    }
}
