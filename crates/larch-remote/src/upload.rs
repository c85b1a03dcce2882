//! Background uploads of sealed chunks. Archive mode moves a chunk into the local spool
//! directory (copy, `fdatasync`, rename, directory `fsync`: the store directory's copy is unlinked
//! only then); this thread uploads each spooled chunk, reads the object back whole and compares it
//! block by block with the spooled bytes, writes the chunk's checksum object (which marks the
//! upload complete), and only then removes the spooled copy. An upload cut short (no checksum
//! object) is redone from the spool at the next open; a failed attempt is retried with
//! exponential backoff, so commits never wait on object storage: the spool is the backlog.

use crate::client::Client;
use crate::error::{RemoteError, local};
use crate::retire::{Retired, sweep};
use crate::sums::{BLOCK_BYTES, SUMS_SUFFIX, Sums};
use bytes::Bytes;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The first wait after a failed upload; doubled after each failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What the uploader did so far and what it still has to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// Chunks waiting in the spool (the one being uploaded included).
    pub backlog: u64,
    /// Their bytes.
    pub backlog_bytes: u64,
    /// Chunks uploaded and verified by this process.
    pub uploaded: u64,
    /// Their bytes.
    pub uploaded_bytes: u64,
    /// Failed attempts (each retried).
    pub failures: u64,
    /// The last failure, while the uploader has not succeeded since.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    pending: VecDeque<(String, u64)>,
    busy: Option<(String, u64)>,
    stop: bool,
    /// A deletion failed: sweep at once.
    sweep_now: bool,
    stats: UploadStats,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    client: Arc<Client>,
    spool: PathBuf,
    sums_dir: PathBuf,
    retired: Arc<Retired>,
}

/// The uploading thread of a writer's lower layer.
#[derive(Debug)]
pub struct Uploader {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Uploader {
    /// Starts the thread; every chunk already in `spool` is queued (an earlier process's backlog),
    /// and the objects of the chunks `retired` names are deleted ([`crate::retire`]).
    pub fn start(
        client: Arc<Client>,
        spool: &Path,
        sums_dir: &Path,
        retired: Arc<Retired>,
    ) -> Result<Uploader, RemoteError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            client,
            spool: spool.to_path_buf(),
            sums_dir: sums_dir.to_path_buf(),
            retired,
        });
        let mut names = Vec::new();
        for entry in std::fs::read_dir(spool).map_err(|e| local(spool, "list", e))? {
            let entry = entry.map_err(|e| local(spool, "list", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if larch_store_names::is_chunk(&name) {
                names.push(name);
            }
        }
        names.sort_by_key(|name| larch_store_names::seq(name));
        let uploader = Uploader { shared: shared.clone(), thread: Mutex::new(None) };
        for name in names {
            uploader.enqueue(&name);
        }
        let thread = std::thread::Builder::new()
            .name("larch-upload".into())
            .spawn(move || run(&shared))
            .map_err(|e| local(spool, "start the upload thread", e))?;
        *uploader.thread.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(thread);
        Ok(uploader)
    }

    /// Queues the spooled chunk `name`.
    pub fn enqueue(&self, name: &str) {
        let len = std::fs::metadata(self.shared.spool.join(name)).map_or(0, |meta| meta.len());
        let mut state = self.shared.lock();
        if state.pending.iter().chain(state.busy.iter()).any(|(queued, _)| queued == name) {
            return;
        }
        state.pending.push_back((name.to_string(), len));
        state.stats.backlog += 1;
        state.stats.backlog_bytes += len;
        self.shared.wake.notify_all();
    }

    /// The journal of retired chunks.
    pub fn retired(&self) -> &Arc<Retired> {
        &self.shared.retired
    }

    /// Whether an attempt to upload `name` is running.
    pub fn is_uploading(&self, name: &str) -> bool {
        self.shared.lock().busy.as_ref().is_some_and(|(busy, _)| busy == name)
    }

    /// Wakes the thread to sweep the retired chunks' objects (a deletion failed).
    pub fn kick(&self) {
        self.shared.lock().sweep_now = true;
        self.shared.wake.notify_all();
    }

    /// Its counters.
    pub fn stats(&self) -> UploadStats {
        self.shared.lock().stats.clone()
    }

    /// Waits until the backlog is empty, at most `timeout`; whether it is.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while state.stats.backlog > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .wake
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        true
    }
}

impl Drop for Uploader {
    /// Stops the thread after its current attempt; what is left stays in the spool for the next
    /// open.
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut backoff = MIN_BACKOFF;
    // The sweep of retired chunks' objects: at start, then whenever the journal holds any, with
    // its own backoff after a failure.
    let (mut sweep_backoff, mut next_sweep) = (MIN_BACKOFF, Instant::now());
    loop {
        if !shared.retired.names().is_empty() && Instant::now() >= next_sweep {
            match sweep(&shared.retired, &shared.client) {
                Ok(_) => sweep_backoff = MIN_BACKOFF,
                Err(e) => {
                    tracing::warn!("deleting retired objects failed (retried in {sweep_backoff:?}): {e}");
                    next_sweep = Instant::now() + sweep_backoff;
                    sweep_backoff = (sweep_backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let job = {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                if std::mem::take(&mut state.sweep_now) {
                    next_sweep = Instant::now();
                }
                if let Some(next) = state.pending.pop_front() {
                    state.busy = Some(next.clone());
                    break Some(next);
                }
                if shared.retired.names().is_empty() {
                    state = shared.wake.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
                    continue;
                }
                // Retired objects wait: sweep when due (or at once when woken).
                let wait = next_sweep.saturating_duration_since(Instant::now());
                if wait.is_zero() {
                    break None;
                }
                state =
                    shared.wake.wait_timeout(state, wait).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
            }
        };
        let Some((name, len)) = job else { continue };
        let result = upload(shared, &name);
        let mut state = shared.lock();
        state.busy = None;
        match result {
            Ok(uploaded) => {
                backoff = MIN_BACKOFF;
                state.stats.backlog = state.stats.backlog.saturating_sub(1);
                state.stats.backlog_bytes = state.stats.backlog_bytes.saturating_sub(len);
                if uploaded {
                    state.stats.uploaded += 1;
                    state.stats.uploaded_bytes += len;
                }
                state.stats.last_error = None;
                shared.wake.notify_all();
            }
            Err(e) => {
                state.stats.failures += 1;
                tracing::warn!("upload of {name} failed (retried in {backoff:?}): {e}");
                state.stats.last_error = Some(e.to_string());
                state.pending.push_front((name, len));
                let _ = shared.wake.wait_timeout_while(state, backoff, |state| !state.stop);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Uploads the spooled chunk `name`, verifies it, writes its checksum object, removes the spooled
/// copy. `false` when there was nothing to upload (removed since it was queued, or retired: then
/// its objects are deleted).
fn upload(shared: &Shared, name: &str) -> Result<bool, RemoteError> {
    if shared.retired.contains(name) {
        shared.retired.delete(&shared.client, name)?;
        return Ok(false);
    }
    let path = shared.spool.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => Bytes::from(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(local(&path, "read", e)),
    };
    let sums = Sums::of(&bytes, BLOCK_BYTES);
    shared.client.put(name, bytes.clone())?;
    let back = shared.client.get(name)?;
    let corrupt = |reason: String| RemoteError::Corrupt {
        url: shared.client.url().to_string(),
        name: name.to_string(),
        reason,
    };
    if back.len() != bytes.len() {
        return Err(corrupt(format!("read back {} bytes after uploading {}", back.len(), bytes.len())));
    }
    if let Some(block) = (0..sums.blocks()).find(|&block| {
        let range = sums.range(block);
        !sums.check(block, back.get(range.start as usize..range.end as usize).unwrap_or_default())
    }) {
        return Err(corrupt(format!("block {block} read back differs from the uploaded bytes")));
    }
    // A GC may have retired the chunk meanwhile: its journal entry is made under the gate, so
    // either it is seen here (and what was uploaded is deleted), or the retirement comes after
    // the spooled copy is gone and deletes the objects itself.
    let gate = shared.retired.gate();
    if shared.retired.contains(name) {
        drop(gate);
        shared.retired.delete(&shared.client, name)?;
        return Ok(false);
    }
    let encoded = sums.encode();
    shared.client.put(&format!("{name}{SUMS_SUFFIX}"), Bytes::from(encoded.clone()))?;
    crate::dir::write_atomically(&shared.sums_dir, &format!("{name}{SUMS_SUFFIX}"), &encoded)?;
    std::fs::remove_file(&path).map_err(|e| local(&path, "remove the uploaded copy", e))?;
    std::fs::File::open(&shared.spool)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| local(&shared.spool, "sync", e))?;
    Ok(true)
}

/// Pack file names (`chunk.<seq>`, six digits or more, and a format-2 `pack`), as larch-store
/// names them (`docs/format.md`).
pub(crate) mod larch_store_names {
    /// The sequence number of a chunk file's name (`pack` sorts first).
    pub fn seq(name: &str) -> Option<u32> {
        if name == "pack" {
            return Some(0);
        }
        let digits = name.strip_prefix("chunk.")?;
        if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let seq: u32 = digits.parse().ok()?;
        (format!("chunk.{seq:06}") == name).then_some(seq)
    }

    /// Whether `name` is a pack file's name (what archive mode moves).
    pub fn is_chunk(name: &str) -> bool {
        seq(name).is_some()
    }
}
