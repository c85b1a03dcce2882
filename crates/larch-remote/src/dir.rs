//! [`RemoteDirectory`]: archive mode's lower directory in object storage, as larch-store's
//! [`Directory`]. Chunks moved there land in a local spool (durable before the store directory's
//! copy is unlinked) and are uploaded in the background ([`crate::upload`]); reads of uploaded
//! chunks are range requests of whole blocks, verified against the chunk's checksum object and
//! kept in the bounded disk cache ([`crate::cache`]).

use crate::cache::BlockCache;
use crate::client::Client;
use crate::error::{RemoteError, local};
use crate::sums::{SUMS_SUFFIX, Sums};
use crate::upload::{Uploader, larch_store_names};
use larch_store::{Directory, Storage};
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), RemoteError> {
    let tmp = dir.join(format!("{name}.tmp.{}", std::process::id()));
    let mut file = std::fs::File::create(&tmp).map_err(|e| local(&tmp, "create", e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| local(&tmp, "write", e))?;
    // Synced before the rename: a power loss leaves the old file or the whole new one.
    file.sync_data().map_err(|e| local(&tmp, "sync", e))?;
    std::fs::rename(&tmp, dir.join(name)).map_err(|e| local(&tmp, "rename", e))
}

fn read_only() -> io::Error {
    io::Error::new(
        ErrorKind::PermissionDenied,
        "the object-storage layer is open read-only: a reader never writes the bucket",
    )
}

/// A local file (a spooled chunk).
#[derive(Debug)]
struct LocalFile {
    file: File,
    writable: bool,
}

impl Storage for LocalFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.writable {
            return Err(read_only());
        }
        self.file.write_all_at(data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// An uploaded chunk, read by blocks.
#[derive(Debug)]
struct RemoteFile {
    name: String,
    sums: Sums,
    client: Arc<Client>,
    cache: Arc<BlockCache>,
}

impl RemoteFile {
    /// Block `block`, fetched with one range request and verified.
    fn fetch(&self, block: u64) -> io::Result<bytes::Bytes> {
        let range = self.sums.range(block);
        let bytes = self.client.get_range(&self.name, range.clone()).map_err(RemoteError::into_io)?;
        if !self.sums.check(block, &bytes) {
            return Err(RemoteError::Corrupt {
                url: self.client.url().to_string(),
                name: self.name.clone(),
                reason: format!(
                    "bytes {}..{} (block {block}) do not match the checksum recorded at upload",
                    range.start, range.end
                ),
            }
            .into_io());
        }
        self.cache.insert(&self.name, block, &bytes);
        Ok(bytes)
    }
}

impl Storage for RemoteFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.sums.len)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end =
            offset.checked_add(buf.len() as u64).filter(|end| *end <= self.sums.len).ok_or_else(|| {
                io::Error::new(ErrorKind::UnexpectedEof, format!("{}: read past the end", self.name))
            })?;
        // The chunk's header (read by every open of the store) comes with its checksums.
        if let Some(head) = self.sums.head.get(offset as usize..end as usize) {
            buf.copy_from_slice(head);
            return Ok(());
        }
        let block_size = u64::from(self.sums.block);
        let mut at = offset;
        while at < end {
            let block = at / block_size;
            let start = block * block_size;
            let take = (end.min(start + block_size) - at) as usize;
            let done = (at - offset) as usize;
            let piece = buf.get_mut(done..done + take).unwrap_or_default();
            if !self.cache.read(&self.name, block, at - start, piece, |bytes| self.sums.check(block, bytes)) {
                let bytes = self.fetch(block)?;
                let from = (at - start) as usize;
                piece.copy_from_slice(bytes.get(from..from + take).unwrap_or_default());
            }
            at += take as u64;
        }
        Ok(())
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(read_only())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Archive mode's lower directory in object storage (see the module's documentation).
#[derive(Debug)]
pub struct RemoteDirectory {
    client: Arc<Client>,
    cache: Arc<BlockCache>,
    spool: PathBuf,
    sums_dir: PathBuf,
    uploader: Option<Arc<Uploader>>,
    /// Checksums of chunks already opened (small: 32 bytes per 256 KiB).
    sums: Mutex<std::collections::HashMap<String, Arc<Sums>>>,
}

impl RemoteDirectory {
    /// The directory over `client`, with its spool and checksum copies in `spool` and `sums_dir`
    /// (created when absent); `uploader` on a writer only.
    pub(crate) fn new(
        client: Arc<Client>,
        cache: Arc<BlockCache>,
        spool: PathBuf,
        sums_dir: PathBuf,
        uploader: Option<Arc<Uploader>>,
    ) -> RemoteDirectory {
        RemoteDirectory { client, cache, spool, sums_dir, uploader, sums: Mutex::new(Default::default()) }
    }

    /// The client (read replicas' publisher and follower, `publish.rs`, `replica.rs`).
    pub(crate) fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The spool and the local copies of checksum objects.
    pub(crate) fn local_dirs(&self) -> (&Path, &Path) {
        (&self.spool, &self.sums_dir)
    }

    fn writable(&self) -> io::Result<&Arc<Uploader>> {
        self.uploader.as_ref().ok_or_else(read_only)
    }

    /// The checksums of the uploaded chunk `name`: from memory, the local copy, or its object.
    fn sums_of(&self, name: &str) -> Result<Arc<Sums>, RemoteError> {
        if let Some(sums) = self.known_sums(name) {
            return Ok(sums);
        }
        let object = format!("{name}{SUMS_SUFFIX}");
        let bytes = self.client.get(&object)?;
        self.accept_sums(name, &bytes)
    }

    /// The checksums of `name` from memory or from a well-formed local copy (then kept in memory).
    fn known_sums(&self, name: &str) -> Option<Arc<Sums>> {
        if let Some(sums) = self.sums.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Some(sums.clone());
        }
        let object = format!("{name}{SUMS_SUFFIX}");
        let sums = Arc::new(std::fs::read(self.sums_dir.join(&object)).ok().and_then(|b| Sums::decode(&b))?);
        self.sums.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), sums.clone());
        Some(sums)
    }

    /// The checksum object of `name` fetched as `bytes`: decoded (its own digest checked, else
    /// refused as corrupt), copied into the cache directory and kept in memory.
    fn accept_sums(&self, name: &str, bytes: &[u8]) -> Result<Arc<Sums>, RemoteError> {
        let object = format!("{name}{SUMS_SUFFIX}");
        let sums = Arc::new(Sums::decode(bytes).ok_or_else(|| RemoteError::Corrupt {
            url: self.client.url().to_string(),
            name: object.clone(),
            reason: "not a well-formed checksum object".to_string(),
        })?);
        let _ = write_atomically(&self.sums_dir, &object, bytes);
        self.sums.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), sums.clone());
        Ok(sums)
    }

    /// Fetches the checksum objects of the uploaded chunks `names` that neither memory nor the
    /// cache directory holds, at most `in_flight` requests at once, and keeps them (a read
    /// replica's open: one request per chunk, concurrent rather than one after the other). Each
    /// is verified as [`Directory::open`] verifies it; the first failure is returned, naming its
    /// object. Returns the number of objects fetched.
    pub(crate) fn prefetch_sums(&self, names: &[String], in_flight: usize) -> Result<usize, RemoteError> {
        let missing: Vec<&String> = names.iter().filter(|name| self.known_sums(name).is_none()).collect();
        let objects: Vec<String> = missing.iter().map(|name| format!("{name}{SUMS_SUFFIX}")).collect();
        let fetched = self.client.get_many(&objects, in_flight)?;
        for (name, bytes) in missing.iter().zip(&fetched) {
            self.accept_sums(name, bytes)?;
        }
        Ok(fetched.len())
    }

    fn spooled(&self, name: &str) -> PathBuf {
        self.spool.join(name)
    }
}

impl Directory for RemoteDirectory {
    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        self.writable()?;
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(true).open(self.spooled(name))?;
        Ok(Arc::new(LocalFile { file, writable: true }))
    }

    fn open(&self, name: &str, writable: bool) -> io::Result<Arc<dyn Storage>> {
        if writable {
            self.writable()?;
        }
        match OpenOptions::new().read(true).write(writable).open(self.spooled(name)) {
            Ok(file) => return Ok(Arc::new(LocalFile { file, writable })),
            Err(e) if e.kind() == ErrorKind::NotFound && !writable => {}
            Err(e) => return Err(e),
        }
        let sums = self.sums_of(name).map_err(RemoteError::into_io)?;
        Ok(Arc::new(RemoteFile {
            name: name.to_string(),
            sums: (*sums).clone(),
            client: self.client.clone(),
            cache: self.cache.clone(),
        }))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        match std::fs::read_dir(&self.spool) {
            Ok(entries) => {
                for entry in entries {
                    names.push(entry?.file_name().to_string_lossy().into_owned());
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // An object without its checksum object is an upload cut short: never listed. When the
        // object store does not answer, the chunks whose checksum object this cache holds (the
        // writer's uploads, the chunks readers opened) stand for the listing, so that a writer
        // opens, commits and archives through an outage.
        let objects = match self.client.list() {
            Ok(objects) => objects.into_iter().map(|(name, _)| name).collect(),
            Err(e) => {
                tracing::warn!("listing the object store failed, listing the local cache instead: {e}");
                let mut local = Vec::new();
                for entry in std::fs::read_dir(&self.sums_dir)? {
                    local.push(entry?.file_name().to_string_lossy().into_owned());
                }
                local
            }
        };
        for object in objects {
            if let Some(name) =
                object.strip_suffix(SUMS_SUFFIX).filter(|name| larch_store_names::is_chunk(name))
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        names.dedup();
        // Chunks retired by a GC whose objects are not deleted yet are gone for the store.
        if let Some(uploader) = &self.uploader {
            let retired = uploader.retired();
            names.retain(|name| !retired.contains(name));
        }
        Ok(names)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let uploader = self.writable()?;
        if !larch_store_names::is_chunk(name) {
            // A partial copy (`.tmp`): in the spool only.
            return std::fs::remove_file(self.spooled(name));
        }
        // Retired durably first, under the uploader's gate (`crate::retire`): an upload in
        // flight deletes what it uploaded instead of completing it.
        let uploading = {
            let _gate = uploader.retired().gate();
            uploader.retired().mark(name).map_err(RemoteError::into_io)?;
            match std::fs::remove_file(self.spooled(name)) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            uploader.is_uploading(name)
        };
        self.sums.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let _ = std::fs::remove_file(self.sums_dir.join(format!("{name}{SUMS_SUFFIX}")));
        self.cache.forget(name)?;
        // The objects: deleted by the upload thread when it is uploading this chunk (after its
        // attempt, which may still write the object); a failed deletion stays in the journal,
        // swept by the upload thread.
        if uploading {
            uploader.kick();
        } else if let Err(e) = uploader.retired().delete(&self.client, name) {
            tracing::warn!("deleting the objects of the retired {name} failed (swept later): {e}");
            uploader.kick();
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        File::open(&self.spool)?.sync_all()
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let uploader = self.writable()?;
        std::fs::rename(self.spooled(from), self.spooled(to))?;
        if larch_store_names::is_chunk(to) {
            uploader.enqueue(to);
        }
        Ok(())
    }

    fn file_len(&self, name: &str) -> io::Result<u64> {
        match std::fs::metadata(self.spooled(name)) {
            Ok(meta) => Ok(meta.len()),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Ok(self.sums_of(name).map_err(RemoteError::into_io)?.len)
            }
            Err(e) => Err(e),
        }
    }
}
