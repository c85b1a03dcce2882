//! The reader's side of read replicas: [`Replica`] follows the manifests a writer publishes
//! ([`crate::publish`], `docs/object-storage.md` *Read replicas*) with no store directory of its
//! own and without ever writing to the bucket.
//!
//! It keeps a *mirror* directory in its cache directory, holding the two small files a reader
//! opens by path: `control` (the manifest's control image: one slot, the published state) and
//! `commits` (the commit index, downloaded once and then extended by what each manifest adds).
//! Every pack file (chunks, segments) is read through its lower layer ([`Replica::layer`]): a
//! file the manifest names as pieces is read from them, any other from its archived object, each
//! 256 KiB block verified against its `.sums` and kept in the bounded block cache. A reload is
//! two steps: [`Replica::fetch`] (the network: the manifest and the new index bytes; no lock
//! needed) then [`Replica::apply`] (local: the mirror's files and the pieces map), which a
//! server runs under its store lock before [`larch_store::Repo::reload`].

use crate::cache::{BlockCache, CacheStats};
use crate::client::{Client, ClientSettings};
use crate::dir::RemoteDirectory;
use crate::error::{RemoteError, local};
use crate::manifest::{MANIFEST_OBJECT, Manifest, ManifestError, PiecedFile};
use crate::url::RemoteUrl;
use larch_core::Hash;
use larch_store::{Directory, LOWER_MARKER, LowerLayer, Storage};
use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// The file, in the cache directory, naming the prefix a replica's cache serves.
const ORIGIN_FILE: &str = "replica-origin";

/// The checksum objects a replica fetches at once when it opens or reloads ([`Replica::open`]).
pub const SUMS_IN_FLIGHT: usize = 16;

/// The archived chunks `manifest`'s state reads (every chunk of `first_chunk..=head_chunk` it
/// does not name as pieces): the objects whose checksums a replica needs.
fn archived_chunks(manifest: &Manifest) -> Vec<String> {
    (manifest.first_chunk..=manifest.head_chunk)
        .map(|seq| format!("chunk.{seq:06}"))
        .filter(|name| manifest.file(name).is_none())
        .collect()
}

/// How to open a replica.
#[derive(Clone, Debug)]
pub struct ReplicaOptions {
    /// Its own directory: the mirror (`control`, `commits`), checksum copies, the block cache.
    pub cache_dir: PathBuf,
    /// The block cache's budget in bytes.
    pub cache_bytes: u64,
    /// The client's timeouts and retries.
    pub client: ClientSettings,
}

/// Why a replica cannot follow its prefix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaError {
    /// A request or a local file failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The manifest's bytes are refused (damaged, cut short, of another version).
    #[error("{url}/{MANIFEST_OBJECT} is refused: {source}")]
    Manifest {
        /// The prefix.
        url: String,
        /// Why.
        #[source]
        source: ManifestError,
    },
    /// The prefix has no manifest: no writer published one yet.
    #[error("{url} has no {MANIFEST_OBJECT}: no writer published one yet (larch archive --lower {url})")]
    NoManifest {
        /// The prefix.
        url: String,
    },
    /// A length the manifest gives cannot be held in memory.
    #[error("{url}/{MANIFEST_OBJECT}: its {field} ({value}) is too large to read")]
    TooLarge {
        /// The prefix.
        url: String,
        /// The manifest's field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// The prefix or its manifest is not the one this replica follows.
    #[error("the replica of {url} refuses it: {reason}")]
    Foreign {
        /// The prefix.
        url: String,
        /// Why.
        reason: String,
    },
}

impl ReplicaError {
    /// Whether the error says the object store could not be reached or answered with an error
    /// (rather than: what it holds is wrong).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ReplicaError::Remote(RemoteError::Request { not_found: false, .. }))
    }
}

/// How fresh a replica is.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaStatus {
    /// The prefix.
    pub url: String,
    /// The generation of the manifest served.
    pub generation: u64,
    /// Its head commit.
    pub head: Option<Hash>,
    /// Its commit index's length (16 + 44 per commit).
    pub index_end: u64,
    /// Time since the writer published it (its clock against ours), `None` if in the future.
    pub manifest_age: Option<Duration>,
    /// Time since the last fetch that succeeded.
    pub since_success: Duration,
    /// The last fetch's error, while none succeeded since.
    pub last_error: Option<String>,
    /// The block cache.
    pub cache: CacheStats,
}

/// What [`Replica::fetch`] prepared for [`Replica::apply`].
#[derive(Debug)]
struct Pending {
    manifest: Arc<Manifest>,
    /// The index bytes `[from, index_end)`.
    index: Vec<u8>,
    from: u64,
    /// The generation applied when it was fetched (what `from` was chosen against).
    base: u64,
}

#[derive(Debug)]
struct Follow {
    applied: Arc<Manifest>,
    pending: Option<Pending>,
    last_success: Instant,
    last_error: Option<String>,
}

/// What the lower layer reads through: the manifest applied, the object storage behind it.
#[derive(Debug)]
struct Inner {
    url: String,
    remote: Arc<RemoteDirectory>,
    current: RwLock<Arc<Manifest>>,
    /// Objects opened (archived chunks and pieces), by object name.
    opened: Mutex<HashMap<String, Arc<dyn Storage>>>,
}

/// A read replica of a prefix (see the module's documentation).
#[derive(Debug)]
pub struct Replica {
    url: RemoteUrl,
    client: Arc<Client>,
    inner: Arc<Inner>,
    cache: Arc<BlockCache>,
    mirror: PathBuf,
    identity: [u8; 16],
    follow: Mutex<Follow>,
}

fn read_only() -> io::Error {
    io::Error::new(ErrorKind::PermissionDenied, "a read replica never writes")
}

impl Inner {
    fn manifest(&self) -> Arc<Manifest> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The object `object` (archived chunk or piece), opened once.
    fn object(&self, object: &str) -> io::Result<Arc<dyn Storage>> {
        if let Some(found) = self.opened.lock().unwrap_or_else(|p| p.into_inner()).get(object) {
            return Ok(found.clone());
        }
        let storage = self.remote.open(object, false)?;
        self.opened.lock().unwrap_or_else(|p| p.into_inner()).insert(object.to_string(), storage.clone());
        Ok(storage)
    }

    /// The bytes `[offset, offset + buf.len())` of the pieced file `file`.
    fn read_pieces(&self, file: &PiecedFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|end| *end <= file.len).ok_or_else(|| {
            io::Error::new(ErrorKind::UnexpectedEof, format!("{}: read past the published end", file.name))
        })?;
        let mut at = offset;
        for piece in file.pieces.iter().filter(|p| p.to > offset && p.from < end) {
            let take = end.min(piece.to) - at;
            let done = (at - offset) as usize;
            let part = buf.get_mut(done..done + take as usize).unwrap_or_default();
            self.object(&piece.object(&file.name))?.read_at(at - piece.from, part)?;
            at += take;
        }
        Ok(())
    }

    fn len(&self, name: &str) -> io::Result<u64> {
        match self.manifest().file(name) {
            Some(file) => Ok(file.len),
            None => self.object(name)?.len(),
        }
    }
}

/// A pack file as the replica reads it: through the manifest applied at each read (bytes below
/// a published end never change, so a handle opened under one manifest reads on under the next).
#[derive(Debug)]
struct ReplicaFile {
    name: String,
    inner: Arc<Inner>,
}

impl Storage for ReplicaFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len(&self.name)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self.inner.manifest().file(&self.name) {
            Some(file) => self.inner.read_pieces(file, offset, buf),
            None => self.inner.object(&self.name)?.read_at(offset, buf),
        }
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(read_only())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The replica's lower layer.
#[derive(Debug)]
struct ReplicaDirectory {
    inner: Arc<Inner>,
}

impl Directory for ReplicaDirectory {
    fn create(&self, _name: &str) -> io::Result<Arc<dyn Storage>> {
        Err(read_only())
    }

    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>> {
        if writable {
            return Err(read_only());
        }
        if self.inner.manifest().file(name).is_none() {
            // An archived object: its checksums fetched (or a missing file reported) now.
            self.inner.object(name)?;
        }
        Ok(Arc::new(ReplicaFile { name: name.to_string(), inner: self.inner.clone() }))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let manifest = self.inner.manifest();
        let mut names: Vec<String> = (manifest.first_chunk..=manifest.head_chunk)
            .map(|seq| format!("chunk.{seq:06}"))
            .chain(manifest.files.iter().map(|f| f.name.clone()).filter(|name| name != "commits"))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn remove(&self, _name: &str) -> io::Result<()> {
        Err(read_only())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn rename(&self, _from: &str, _to: &str) -> io::Result<()> {
        Err(read_only())
    }

    fn file_len(&self, name: &str) -> io::Result<u64> {
        self.inner.len(name)
    }
}

impl Replica {
    /// Opens a replica of `url` (`s3://BUCKET/PREFIX`) in `options.cache_dir`: reads the prefix's
    /// `larch-lower` marker and its manifest, fetches the checksum object of every archived chunk
    /// its cache directory does not hold yet ([`SUMS_IN_FLIGHT`] requests at once), and writes the
    /// mirror of that manifest's state. Refused when the cache directory serves another prefix,
    /// the manifest another store, or a checksum object is missing or damaged (the error names it).
    pub fn open(url: &str, options: &ReplicaOptions) -> Result<Replica, ReplicaError> {
        Replica::open_in_flight(url, options, SUMS_IN_FLIGHT)
    }

    /// [`Replica::open`] with at most `in_flight` checksum requests at once (1: one after the
    /// other; benchmarks compare the two).
    pub fn open_in_flight(
        url: &str,
        options: &ReplicaOptions,
        in_flight: usize,
    ) -> Result<Replica, ReplicaError> {
        let url = RemoteUrl::parse(url)?;
        let client = Arc::new(Client::connect(&url, options.client.clone())?);
        let dir = &options.cache_dir;
        let (mirror, spool, sums, blocks) =
            (dir.join("mirror"), dir.join("spool"), dir.join("sums"), dir.join("blocks"));
        for path in [dir, &mirror, &spool, &sums] {
            std::fs::create_dir_all(path).map_err(|e| local(path, "create", e))?;
        }
        let foreign = |reason: String| ReplicaError::Foreign { url: url.to_string(), reason };
        let marker = client
            .get_opt(LOWER_MARKER)?
            .ok_or_else(|| foreign(format!("it has no {LOWER_MARKER} object")))?;
        let identity = std::str::from_utf8(&marker)
            .ok()
            .and_then(|text| text.strip_prefix("larch lower ")?.strip_suffix('\n').map(str::to_string))
            .and_then(|hex| hex::decode(hex).ok())
            .and_then(|bytes| <[u8; 16]>::try_from(bytes).ok())
            .ok_or_else(|| foreign(format!("its {LOWER_MARKER} object is not a store identity")))?;
        check_origin(dir, &url, identity)?;
        let cache = Arc::new(BlockCache::open(&blocks, options.cache_bytes)?);
        let remote = Arc::new(RemoteDirectory::new(client.clone(), cache.clone(), spool, sums, None));
        let manifest = Arc::new(fetch_manifest(&client, &url, identity)?);
        remote.prefetch_sums(&archived_chunks(&manifest), in_flight)?;
        let inner = Arc::new(Inner {
            url: url.to_string(),
            remote,
            current: RwLock::new(manifest.clone()),
            opened: Mutex::new(HashMap::new()),
        });
        let commits =
            manifest.file("commits").ok_or_else(|| foreign("its manifest names no commit index".into()))?;
        let index = read_index(&inner, &url, commits, 0, manifest.index_end)?;
        let replica = Replica {
            url,
            client,
            inner,
            cache,
            mirror,
            identity,
            follow: Mutex::new(Follow {
                applied: manifest.clone(),
                pending: None,
                last_success: Instant::now(),
                last_error: None,
            }),
        };
        replica.write_mirror(&manifest, 0, &index, true)?;
        Ok(replica)
    }

    /// The mirror directory: the store directory to open read-only with [`Replica::layer`].
    pub fn mirror(&self) -> &Path {
        &self.mirror
    }

    /// The lower layer to open the mirror with ([`larch_store::Repo::open_read_only_layered`]).
    pub fn layer(&self) -> LowerLayer {
        LowerLayer {
            dir: Arc::new(ReplicaDirectory { inner: self.inner.clone() }),
            name: self.inner.url.clone(),
        }
    }

    /// The URL of the prefix.
    pub fn url(&self) -> &RemoteUrl {
        &self.url
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Follow> {
        self.follow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the newest manifest and, when it is not the one applied, the commit index bytes
    /// it adds; `true` when there is something to [`Replica::apply`]. A refused manifest (damaged,
    /// another store) is an error, and the state applied stays served.
    pub fn fetch(&self) -> Result<bool, ReplicaError> {
        let result = self.fetch_inner();
        let mut follow = self.lock();
        match &result {
            Ok(_) => {
                follow.last_success = Instant::now();
                follow.last_error = None;
            }
            Err(e) => follow.last_error = Some(e.to_string()),
        }
        result
    }

    fn fetch_inner(&self) -> Result<bool, ReplicaError> {
        let manifest = fetch_manifest(&self.client, &self.url, self.identity)?;
        let applied = self.lock().applied.clone();
        // An older manifest than the one applied (another reload applied a newer one meanwhile,
        // or the bucket's went back): never followed backwards.
        if manifest.generation <= applied.generation {
            return Ok(false);
        }
        // The same timeline grown: only the new index bytes; else (a rewound or replaced store)
        // the whole index again.
        let grown = manifest.lineage == applied.lineage
            && manifest.index_end >= applied.index_end
            && manifest.pack_end >= applied.pack_end;
        let from = if grown { applied.index_end } else { 0 };
        let commits = manifest.file("commits").ok_or_else(|| ReplicaError::Foreign {
            url: self.url.to_string(),
            reason: "its manifest names no commit index".into(),
        })?;
        let index = read_index(&self.inner, &self.url, commits, from, manifest.index_end)?;
        // The chunks archived since: their checksums now, off the store lock.
        self.inner.remote.prefetch_sums(&archived_chunks(&manifest), SUMS_IN_FLIGHT)?;
        let mut follow = self.lock();
        let newer = |generation: u64| manifest.generation > generation;
        if !newer(follow.applied.generation)
            || follow.pending.as_ref().is_some_and(|p| !newer(p.manifest.generation))
        {
            // A concurrent reload fetched (or applied) this generation or a newer one.
            return Ok(follow.pending.is_some());
        }
        follow.pending =
            Some(Pending { manifest: Arc::new(manifest), index, from, base: applied.generation });
        Ok(true)
    }

    /// Applies what [`Replica::fetch`] prepared: the new index bytes and control image into the
    /// mirror, the new pieces into the lower layer. `false` when nothing was pending. Run it
    /// where no reader of the mirror reloads at the same time (a server: under its store lock).
    /// A pending manifest no newer than the one applied, or fetched against another applied
    /// manifest than the current one (a concurrent reload applied one meanwhile), is dropped:
    /// the replica never moves backwards, and the next fetch prepares it again.
    pub fn apply(&self) -> Result<bool, ReplicaError> {
        let pending = {
            let mut follow = self.lock();
            let Some(pending) = follow.pending.take() else { return Ok(false) };
            if pending.base != follow.applied.generation
                || pending.manifest.generation <= follow.applied.generation
            {
                return Ok(false);
            }
            pending
        };
        self.write_mirror(&pending.manifest, pending.from, &pending.index, pending.from == 0)?;
        self.lock().applied = pending.manifest;
        Ok(true)
    }

    /// Writes the mirror's files for `manifest` (index bytes `index` at `from`, the whole file
    /// when `whole`) and makes its pieces the lower layer's. Files are written in place: a reader
    /// holding them open sees the new bytes at its next reload.
    fn write_mirror(
        &self,
        manifest: &Arc<Manifest>,
        from: u64,
        index: &[u8],
        whole: bool,
    ) -> Result<(), ReplicaError> {
        let write = |name: &str, at: u64, bytes: &[u8], truncate: bool| -> Result<(), ReplicaError> {
            let path = self.mirror.join(name);
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| local(&path, "open", e))?;
            file.write_all_at(bytes, at).map_err(|e| local(&path, "write", e))?;
            if truncate {
                file.set_len(at + bytes.len() as u64).map_err(|e| local(&path, "truncate", e))?;
            }
            Ok(())
        };
        write("commits", from, index, whole)?;
        // The pieces map before the control image: a reader that sees the new state finds its files.
        let named: std::collections::HashSet<String> = manifest.objects().into_iter().collect();
        self.inner
            .opened
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|object, _| !object.starts_with(crate::manifest::PIECE_PREFIX) || named.contains(object));
        *self.inner.current.write().unwrap_or_else(|p| p.into_inner()) = manifest.clone();
        write("control", 0, &manifest.control_image(), true)
    }

    /// How fresh the replica is.
    pub fn status(&self) -> ReplicaStatus {
        let follow = self.lock();
        let applied = &follow.applied;
        let now =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        ReplicaStatus {
            url: self.url.to_string(),
            generation: applied.generation,
            head: applied.head,
            index_end: applied.index_end,
            manifest_age: now.checked_sub(applied.published_ms).map(Duration::from_millis),
            since_success: follow.last_success.elapsed(),
            last_error: follow.last_error.clone(),
            cache: self.cache.stats(),
        }
    }
}

/// Checks that the cache directory `dir` serves `url` (its `replica-origin` file, written when
/// absent), and that its caches hold the store `identity`'s objects: when the prefix now holds
/// another store (wiped and written again under the same names), the checksum copies and the
/// block cache are emptied before anything is read from them.
fn check_origin(dir: &Path, url: &RemoteUrl, identity: [u8; 16]) -> Result<(), ReplicaError> {
    let origin = dir.join(ORIGIN_FILE);
    let expected = format!("{url} {}", hex::encode(identity));
    let text = match std::fs::read_to_string(&origin) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
        Err(e) => return Err(local(&origin, "read", e).into()),
    };
    let text = text.trim_end();
    if text == expected {
        return Ok(());
    }
    let served = text.split_once(' ').map_or(text, |(served, _)| served);
    if !text.is_empty() && served != url.to_string() {
        return Err(ReplicaError::Foreign {
            url: url.to_string(),
            reason: format!(
                "the cache directory {} serves {served:?} (give each replica its own --cache-dir)",
                dir.display(),
            ),
        });
    }
    if !text.is_empty() {
        tracing::warn!("{url} holds another store than {} cached: its caches are emptied", dir.display());
    }
    for name in ["sums", "blocks"] {
        let path = dir.join(name);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(local(&path, "remove", e).into()),
        }
    }
    let sums = dir.join("sums");
    std::fs::create_dir_all(&sums).map_err(|e| local(&sums, "create", e))?;
    crate::dir::write_atomically(dir, ORIGIN_FILE, format!("{expected}\n").as_bytes())?;
    Ok(())
}

/// The bytes read at a time from the commit index's pieces: the buffer grows with the bytes
/// actually read, never to a length a manifest only claims.
const INDEX_STEP: u64 = 16 << 20;

/// The commit index bytes `[from, end)` from its pieces `commits`.
fn read_index(
    inner: &Inner,
    url: &RemoteUrl,
    commits: &PiecedFile,
    from: u64,
    end: u64,
) -> Result<Vec<u8>, ReplicaError> {
    let mut index = Vec::new();
    let mut at = from;
    while at < end {
        let take = (end - at).min(INDEX_STEP) as usize;
        let done = index.len();
        index.try_reserve_exact(take).map_err(|_| ReplicaError::TooLarge {
            url: url.to_string(),
            field: "index_end",
            value: end,
        })?;
        index.resize(done + take, 0);
        inner
            .read_pieces(commits, at, index.get_mut(done..).unwrap_or_default())
            .map_err(|e| io_error(url, e))?;
        at += take as u64;
    }
    Ok(index)
}

/// A failure reading pieces, as the error of the object store it came from when it did.
fn io_error(url: &RemoteUrl, e: io::Error) -> ReplicaError {
    let kind = e.kind();
    match e.into_inner().map(|inner| inner.downcast::<RemoteError>()) {
        Some(Ok(remote)) => ReplicaError::Remote(*remote),
        Some(Err(other)) => ReplicaError::Remote(RemoteError::Local {
            path: url.to_string(),
            op: "read the commit index",
            source: io::Error::new(kind, other),
        }),
        None => ReplicaError::Remote(RemoteError::Local {
            path: url.to_string(),
            op: "read the commit index",
            source: io::Error::from(kind),
        }),
    }
}

/// The prefix's manifest, decoded and checked to name the store `identity`.
fn fetch_manifest(client: &Client, url: &RemoteUrl, identity: [u8; 16]) -> Result<Manifest, ReplicaError> {
    let bytes =
        client.get_opt(MANIFEST_OBJECT)?.ok_or_else(|| ReplicaError::NoManifest { url: url.to_string() })?;
    let manifest =
        Manifest::decode(&bytes).map_err(|source| ReplicaError::Manifest { url: url.to_string(), source })?;
    if manifest.store != identity {
        return Err(ReplicaError::Foreign {
            url: url.to_string(),
            reason: format!(
                "its manifest names the store {}, its {LOWER_MARKER} another",
                hex::encode(manifest.store)
            ),
        });
    }
    Ok(manifest)
}
