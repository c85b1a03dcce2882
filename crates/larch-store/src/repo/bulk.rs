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
//! The writer checks the format's shape rules (sorted entries, counts, depths, keys of earlier
//! records) but not the hashes it is given: the caller computes them (a snapshot import recomputes
//! every hash from the bytes before it writes), and `fsck` verifies them.

use crate::commit::writer::{FLUSH_BYTES, WriteCounts};
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, EncodedTarget, PACK_HEADER_LEN, RecordKind};
use crate::io::storage::Storage;
use crate::repo::Repo;
use larch_core::schema::{self, INODE_MAX_DEPTH, INODE_VALUES_MAX, STABLE_HASH_MAX};
use larch_core::{CommitInfo, Hash};
use std::sync::Arc;

/// The target of an entry given to a [`BulkWriter`].
#[derive(Clone, Copy, Debug)]
pub enum BulkTarget<'a> {
    /// A sub-directory written earlier (a flat directory or a depth-0 inode tree).
    Node {
        /// Its hash.
        hash: Hash,
        /// Its key (pack offset), as returned by the writer or of a published record.
        key: u64,
    },
    /// A contents value stored inline in the directory record.
    Inline(&'a [u8]),
    /// A contents record written earlier.
    Contents {
        /// Its hash.
        hash: Hash,
        /// Its key.
        key: u64,
    },
}

/// Appends the records of one commit, object by object (see the module documentation).
pub struct BulkWriter<'r> {
    repo: &'r mut Repo,
    pack: Arc<dyn Storage>,
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
        Ok(BulkWriter {
            repo: self,
            pack,
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
    /// The pack offset the next record will have.
    pub fn next_key(&self) -> u64 {
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

    fn check_key(&self, key: u64) -> Result<()> {
        if key < PACK_HEADER_LEN || key >= self.next_key() {
            return Err(invalid(format!("key {key} is not an earlier record of this store")));
        }
        Ok(())
    }

    fn record(&mut self, kind: RecordKind, fill: impl FnOnce(&mut Vec<u8>, u64)) -> Result<u64> {
        let offset = self.next_key();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch, offset);
        if scratch.len() as u64 > codec::MAX_BODY_LEN {
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
        Ok(offset)
    }

    /// Writes a contents record holding `bytes`; returns its key.
    pub fn contents(&mut self, bytes: &[u8]) -> Result<u64> {
        self.counts.contents += 1;
        self.record(RecordKind::Contents, |out, _| out.extend_from_slice(bytes))
    }

    fn check_entries(&self, entries: &[(&[u8], BulkTarget<'_>)], max: usize) -> Result<()> {
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
        for (_, target) in entries {
            match target {
                BulkTarget::Node { key, .. } | BulkTarget::Contents { key, .. } => self.check_key(*key)?,
                BulkTarget::Inline(_) => {}
            }
        }
        Ok(())
    }

    fn entries_record(&mut self, kind: RecordKind, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<u64> {
        self.counts.inline +=
            entries.iter().filter(|(_, t)| matches!(t, BulkTarget::Inline(_))).count() as u64;
        self.record(kind, |out, offset| {
            larch_varint::encode(out, entries.len() as u64);
            for (name, target) in entries {
                let target = match *target {
                    BulkTarget::Node { hash, key } => EncodedTarget::Node(hash, key),
                    BulkTarget::Inline(bytes) => EncodedTarget::Inline(bytes),
                    BulkTarget::Contents { hash, key } => EncodedTarget::Contents(hash, key),
                };
                codec::encode_entry(out, offset, name, &target);
            }
        })
    }

    /// Writes a flat directory (at most 256 entries, sorted by name); returns its key.
    pub fn flat(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<u64> {
        self.check_entries(entries, STABLE_HASH_MAX)?;
        self.counts.flat += 1;
        self.entries_record(RecordKind::Flat, entries)
    }

    /// Writes an inode `Values` leaf (1 to 32 entries, sorted by name); returns its key.
    pub fn values(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<u64> {
        if entries.is_empty() {
            return Err(invalid("an empty inode Values leaf"));
        }
        self.check_entries(entries, INODE_VALUES_MAX)?;
        self.counts.values += 1;
        self.entries_record(RecordKind::Values, entries)
    }

    /// Writes an inode `Tree` at `depth` holding `length` entries below, with its children
    /// `(bucket, hash, key)` by increasing bucket (1 to 32 of them); returns its key.
    pub fn tree(&mut self, depth: u8, length: u64, children: &[(u8, Hash, u64)]) -> Result<u64> {
        if depth >= INODE_MAX_DEPTH {
            return Err(invalid(format!("inode tree at depth {depth}")));
        }
        if children.is_empty() || children.len() > 32 {
            return Err(invalid(format!("inode tree with {} children", children.len())));
        }
        let mut previous = None;
        for (bucket, _, key) in children {
            if *bucket >= 32 || previous.is_some_and(|p| p >= *bucket) {
                return Err(invalid("inode tree buckets not increasing below 32"));
            }
            previous = Some(*bucket);
            self.check_key(*key)?;
        }
        self.counts.tree += 1;
        self.record(RecordKind::Tree, |out, offset| {
            codec::encode_tree_head(out, depth, length, children.len());
            for (bucket, hash, key) in children {
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
        tree: (Hash, u64),
        parents: &[Hash],
        info: CommitInfo,
    ) -> Result<Hash> {
        let (tree_hash, tree_key) = tree;
        self.check_key(tree_key)?;
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
        let commit_offset =
            self.record(RecordKind::Commit, |out, offset| codec::encode_commit(out, offset, &commit))?;
        let BulkWriter { repo, flushed, buf, counts, .. } = self;
        repo.bulk_finish(branch, flushed, &buf, hash, commit_offset, counts)?;
        Ok(hash)
    }
}
