//! Import: decodes the record stream, checks every rule of the format, recomputes every hash and
//! compares it with the snapshot's claims, and hands each verified object to a [`Sink`] (a store's
//! [`BulkWriter`], or nothing when only verifying). Memory is bounded by the window and the stack
//! limits, not by the tree.

use crate::error::{Location, Result, SnapshotError};
use crate::format::FrameReader;
use crate::records::*;
use crate::{Counts, Progress};
use larch_core::ocaml_hash::inode_index;
use larch_core::schema::{self, INODE_MAX_DEPTH, INODE_VALUES_MAX, Kind, STABLE_HASH_MAX};
use larch_core::{CommitInfo, Hash, ObjectKey, StoreId};
use larch_store::{BulkTarget, BulkWriter};
use std::io::Read;
use std::ops::Range;

/// Where verified objects go.
pub trait Sink {
    /// Stores a contents value; returns its key.
    fn contents(&mut self, bytes: &[u8]) -> Result<ObjectKey>;
    /// Stores a flat directory; returns its key.
    fn flat(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey>;
    /// Stores an inode `Values` leaf; returns its key.
    fn values(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey>;
    /// Stores an inode `Tree`; returns its key.
    fn tree(&mut self, depth: u8, length: u64, children: &[(u8, Hash, ObjectKey)]) -> Result<ObjectKey>;
}

impl Sink for BulkWriter<'_> {
    fn contents(&mut self, bytes: &[u8]) -> Result<ObjectKey> {
        Ok(BulkWriter::contents(self, bytes)?)
    }
    fn flat(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        Ok(BulkWriter::flat(self, entries)?)
    }
    fn values(&mut self, entries: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        Ok(BulkWriter::values(self, entries)?)
    }
    fn tree(&mut self, depth: u8, length: u64, children: &[(u8, Hash, ObjectKey)]) -> Result<ObjectKey> {
        Ok(BulkWriter::tree(self, depth, length, children)?)
    }
}

/// A sink that keeps nothing (verification only); keys are object numbers.
#[derive(Debug, Default)]
pub struct NullSink {
    next: u64,
    store: Option<StoreId>,
}

impl NullSink {
    fn key(&mut self) -> ObjectKey {
        self.next += 1;
        ObjectKey::new(*self.store.get_or_insert_with(StoreId::fresh), self.next)
    }
}

impl Sink for NullSink {
    fn contents(&mut self, _: &[u8]) -> Result<ObjectKey> {
        Ok(self.key())
    }
    fn flat(&mut self, _: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        Ok(self.key())
    }
    fn values(&mut self, _: &[(&[u8], BulkTarget<'_>)]) -> Result<ObjectKey> {
        Ok(self.key())
    }
    fn tree(&mut self, _: u8, _: u64, _: &[(u8, Hash, ObjectKey)]) -> Result<ObjectKey> {
        Ok(self.key())
    }
}

/// What a verified snapshot holds, apart from its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The commit hash (claimed and recomputed).
    pub commit: Hash,
    /// The root directory's hash and key in the sink.
    pub tree: (Hash, ObjectKey),
    /// The commit's parents, in commit order.
    pub parents: Vec<Hash>,
    /// The commit's date, author, message.
    pub info: CommitInfo,
    /// Records read, by kind.
    pub counts: Counts,
    /// Bytes of the record stream.
    pub stream_bytes: u64,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Frames read.
    pub frames: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Contents,
    /// A directory root: a flat directory or an inode `Tree` at depth 0.
    Dir,
    /// An inner inode at `depth` ≥ 1, whose entries all have these bucket indices at depths
    /// `0..depth`.
    Inode {
        depth: u8,
        path: [u8; INODE_MAX_DEPTH as usize],
    },
}

#[derive(Clone, Copy, Debug)]
struct Item {
    hash: Hash,
    key: ObjectKey,
    class: Class,
    /// Entries below (inodes), for the parent's length check.
    length: u64,
}

enum Target {
    Item(Item),
    Inline(Range<usize>, Hash),
}

struct ParsedEntry {
    tag: u8,
    name: Range<usize>,
    target: Target,
}

struct Decoder<'p, R: Read> {
    reader: FrameReader<R>,
    window_size: u64,
    window: Vec<Item>,
    count: u64,
    stack: Vec<Item>,
    at: Location,
    scratch: Vec<u8>,
    entries: Vec<ParsedEntry>,
    used: Vec<bool>,
    counts: Counts,
    progress: &'p mut dyn FnMut(Progress),
}

impl<R: Read> Decoder<'_, R> {
    fn invalid<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(SnapshotError::Invalid { at: self.at, reason: reason.into() })
    }

    fn truncated(&self) -> SnapshotError {
        let at = self.at;
        SnapshotError::Truncated {
            offset: self.reader.file_offset(),
            what: format!("{at}, which the stream ends before completing"),
        }
    }

    fn u8(&mut self) -> Result<u8> {
        match self.reader.byte()? {
            Some(byte) => Ok(byte),
            None => Err(self.truncated()),
        }
    }

    /// An unsigned LEB128, at most 10 bytes, in its shortest form.
    fn leb(&mut self) -> Result<u64> {
        let mut decoder = larch_varint::Decoder::new();
        loop {
            let byte = self.u8()?;
            match decoder.push(byte) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(larch_varint::Error::NonMinimal) => {
                    return self.invalid("integer not in its shortest form");
                }
                // A tenth byte of bit 63 alone that is not the last.
                Err(_) if byte & 0x7e == 0 => return self.invalid("integer longer than 10 bytes"),
                Err(_) => return self.invalid("integer overflows 64 bits"),
            }
        }
    }

    fn hash(&mut self) -> Result<Hash> {
        let start = self.scratch.len();
        self.take(32)?;
        let hash = Hash::from_slice(self.scratch.get(start..).unwrap_or_default());
        self.scratch.truncate(start);
        match hash {
            Ok(hash) => Ok(hash),
            Err(_) => self.invalid("bad hash"),
        }
    }

    /// Appends `len` stream bytes to the scratch buffer; returns their range.
    fn take(&mut self, len: u64) -> Result<Range<usize>> {
        let start = self.scratch.len();
        let len = usize::try_from(len).map_err(|_| self.truncated())?;
        if !self.reader.bytes(len, &mut self.scratch)? {
            return Err(self.truncated());
        }
        Ok(start..start + len)
    }

    fn bounded(&mut self, max: u64, what: &str) -> Result<u64> {
        let value = self.leb()?;
        if value > max {
            return self.invalid(format!("{what} {value}, at most {max}"));
        }
        Ok(value)
    }

    /// Reads a reference in a record whose stack segment has `k` items.
    fn reference(&mut self, k: usize) -> Result<Item> {
        let value = self.leb()?;
        if let Some(item) = usize::try_from(value).ok().filter(|v| *v < k) {
            let base = self.stack.len() - k;
            if let Some(used) = self.used.get_mut(item) {
                *used = true;
            }
            return match self.stack.get(base + item) {
                Some(item) => Ok(*item),
                None => self.invalid("stack reference out of range"),
            };
        }
        let distance = (value - k as u64).saturating_add(1);
        if distance > self.count.min(self.window_size) {
            return self.invalid(format!(
                "back-reference {distance} objects back, but {} are in the window",
                self.count.min(self.window_size)
            ));
        }
        let number = self.count - distance;
        match usize::try_from(number % self.window_size).ok().and_then(|slot| self.window.get(slot)) {
            Some(item) => Ok(*item),
            None => self.invalid("back-reference out of range"),
        }
    }

    /// Reads the segment size `k` of a record with at most `max` references.
    fn segment(&mut self, max: usize) -> Result<usize> {
        let k = self.leb()?;
        if k > max as u64 || k > self.stack.len() as u64 {
            return self
                .invalid(format!("consumes {k} stacked objects, {} available", self.stack.len().min(max)));
        }
        self.used.clear();
        self.used.resize(k as usize, false);
        Ok(k as usize)
    }

    /// Pops the segment of a record once its references are read: every item must have been used.
    fn pop_segment(&mut self, k: usize) -> Result<()> {
        if self.used.iter().any(|used| !used) {
            return self.invalid("a stacked object is not referred to by the record that consumes it");
        }
        self.stack.truncate(self.stack.len() - k);
        Ok(())
    }

    /// Numbers a verified object: it enters the stack and the window.
    fn push(&mut self, item: Item) -> Result<()> {
        if self.stack.len() >= STACK_MAX {
            return self.invalid(format!("more than {STACK_MAX} objects waiting for their parents"));
        }
        self.stack.push(item);
        let slot = usize::try_from(self.count % self.window_size).unwrap_or(0);
        if slot < self.window.len() {
            if let Some(entry) = self.window.get_mut(slot) {
                *entry = item;
            }
        } else {
            self.window.push(item);
        }
        self.count += 1;
        Ok(())
    }

    fn check(&self, claimed: Hash, computed: Hash) -> Result<()> {
        if claimed != computed {
            return Err(SnapshotError::HashMismatch { at: self.at, claimed, computed });
        }
        Ok(())
    }

    fn contents(&mut self, sink: &mut dyn Sink) -> Result<()> {
        let len = self.bounded(CONTENTS_MAX, "contents length")?;
        self.counts.hashed_bytes += 8 + len;
        let range = self.take(len)?;
        let bytes = self.scratch.get(range).unwrap_or_default();
        let hash = schema::contents_hash(bytes);
        let key = sink.contents(bytes)?;
        self.counts.contents += 1;
        self.counts.value_bytes += len;
        self.push(Item { hash, key, class: Class::Contents, length: 0 })
    }

    /// Reads `n` entries of a record whose segment has `k` items.
    fn read_entries(&mut self, n: u64, k: usize) -> Result<()> {
        self.entries.clear();
        for _ in 0..n {
            let byte = self.u8()?;
            let tag = byte & !ENTRY_HEX;
            let name_len = self.bounded(NAME_MAX, "name length")?;
            let name = if byte & ENTRY_HEX != 0 {
                if name_len == 0 {
                    return self.invalid("an empty hex-packed name");
                }
                let packed = self.take(name_len)?;
                let start = self.scratch.len();
                let mut scratch = std::mem::take(&mut self.scratch);
                let bytes = scratch.get(packed).unwrap_or_default().to_vec();
                unpack_hex(&bytes, &mut scratch);
                self.scratch = scratch;
                start..self.scratch.len()
            } else {
                self.take(name_len)?
            };
            let target = match tag {
                ENTRY_NODE | ENTRY_CONTENTS => {
                    let item = self.reference(k)?;
                    let expected = if tag == ENTRY_NODE { Class::Dir } else { Class::Contents };
                    if item.class != expected {
                        return self.invalid(format!("an entry of tag {tag} refers to a {:?}", item.class));
                    }
                    Target::Item(item)
                }
                ENTRY_INLINE => {
                    let len = self.bounded(INLINE_ACCEPTED_MAX, "inline contents length")?;
                    let range = self.take(len)?;
                    let hash = schema::contents_hash(self.scratch.get(range.clone()).unwrap_or_default());
                    self.counts.hashed_bytes += 8 + len;
                    self.counts.inline += 1;
                    self.counts.value_bytes += len;
                    Target::Inline(range, hash)
                }
                other => return self.invalid(format!("unknown entry tag {other}")),
            };
            self.counts.name_bytes += name.len() as u64;
            self.entries.push(ParsedEntry { tag, name, target });
        }
        let scratch = &self.scratch;
        let name = |entry: &ParsedEntry| scratch.get(entry.name.clone()).unwrap_or_default();
        if self.entries.windows(2).any(|pair| matches!(pair, [a, b] if name(a) >= name(b))) {
            return self.invalid("entries not sorted by name, or a name twice");
        }
        Ok(())
    }

    /// The schema's view of the parsed entries, and the store's.
    fn entries_hash(&mut self, values: bool) -> Hash {
        let names: u64 =
            self.entries.iter().map(|entry| leb_len(entry.name.len() as u64) + entry.name.len() as u64).sum();
        let count = self.entries.len() as u64;
        self.counts.hashed_bytes +=
            if values { 1 + leb_len(count) + names + 33 * count } else { 8 + names + 48 * count };
        let scratch = &self.scratch;
        let refs = self.entries.iter().map(|entry| {
            let name = scratch.get(entry.name.clone()).unwrap_or_default();
            match &entry.target {
                Target::Item(item) => {
                    (name, if entry.tag == ENTRY_NODE { Kind::Node } else { Kind::Contents }, item.hash)
                }
                Target::Inline(_, hash) => (name, Kind::Contents, *hash),
            }
        });
        if values {
            schema::values_inode_hash(self.entries.len(), refs)
        } else {
            schema::flat_node_hash(self.entries.len(), refs)
        }
    }

    fn store_entries(&self, sink: &mut dyn Sink, values: bool) -> Result<ObjectKey> {
        let scratch = &self.scratch;
        let list: Vec<(&[u8], BulkTarget<'_>)> = self
            .entries
            .iter()
            .map(|entry| {
                let name = scratch.get(entry.name.clone()).unwrap_or_default();
                let target = match &entry.target {
                    Target::Item(item) if entry.tag == ENTRY_NODE => {
                        BulkTarget::Node { hash: item.hash, key: item.key }
                    }
                    Target::Item(item) => BulkTarget::Contents { hash: item.hash, key: item.key },
                    Target::Inline(range, _) => {
                        BulkTarget::Inline(scratch.get(range.clone()).unwrap_or_default())
                    }
                };
                (name, target)
            })
            .collect();
        if values { sink.values(&list) } else { sink.flat(&list) }
    }

    fn flat(&mut self, sink: &mut dyn Sink) -> Result<()> {
        let claimed = self.hash()?;
        let k = self.segment(STABLE_HASH_MAX)?;
        let n = self.bounded(STABLE_HASH_MAX as u64, "directory entries")?;
        self.read_entries(n, k)?;
        self.pop_segment(k)?;
        let hash = self.entries_hash(false);
        self.check(claimed, hash)?;
        let key = self.store_entries(sink, false)?;
        self.counts.flat += 1;
        self.push(Item { hash, key, class: Class::Dir, length: n })
    }

    fn values(&mut self, sink: &mut dyn Sink) -> Result<()> {
        let claimed = self.hash()?;
        let depth = self.u8()?;
        if depth == 0 || depth > INODE_MAX_DEPTH {
            return self.invalid(format!("inode Values at depth {depth}, not 1..={INODE_MAX_DEPTH}"));
        }
        let k = self.segment(INODE_VALUES_MAX)?;
        let n = self.leb()?;
        if n == 0 || n > INODE_VALUES_MAX as u64 {
            return self.invalid(format!("inode Values of {n} entries, not 1..={INODE_VALUES_MAX}"));
        }
        self.read_entries(n, k)?;
        self.pop_segment(k)?;
        // Every entry must fall in the same bucket at every depth above this leaf.
        let mut path = [0u8; INODE_MAX_DEPTH as usize];
        for (index, entry) in self.entries.iter().enumerate() {
            let name = self.scratch.get(entry.name.clone()).unwrap_or_default();
            for level in 0..depth {
                let bucket = inode_index(level, name);
                let slot = path.get_mut(usize::from(level));
                match slot {
                    Some(slot) if index == 0 => *slot = bucket,
                    Some(slot) if *slot == bucket => {}
                    _ => {
                        return self
                            .invalid(format!("entry {index} is not in this leaf's bucket at depth {level}"));
                    }
                }
            }
        }
        let hash = self.entries_hash(true);
        self.check(claimed, hash)?;
        let key = self.store_entries(sink, true)?;
        self.counts.values += 1;
        self.push(Item { hash, key, class: Class::Inode { depth, path }, length: n })
    }

    fn tree(&mut self, sink: &mut dyn Sink) -> Result<()> {
        let claimed = self.hash()?;
        let depth = self.u8()?;
        if depth >= INODE_MAX_DEPTH {
            return self.invalid(format!("inode Tree at depth {depth}"));
        }
        let length = self.leb()?;
        let minimum = if depth == 0 { STABLE_HASH_MAX } else { INODE_VALUES_MAX } as u64;
        if length <= minimum {
            return self.invalid(format!(
                "inode Tree at depth {depth} of {length} entries (at most {minimum}: not canonical)"
            ));
        }
        let k = self.segment(32)?;
        let count = self.u8()?;
        if count == 0 || count > 32 {
            return self.invalid(format!("inode Tree with {count} children"));
        }
        let mut children: Vec<(u8, Hash, ObjectKey)> = Vec::with_capacity(usize::from(count));
        let mut total = 0u64;
        let mut own_path = [0u8; INODE_MAX_DEPTH as usize];
        let level = usize::from(depth);
        for index in 0..count {
            let bucket = self.u8()?;
            if bucket >= 32 || children.last().is_some_and(|(previous, _, _)| *previous >= bucket) {
                return self.invalid("inode Tree buckets not increasing below 32");
            }
            let item = self.reference(k)?;
            let Class::Inode { depth: child_depth, path } = item.class else {
                return self.invalid(format!("inode Tree child {bucket} is a {:?}", item.class));
            };
            if child_depth != depth + 1 || path.get(level) != Some(&bucket) {
                return self.invalid(format!(
                    "inode Tree child {bucket} is an inode of depth {child_depth} in another bucket"
                ));
            }
            if index == 0 {
                own_path = path;
            } else if path.get(..level) != own_path.get(..level) {
                return self.invalid(format!("inode Tree child {bucket} belongs to another inode"));
            }
            total = total.saturating_add(item.length);
            children.push((bucket, item.hash, item.key));
        }
        self.pop_segment(k)?;
        if total != length {
            return self.invalid(format!("inode Tree of length {length} holds {total} entries"));
        }
        for slot in own_path.iter_mut().skip(level) {
            *slot = 0;
        }
        self.counts.hashed_bytes += 3 + leb_len(length) + 33 * children.len() as u64;
        let hash =
            schema::tree_inode_hash(depth, length, children.len(), children.iter().map(|(b, h, _)| (*b, *h)));
        self.check(claimed, hash)?;
        let key = sink.tree(depth, length, &children)?;
        self.counts.tree += 1;
        let class = if depth == 0 { Class::Dir } else { Class::Inode { depth, path: own_path } };
        self.push(Item { hash, key, class, length })
    }

    fn text(&mut self) -> Result<String> {
        let len = self.bounded(TEXT_MAX, "text length")?;
        let range = self.take(len)?;
        let bytes = self.scratch.get(range).unwrap_or_default().to_vec();
        match String::from_utf8(bytes) {
            Ok(text) => Ok(text),
            Err(_) => self.invalid("commit text is not UTF-8"),
        }
    }

    fn commit(&mut self) -> Result<(Hash, Item, Vec<Hash>, CommitInfo)> {
        let claimed = self.hash()?;
        let k = self.segment(1)?;
        let root = self.reference(k)?;
        if root.class != Class::Dir {
            return self.invalid(format!("the commit's root is a {:?}", root.class));
        }
        self.pop_segment(k)?;
        let count = self.bounded(PARENTS_MAX, "parents")?;
        let mut parents = Vec::new();
        for _ in 0..count {
            parents.push(self.hash()?);
        }
        let range = self.take(8)?;
        let date =
            i64::from_le_bytes(self.scratch.get(range).unwrap_or_default().try_into().unwrap_or([0; 8]));
        let author = self.text()?;
        let message = self.text()?;
        let info = CommitInfo { date, author, message };
        self.counts.hashed_bytes +=
            8 + 32 + 8 + 40 * parents.len() as u64 + 8 + 16 + (info.author.len() + info.message.len()) as u64;
        let hash = schema::commit_hash(&root.hash, &parents, &info);
        self.check(claimed, hash)?;
        Ok((hash, root, parents, info))
    }

    fn run(&mut self, sink: &mut dyn Sink) -> Result<Decoded> {
        let mut commit = None;
        loop {
            self.scratch.clear();
            self.at = Location {
                record: self.counts.records,
                kind: "record",
                stream_offset: self.reader.stream_offset(),
                frame_offset: self.reader.frame_offset(),
            };
            let Some(tag) = self.reader.byte()? else {
                return Err(self.truncated());
            };
            self.at.kind = tag_name(tag);
            self.at.frame_offset = self.reader.frame_offset();
            match (tag, &commit) {
                (TAG_CONTENTS, None) => self.contents(sink)?,
                (TAG_FLAT, None) => self.flat(sink)?,
                (TAG_VALUES, None) => self.values(sink)?,
                (TAG_TREE, None) => self.tree(sink)?,
                (TAG_COMMIT, None) => commit = Some(self.commit()?),
                (TAG_END, Some(_)) => break,
                (TAG_END, None) => return self.invalid("the stream ends without a commit"),
                (_, Some(_)) => return self.invalid("a record after the commit"),
                (other, None) => return self.invalid(format!("unknown record tag {other}")),
            }
            self.counts.records += 1;
            if self.counts.records.is_multiple_of(4096) {
                (self.progress)(Progress {
                    objects: self.count,
                    stream_bytes: self.reader.stream_offset(),
                    file_bytes: self.reader.file_offset(),
                });
            }
        }
        let objects = self.leb()?;
        if objects != self.count {
            return self
                .invalid(format!("the end record counts {objects} objects, the stream has {}", self.count));
        }
        if !self.stack.is_empty() {
            return self.invalid(format!("{} objects are referred to by no record", self.stack.len()));
        }
        if !self.reader.at_end()? {
            return self.invalid("bytes after the end record");
        }
        self.counts.records += 1;
        let Some((hash, root, parents, info)) = commit else {
            return self.invalid("the stream ends without a commit");
        };
        let (stream_bytes, file_bytes) = (self.reader.stream_offset(), self.reader.file_offset());
        (self.progress)(Progress { objects: self.count, stream_bytes, file_bytes });
        Ok(Decoded {
            commit: hash,
            tree: (root.hash, root.key),
            parents,
            info,
            counts: self.counts,
            stream_bytes,
            file_bytes,
            frames: self.reader.frames,
        })
    }
}

/// Bytes of the LEB128 encoding of `value`.
fn leb_len(value: u64) -> u64 {
    larch_varint::encoded_len(value) as u64
}

/// Decodes and verifies the snapshot read from `input`, handing every verified object to `sink`.
/// Nothing about the commit is published: the caller commits `Decoded::tree` if it wants to.
pub fn decode<R: Read>(input: R, sink: &mut dyn Sink, progress: &mut dyn FnMut(Progress)) -> Result<Decoded> {
    let reader = FrameReader::new(input)?;
    let window_size = u64::from(reader.window());
    let mut decoder = Decoder {
        reader,
        window_size,
        window: Vec::new(),
        count: 0,
        stack: Vec::new(),
        at: Location { record: 0, kind: "record", stream_offset: 0, frame_offset: 0 },
        scratch: Vec::new(),
        entries: Vec::new(),
        used: Vec::new(),
        counts: Counts::default(),
        progress,
    };
    decoder.run(sink)
}
