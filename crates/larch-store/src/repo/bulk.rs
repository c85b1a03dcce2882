//! Writing one commit object by object, in bounded memory: the way in for imports (snapshots,
//! other stores) whose trees are streamed rather than held in memory.
//!
//! A [`BulkWriter`] appends full records (contents, flat directories, inodes) past the published end
//! of the pack, children first, as the caller gives them, and [`BulkWriter::commit`] writes the
//! commit record and publishes it exactly as [`Repo::commit`] does (steps 4–6 of `docs/store.md`).
//! Nothing is published before that: dropping the writer (or a failure) leaves the store as it was,
//! the records written so far in the unpublished tail. Encoded bytes are held in memory up to 8 MiB,
//! then written out, so memory does not depend on the size of the tree.
//!
//! The writer checks the format's shape rules (sorted entries, counts, depths) and every key it is
//! given: an [`ObjectKey`] of this store (as its methods return, or of a published record), below
//! the next record, where a record of the right kind starts (read back and its checksum checked:
//! from memory, from the unpublished tail, or through the pack reader, which refuses space a
//! garbage collection removed). It does not check the hashes it is given: the caller computes them
//! (a snapshot import recomputes every hash from the bytes before it writes), and `fsck` verifies
//! them.

use crate::commit::writer::{FLUSH_BYTES, WriteCounts};
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, EncodedTarget, MAX_BODY_LEN, PACK_HEADER_LEN, RecordKind};
use crate::io::storage::Storage;
use crate::repo::Repo;
use larch_core::schema::{self, INODE_MAX_DEPTH, INODE_VALUES_MAX, STABLE_HASH_MAX};
use larch_core::{CommitInfo, Hash, ObjectKey, StoreId};
use std::sync::Arc;

/// The target of an entry given to a [`BulkWriter`].
#[derive(Clone, Copy, Debug)]
pub enum BulkTarget<'a> {
    /// A sub-directory written earlier (a flat directory or a depth-0 inode tree).
    Node {
        /// Its hash.
        hash: Hash,
        /// Its key, as returned by the writer or of a published record of this store.
        key: ObjectKey,
    },
    /// A contents value stored inline in the directory record.
    Inline(&'a [u8]),
    /// A contents record written earlier.
    Contents {
        /// Its hash.
        hash: Hash,
        /// Its key.
        key: ObjectKey,
    },
}

/// The record kinds a directory entry's node, a commit's tree, may be: a flat directory or an
/// inode tree (the root of a large directory), or a patch of one (published records only).
const DIRECTORY_KINDS: &[RecordKind] =
    &[RecordKind::Flat, RecordKind::Tree, RecordKind::PatchEntries, RecordKind::PatchTree];
/// The record kinds an inode tree's child may be.
const INODE_KINDS: &[RecordKind] =
    &[RecordKind::Values, RecordKind::Tree, RecordKind::PatchEntries, RecordKind::PatchTree];

/// Appends the records of one commit, object by object (see the module documentation).
pub struct BulkWriter<'r> {
    repo: &'r mut Repo,
    pack: Arc<dyn Storage>,
    /// The identity of the store's keys (published records, below `base`).
    store: StoreId,
    /// The identity of this writer's keys (its records, from `base` on): drawn for each writer, so
    /// that a key of an earlier writer dropped before it published is told from one of this one.
    session: StoreId,
    /// The published pack end when the writer started: its first record goes there.
    base: u64,
    /// Bytes already written past `base` (before `buf`).
    flushed: u64,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    counts: WriteCounts,
}

impl std::fmt::Debug for BulkWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkWriter")
            .field("base", &self.base)
            .field("written", &self.bytes_written())
            .finish()
    }
}

impl Repo {
    /// A writer of one commit's objects, one by one, for imports (see [`BulkWriter`]).
    pub fn bulk_writer(&mut self) -> Result<BulkWriter<'_>> {
        let (base, pack) = self.bulk_start()?;
        let store = self.reader().store();
        let session = StoreId::fresh();
        self.bulk_sessions.insert(session, false);
        Ok(BulkWriter {
            repo: self,
            pack,
            store,
            session,
            base,
            flushed: 0,
            buf: Vec::with_capacity(FLUSH_BYTES + (1 << 16)),
            scratch: Vec::new(),
            counts: WriteCounts::default(),
        })
    }
}

fn invalid(what: impl Into<String>) -> StoreError {
    StoreError::BulkInput(what.into())
}

impl BulkWriter<'_> {
    /// The key the next record will have.
    pub fn next_key(&self) -> ObjectKey {
        ObjectKey::new(self.session, self.next_offset())
    }

    fn next_offset(&self) -> u64 {
        self.base + self.flushed + self.buf.len() as u64
    }

    /// Bytes of records written so far (in memory or past the published end).
    pub fn bytes_written(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    /// What was written so far, by kind.
    pub fn counts(&self) -> WriteCounts {
        self.counts
    }

    /// The offset of `key` after checking it: a key of this store, of an earlier record, where a
    /// record of one of the `kinds` starts (its framing and checksum hold), not in collected space.
    ///
    /// A key of the store names a published record (below `base`); a key of this writer, one of its
    /// own records; a key of an earlier writer of this handle, a record it published, or else
    /// [`StoreError::UnpublishedBulkKey`].
    fn check_key(&self, key: ObjectKey, kinds: &[RecordKind]) -> Result<u64> {
        let (offset, below) = if key.store() == self.store || key.store() == self.session {
            (key.offset(), if key.store() == self.session { self.next_offset() } else { self.base })
        } else {
            match self.repo.bulk_sessions.get(&key.store()) {
                Some(true) => (key.offset(), self.base),
                Some(false) => return Err(StoreError::UnpublishedBulkKey { key }),
                None => return Err(StoreError::OtherStoreKey { key, store: self.store }),
            }
        };
        if offset < PACK_HEADER_LEN || offset >= below || (key.store() == self.session && offset < self.base)
        {
            return Err(invalid(format!("key {key} is not an earlier record of this store")));
        }
        let kind = self.kind_at(offset).map_err(|e| match e {
            StoreError::Corrupt { reason, .. } => {
                invalid(format!("key {key} is not where a record starts ({reason})"))
            }
            other => other,
        })?;
        if !kinds.contains(&kind) {
            let expected: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
            return Err(invalid(format!(
                "key {key} holds a {} record, not a {}",
                kind.name(),
                expected.join(" or ")
            )));
        }
        Ok(offset)
    }

    /// The kind of the record at `offset`, its framing and checksum checked: a published one
    /// through the pack reader (which refuses collected space), one of this writer from memory or
    /// from the unpublished tail.
    fn kind_at(&self, offset: u64) -> Result<RecordKind> {
        if offset < self.base {
            return Ok(self.repo.reader().with_record(offset, |kind, _| Ok(kind))?.0);
        }
        let in_memory = self.base + self.flushed;
        let record: Vec<u8>;
        let bytes: &[u8] = if offset >= in_memory {
            self.buf.get((offset - in_memory) as usize..).unwrap_or_default()
        } else {
            let read = |at: u64, len: u64| -> Result<Vec<u8>> {
                let mut out = vec![0u8; usize::try_from(len).unwrap_or(0)];
                self.pack.read_at(at, &mut out).map_err(|e| StoreError::io(FileKind::Pack, at, "read", e))?;
                Ok(out)
            };
            let head = read(offset, (in_memory - offset).min(11))?;
            let total = codec::record_len(&head, offset)?.min(in_memory - offset);
            record = read(offset, total)?;
            &record
        };
        let corrupt = |reason: &str| StoreError::corrupt(FileKind::Pack, offset, reason);
        let total = codec::record_len(bytes.get(..bytes.len().min(11)).unwrap_or_default(), offset)?;
        let total = usize::try_from(total).map_err(|_| corrupt("huge record"))?;
        let record = bytes.get(..total).ok_or_else(|| corrupt("record runs past the records written"))?;
        let (data, crc) = record.split_at(total.saturating_sub(4));
        if crc32fast::hash(data) != u32::from_le_bytes(crc.try_into().unwrap_or_default()) {
            return Err(corrupt("record checksum mismatch"));
        }
        data.first()
            .and_then(|byte| RecordKind::from_byte(*byte))
            .ok_or_else(|| corrupt("unknown record kind"))
    }

    fn record(&mut self, kind: RecordKind, fill: impl FnOnce(&mut Vec<u8>, u64)) -> Result<ObjectKey> {
        let offset = self.next_offset();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch, offset);
        if scratch.len() as u64 > MAX_BODY_LEN {
            self.scratch = scratch;
            return Err(StoreError::TooLarge(format!(
                "a {} record of {} bytes",
                kind.name(),
                self.scratch.len()
            )));
        }
        codec::frame(&mut self.buf, kind, &scratch);
        self.scratch = scratch;
        if self.buf.len() >= FLUSH_BYTES {
            let at = self.base + self.flushed;
            self.pack.write_at(at, &self.buf).map_err(|e| StoreError::io(FileKind::Pack, at, "write", e))?;
            self.flushed += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(ObjectKey::new(self.session, offset))
    }

    /// Writes a contents record holding `bytes`; returns its key.
    pub fn contents(&mut self, bytes: &[u8]) -> Result<ObjectKey> {
        self.counts.contents += 1;
        self.record(RecordKind::Contents, |out, _| out.extend_from_slice(bytes))
    }

    /// Checks the entries and returns their targets with the keys' offsets.
    fn check_entries<'e>(
        &self,
        entries: &[(&'e [u8], BulkTarget<'e>)],
        max: usize,
    ) -> Result<Vec<(&'e [u8], EncodedTarget<'e>)>> {
        if entries.len() > max {
            return Err(invalid(format!("{} entries, at most {max}", entries.len())));
        }
        for pair in entries.windows(2) {
            if let [(a, _), (b, _)] = pair
                && a >= b
            {
                return Err(invalid("entries not sorted by name, or a name twice"));
            }
        }
        entries
            .iter()
            .map(|(name, target)| {
                Ok((
                    *name,
                    match *target {
                        BulkTarget::Node { hash, key } => {
                            EncodedTarget::Node(hash, self.check_key(key, DIRECTORY_KINDS)?)
                        }
                        BulkTarget::Contents { hash, key } => {
                            EncodedTarget::Contents(hash, self.check_key(key, &[RecordKind::Contents])?)
                        }
                        BulkTarget::Inline(bytes) => EncodedTarget::Inline(bytes),
                    },
                ))
            })
            .collect()
    }

    fn entries_record(
        &mut self,
        kind: RecordKind,
        entries: &[(&[u8], EncodedTarget<'_>)],
    ) -> Result<ObjectKey> {
        self.counts.inline +=
            entries.iter().filter(|(_, t)| matches!(t, EncodedTarget::Inline(_))).count() as u64;
        self.record(kind, |out, offset| {
            larch_varint::encode(out, entries.len() as u64);
            for (name, target) in entries {
                codec::encode_entry(out, offset, name, target);
            }
        })
    }

    /// Writes a flat directory (at most 256 entries, sorted by name); returns its key.
    pub fn flat(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        let entries = self.check_entries(entries, STABLE_HASH_MAX)?;
        self.counts.flat += 1;
        self.entries_record(RecordKind::Flat, &entries)
    }

    /// Writes an inode `Values` leaf (1 to 32 entries, sorted by name); returns its key.
    pub fn values(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        if entries.is_empty() {
            return Err(invalid("an empty inode Values leaf"));
        }
        let entries = self.check_entries(entries, INODE_VALUES_MAX)?;
        self.counts.values += 1;
        self.entries_record(RecordKind::Values, &entries)
    }

    /// Writes an inode `Tree` at `depth` holding `length` entries below, with its children
    /// `(bucket, hash, key)` by increasing bucket (1 to 32 of them); returns its key.
    pub fn tree(&mut self, depth: u8, length: u64, children: &[(u8, Hash, ObjectKey)]) -> Result<ObjectKey> {
        if depth >= INODE_MAX_DEPTH {
            return Err(invalid(format!("inode tree at depth {depth}")));
        }
        if children.is_empty() || children.len() > 32 {
            return Err(invalid(format!("inode tree with {} children", children.len())));
        }
        let mut previous = None;
        let mut checked = Vec::with_capacity(children.len());
        for (bucket, hash, key) in children {
            if *bucket >= 32 || previous.is_some_and(|p| p >= *bucket) {
                return Err(invalid("inode tree buckets not increasing below 32"));
            }
            previous = Some(*bucket);
            checked.push((*bucket, *hash, self.check_key(*key, INODE_KINDS)?));
        }
        self.counts.tree += 1;
        self.record(RecordKind::Tree, |out, offset| {
            codec::encode_tree_head(out, depth, length, checked.len());
            for (bucket, hash, key) in &checked {
                codec::encode_tree_child(out, offset, *bucket, hash, *key);
            }
        })
    }

    /// Writes the commit of the root directory `tree` (hash and key), with `parents` (each one in
    /// the store is linked, each other one recorded as absent, `docs/format.md` §3.6) and `info`,
    /// and publishes it, moving `branch` (if any); returns the commit hash. If the store already
    /// holds that commit, the records written are left unpublished and only the branch moves.
    pub fn commit(
        mut self,
        branch: Option<&str>,
        tree: (Hash, ObjectKey),
        parents: &[Hash],
        info: CommitInfo,
    ) -> Result<Hash> {
        let (tree_hash, tree_key) = tree;
        let tree_key = self.check_key(tree_key, DIRECTORY_KINDS)?;
        if parents.len() > codec::MAX_PARENTS {
            return Err(StoreError::TooLarge(format!(
                "{} parents (at most {} are allowed)",
                parents.len(),
                codec::MAX_PARENTS
            )));
        }
        let hash = schema::commit_hash(&tree_hash, parents, &info);
        if self.repo.contains(&hash) {
            if let Some(name) = branch
                && self.repo.branch(name) != Some(hash)
            {
                self.repo.set_branch(name, &hash)?;
            }
            return Ok(hash);
        }
        let parents: Vec<(Hash, Option<u64>)> =
            parents.iter().map(|parent| (*parent, self.repo.commit_offset_of(parent))).collect();
        let commit = codec::CommitData { tree_hash, tree_offset: tree_key, parents, info };
        let commit_offset = self
            .record(RecordKind::Commit, |out, offset| codec::encode_commit(out, offset, &commit))?
            .offset();
        let BulkWriter { repo, flushed, buf, counts, session, .. } = self;
        repo.bulk_finish(branch, flushed, &buf, hash, commit_offset, counts)?;
        repo.bulk_sessions.insert(session, true);
        Ok(hash)
    }
}
