//! Writing a one-commit irmin-pack store: the layout of the context inside an Octez snapshot, as
//! Irmin's `create_one_commit_store` writes it (`docs/octez.md`). Everything below the commit is
//! streamed from a larch tree, children first, into `store.1.prefix`; the other files are small
//! and written at the end. Every file is synced before [`write_one_commit`] returns.

use crate::bytes::adler32;
use crate::error::{IrminError, Result};
use larch_core::ocaml_hash::inode_index;
use larch_core::schema::{self, INODE_VALUES_MAX, Kind, write_leb128};
use larch_core::{CommitInfo, ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, ObjectSource};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The GC generation of an exported store: its prefix, mapping and suffix are `store.1.*`.
pub const GENERATION: u64 = 1;
/// Steps longer than this many bytes go to the dict (shorter ones are written inline), as Irmin
/// does.
pub const DICT_MIN_STEP: usize = 4;
/// Irmin's dict holds at most this many steps; later steps are written inline.
pub const DICT_CAPACITY: usize = 100_000;
/// The memo of written objects (hash → offset) is cleared past this many entries: a later
/// reference then writes the object again, which Irmin reads as well. Bounds the memory.
pub const MEMO_MAX: usize = 2_000_000;
/// Directories nested deeper than this are refused (the walk recurses once per level).
pub const MAX_EXPORT_NESTING: usize = 256;
/// Where the tree of a placeholder dangling-parent record points: the largest offset an OCaml
/// `int63` holds, past the end of any store, so nothing is found there — as the offsets of the
/// collected tree and parents in the records Irmin's GC keeps. A placeholder stands for a parent
/// known by hash only; its other fields are empty (no parents, date 0, empty author and
/// message). Irmin never decodes a `P` record's value: its GC copies the record's bytes, and
/// its reads treat the record as absent; what it needs is the record's hash and length, so that
/// it reads the commit's parent as a key with an offset. A parent given by hash instead is read
/// as an index key, and Irmin's GC refuses that in the commit it keeps
/// (`Commit_parent_key_is_indexed`, irmin-pack `gc_worker.ml`), which `create_one_commit_store`
/// (Octez's snapshot export) and any GC targeting the commit run into.
pub const PLACEHOLDER_OFFSET: u64 = (1 << 62) - 1;

/// A parent of the exported commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportParent {
    /// A parent whose record is known: written as a dangling-parent record (kind `P`) whose tree
    /// and parents are referred to by hash, as Irmin's GC keeps a collected commit's parent.
    Known {
        /// The parent's hash.
        hash: Hash,
        /// Its tree hash.
        tree_hash: Hash,
        /// Its own parents.
        parents: Vec<Hash>,
        /// Its date, author, message.
        info: CommitInfo,
    },
    /// A parent known by hash only (absent from the source store): written as a placeholder
    /// dangling-parent record (kind `P`) that carries the parent's hash and no known field (see
    /// [`PLACEHOLDER_OFFSET`]), so that the commit still refers to its parent by offset, as
    /// Irmin's GC requires.
    HashOnly(Hash),
}

impl ExportParent {
    /// The parent's hash.
    pub fn hash(&self) -> Hash {
        match self {
            ExportParent::Known { hash, .. } | ExportParent::HashOnly(hash) => *hash,
        }
    }
}

/// The commit to export: its fields as they enter its hash.
#[derive(Clone, Debug)]
pub struct ExportCommit {
    /// The commit hash (checked against the fields).
    pub hash: Hash,
    /// The parents, in commit order.
    pub parents: Vec<ExportParent>,
    /// Date, author, message.
    pub info: CommitInfo,
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Contents entries (`B`).
    pub contents: u64,
    /// Directory roots (`R`).
    pub roots: u64,
    /// Inner inodes (`O`).
    pub inodes: u64,
    /// Dangling-parent records (`P`).
    pub dangling_parents: u64,
    /// Steps in the dict.
    pub dict_steps: u64,
    /// Bytes of `store.1.prefix`.
    pub prefix_bytes: u64,
    /// Bytes of `store.dict`.
    pub dict_bytes: u64,
    /// Global offset of the commit's entry.
    pub commit_offset: u64,
    /// Length of the commit's entry.
    pub commit_length: u64,
}

/// Object hash → global offset.
type Memo = HashMap<Hash, u64, larch_core::hash::BuildPrefixHasher>;

/// A child as a directory entry refers to it: name, kind, offset and hash.
type Child = (Vec<u8>, Kind, u64, Hash);

/// A file being written, with its path for errors.
struct Out {
    file: BufWriter<File>,
    path: PathBuf,
    pos: u64,
}

impl Out {
    fn create(path: PathBuf) -> Result<Out> {
        let file = File::create_new(&path).map_err(|source| io(&path, 0, "create", source))?;
        Ok(Out { file: BufWriter::with_capacity(1 << 20, file), path, pos: 0 })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all(bytes).map_err(|source| io(&self.path, self.pos, "write", source))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and syncs the file.
    fn finish(self) -> Result<()> {
        let Out { file, path, pos } = self;
        let file = file.into_inner().map_err(|e| io(&path, pos, "write", e.into_error()))?;
        file.sync_all().map_err(|source| io(&path, pos, "sync", source))
    }
}

fn io(path: &Path, offset: u64, op: &'static str, source: std::io::Error) -> IrminError {
    IrminError::Io { file: path.to_path_buf(), offset, op, source }
}

/// The writer tells its progress callback the statistics so far every this many objects of the
/// tree written.
const PROGRESS_EVERY: u64 = 1 << 16;

struct Writer<'p> {
    source: Arc<dyn ObjectSource>,
    prefix: Out,
    dict_out: Out,
    dict: HashMap<Vec<u8>, u64>,
    roots: Memo,
    inodes: Memo,
    contents: Memo,
    entry: Vec<u8>,
    stats: ExportStats,
    /// Told the statistics so far (the objects, `prefix_bytes` and the dict's; the commit's fields
    /// stay 0) every [`PROGRESS_EVERY`] objects of the tree written.
    progress: &'p mut dyn FnMut(&ExportStats),
    /// Objects of the tree written (contents, directory roots, inner inodes).
    records: u64,
}

fn load(source: &dyn ObjectSource, node: &NodeRef) -> Result<Arc<Node>> {
    match node {
        NodeRef::Mem(node) => Ok(node.clone()),
        NodeRef::Stored { hash, key } => {
            source.load_node(*key, hash).map_err(|e| IrminError::Source { hash: *hash, source: Box::new(e) })
        }
    }
}

impl Writer<'_> {
    /// Appends `hash ‖ kind ‖ varint(len body) ‖ body` (the body is `self.entry`); returns its
    /// offset.
    fn emit(&mut self, hash: &Hash, kind: u8) -> Result<u64> {
        let offset = self.prefix.pos;
        let mut head = [0u8; 33 + 10];
        head[..32].copy_from_slice(hash.as_bytes());
        head[32] = kind;
        let mut len = Vec::with_capacity(10);
        write_leb128(&mut len, self.entry.len() as u64);
        head[33..33 + len.len()].copy_from_slice(&len);
        self.prefix.write(&head[..33 + len.len()])?;
        let body = std::mem::take(&mut self.entry);
        let result = self.prefix.write(&body);
        self.entry = body;
        self.entry.clear();
        result?;
        Ok(offset)
    }

    fn remember(map: &mut Memo, hash: Hash, offset: u64) {
        if map.len() >= MEMO_MAX {
            map.clear();
        }
        map.insert(hash, offset);
    }

    fn contents(&mut self, contents: &ContentsRef) -> Result<(u64, Hash)> {
        let hash = contents.hash();
        if let Some(offset) = self.contents.get(&hash) {
            return Ok((*offset, hash));
        }
        let bytes = match contents {
            ContentsRef::Mem(contents) => contents.clone(),
            ContentsRef::Inline(value) => value.to_contents(),
            ContentsRef::Stored { hash, key } => self
                .source
                .load_contents(*key, hash)
                .map_err(|e| IrminError::Source { hash: *hash, source: Box::new(e) })?,
        };
        self.entry.extend_from_slice(bytes.as_bytes());
        let offset = self.emit(&hash, b'B')?;
        self.stats.contents += 1;
        self.tick();
        Self::remember(&mut self.contents, hash, offset);
        Ok((offset, hash))
    }

    /// Appends a step: a dict id (steps of 4 bytes or more, while the dict has room) or inline.
    fn step(&mut self, name: &[u8], kind: Kind) -> Result<()> {
        let id = if name.len() >= DICT_MIN_STEP {
            match self.dict.get(name) {
                Some(id) => Some(*id),
                None if self.dict.len() < DICT_CAPACITY => {
                    let id = self.dict.len() as u64;
                    let len = u32::try_from(name.len())
                        .map_err(|_| IrminError::corrupt(&self.dict_out.path, 0, "step too long"))?;
                    self.dict_out.write(&len.to_be_bytes())?;
                    self.dict_out.write(name)?;
                    self.dict.insert(name.to_vec(), id);
                    Some(id)
                }
                None => None,
            }
        } else {
            None
        };
        // Value tags (Irmin's `Compress`): 0/2 dict step, contents/node; 6/8 inline step; all
        // with the child by offset.
        let node = kind == Kind::Node;
        match id {
            Some(id) => {
                write_leb128(&mut self.entry, if node { 2 } else { 0 });
                write_leb128(&mut self.entry, id);
            }
            None => {
                write_leb128(&mut self.entry, if node { 8 } else { 6 });
                write_leb128(&mut self.entry, name.len() as u64);
                self.entry.extend_from_slice(name);
            }
        }
        Ok(())
    }

    /// A `Values` inode of `children` (sorted by name).
    fn values(&mut self, children: &[Child], hash: &Hash, root: bool) -> Result<u64> {
        self.entry.push(0);
        write_leb128(&mut self.entry, children.len() as u64);
        for (name, kind, offset, _) in children {
            self.step(name, *kind)?;
            self.entry.extend_from_slice(&offset.to_be_bytes());
        }
        self.count(root);
        let offset = self.emit(hash, if root { b'R' } else { b'O' })?;
        self.tick();
        Ok(offset)
    }

    /// A `Tree` inode over `pointers` (bucket, child offset), ascending buckets.
    fn tree(
        &mut self,
        depth: u8,
        length: u64,
        pointers: &[(u8, u64)],
        hash: &Hash,
        root: bool,
    ) -> Result<u64> {
        self.entry.push(1);
        write_leb128(&mut self.entry, u64::from(depth));
        write_leb128(&mut self.entry, length);
        write_leb128(&mut self.entry, pointers.len() as u64);
        for (index, offset) in pointers {
            write_leb128(&mut self.entry, u64::from(*index));
            self.entry.push(0);
            self.entry.extend_from_slice(&offset.to_be_bytes());
        }
        self.count(root);
        let offset = self.emit(hash, if root { b'R' } else { b'O' })?;
        self.tick();
        Ok(offset)
    }

    /// Counts an object of the tree written (after its statistics): every [`PROGRESS_EVERY`]
    /// of them, tells the progress callback the statistics so far.
    fn tick(&mut self) {
        self.records += 1;
        if self.records.is_multiple_of(PROGRESS_EVERY) {
            self.stats.prefix_bytes = self.prefix.pos;
            self.stats.dict_bytes = self.dict_out.pos;
            self.stats.dict_steps = self.dict.len() as u64;
            (self.progress)(&self.stats);
        }
    }

    fn count(&mut self, root: bool) {
        if root {
            self.stats.roots += 1;
        } else {
            self.stats.inodes += 1;
        }
    }

    /// Irmin's inode shape of a directory of at most 256 entries, which larch keeps flat: a
    /// `Values` leaf up to 32 entries, else a `Tree` whose buckets split the names by
    /// [`inode_index`] at each depth. The root carries the directory's (flat) hash.
    fn small_dir(
        &mut self,
        children: Vec<Child>,
        depth: u8,
        root_hash: Option<&Hash>,
    ) -> Result<(u64, Hash)> {
        if children.len() <= INODE_VALUES_MAX {
            let hash = match root_hash {
                Some(hash) => *hash,
                None => schema::values_inode_hash(
                    children.len(),
                    children.iter().map(|(n, k, _, h)| (n.as_slice(), *k, *h)),
                ),
            };
            if root_hash.is_none()
                && let Some(offset) = self.inodes.get(&hash)
            {
                return Ok((*offset, hash));
            }
            let offset = self.values(&children, &hash, root_hash.is_some())?;
            if root_hash.is_none() {
                Self::remember(&mut self.inodes, hash, offset);
            }
            return Ok((offset, hash));
        }
        let length = children.len() as u64;
        let mut buckets: Vec<Vec<Child>> = vec![Vec::new(); 32];
        for child in children {
            let index = usize::from(inode_index(depth, &child.0));
            if let Some(bucket) = buckets.get_mut(index) {
                bucket.push(child);
            }
        }
        let mut pointers = Vec::new();
        let mut hashes = Vec::new();
        for (index, bucket) in buckets.into_iter().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            let (offset, hash) = self.small_dir(bucket, depth + 1, None)?;
            pointers.push((index as u8, offset));
            hashes.push((index as u8, hash));
        }
        let hash = match root_hash {
            Some(hash) => *hash,
            None => schema::tree_inode_hash(depth, length, hashes.len(), hashes.into_iter()),
        };
        if root_hash.is_none()
            && let Some(offset) = self.inodes.get(&hash)
        {
            return Ok((*offset, hash));
        }
        let offset = self.tree(depth, length, &pointers, &hash, root_hash.is_some())?;
        if root_hash.is_none() {
            Self::remember(&mut self.inodes, hash, offset);
        }
        Ok((offset, hash))
    }

    fn children(&mut self, entries: &[(larch_core::Name, Entry)], nesting: usize) -> Result<Vec<Child>> {
        let mut out = Vec::with_capacity(entries.len());
        for (name, entry) in entries {
            let (kind, (offset, hash)) = match entry {
                Entry::Node(node) => (Kind::Node, self.node(node, true, nesting + 1)?),
                Entry::Contents(contents) => (Kind::Contents, self.contents(contents)?),
            };
            out.push((name.as_bytes().to_vec(), kind, offset, hash));
        }
        // Irmin's `Values` hold their entries by ascending step bytes.
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Writes a directory (`root`) or an inner inode of a large directory; returns its offset and
    /// hash. `nesting` counts directory levels from the tree's root.
    fn node(&mut self, node: &NodeRef, root: bool, nesting: usize) -> Result<(u64, Hash)> {
        let hash = node.hash();
        let memo = if root { &self.roots } else { &self.inodes };
        if let Some(offset) = memo.get(&hash) {
            return Ok((*offset, hash));
        }
        if nesting > MAX_EXPORT_NESTING {
            return Err(IrminError::TooDeep { offset: self.prefix.pos, limit: MAX_EXPORT_NESTING });
        }
        let loaded = load(&*self.source, node)?;
        let offset = match loaded.body() {
            NodeBody::Flat(entries) => {
                let children = self.children(entries, nesting)?;
                self.small_dir(children, 0, Some(&hash))?.0
            }
            NodeBody::Values(entries) => {
                let children = self.children(entries, nesting)?;
                self.values(&children, &hash, root)?
            }
            NodeBody::Tree(tree) => {
                let mut pointers = Vec::with_capacity(tree.children.len());
                for (index, child) in &tree.children {
                    pointers.push((*index, self.node(child, false, nesting)?.0));
                }
                self.tree(tree.depth, tree.length, &pointers, &hash, root)?
            }
        };
        let memo = if root { &mut self.roots } else { &mut self.inodes };
        Self::remember(memo, hash, offset);
        Ok((offset, hash))
    }

    /// A commit body: node address, parents, date, author, message.
    fn commit_body(&mut self, node: Address, parents: &[Address], info: &CommitInfo) {
        address(&mut self.entry, node);
        write_leb128(&mut self.entry, parents.len() as u64);
        for parent in parents {
            address(&mut self.entry, *parent);
        }
        self.entry.extend_from_slice(&info.date.to_be_bytes());
        for text in [&info.author, &info.message] {
            write_leb128(&mut self.entry, text.len() as u64);
            self.entry.extend_from_slice(text.as_bytes());
        }
    }
}

#[derive(Clone, Copy)]
enum Address {
    Offset(u64),
    Hash(Hash),
}

fn address(out: &mut Vec<u8>, address: Address) {
    match address {
        Address::Offset(offset) => {
            out.push(0);
            out.extend_from_slice(&offset.to_be_bytes());
        }
        Address::Hash(hash) => {
            out.push(1);
            out.extend_from_slice(hash.as_bytes());
        }
    }
}

/// The control file (version 5, status `Gced`): the 8-byte version, then the payload with its
/// Adler-32 checksum.
pub fn control_bytes(dict_end: u64, suffix_start: u64, commit_offset: u64, mapping_end: u64) -> Vec<u8> {
    let mut control = b"00000005".to_vec();
    control.extend_from_slice(&dict_end.to_be_bytes());
    control.extend_from_slice(&0u64.to_be_bytes()); // appendable_chunk_poff: the suffix is empty
    control.push(0); // upgraded_from: None
    let checksum_at = control.len();
    control.extend_from_slice(&[0u8; 8]);
    write_leb128(&mut control, GENERATION); // chunk_start_idx
    write_leb128(&mut control, 1); // chunk_num
    write_leb128(&mut control, 0); // volume_num
    write_leb128(&mut control, 3); // status Gced
    control.extend_from_slice(&suffix_start.to_be_bytes());
    write_leb128(&mut control, GENERATION);
    control.extend_from_slice(&commit_offset.to_be_bytes()); // latest_gc_target_offset
    control.extend_from_slice(&0u64.to_be_bytes()); // suffix_dead_bytes
    control.push(0xff); // mapping_end_poff: Some
    control.extend_from_slice(&mapping_end.to_be_bytes());
    let checksum = u64::from(adler32(control.get(8..).unwrap_or_default()));
    if let Some(field) = control.get_mut(checksum_at..checksum_at + 8) {
        field.copy_from_slice(&checksum.to_be_bytes());
    }
    control
}

/// The index (mirage/index) with one entry, in its log file: the 32-byte header (valid bytes,
/// version `00000001`, generation 0, fan-out size 0) and `hash ‖ offset ‖ length ‖ kind`.
pub fn index_log_bytes(commit: &Hash, offset: u64, length: u32) -> Vec<u8> {
    let mut log = 45u64.to_be_bytes().to_vec();
    log.extend_from_slice(b"00000001");
    log.extend_from_slice(&[0u8; 16]);
    log.extend_from_slice(commit.as_bytes());
    log.extend_from_slice(&offset.to_be_bytes());
    log.extend_from_slice(&length.to_be_bytes());
    log.push(b'D');
    log
}

/// An empty branch store: no valid bytes, version `00000001`.
pub const EMPTY_BRANCHES: &[u8; 16] = b"\x00\x00\x00\x00\x00\x00\x00\x0000000001";

fn write_small(path: PathBuf, bytes: &[u8]) -> Result<()> {
    let mut out = Out::create(path)?;
    out.write(bytes)?;
    out.finish()
}

/// Syncs a directory (its entries).
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|file| file.sync_all()).map_err(|source| io(dir, 0, "sync directory", source))
}

/// Writes the one-commit irmin-pack store of `commit`, whose tree is `root` (read through
/// `source`), into the empty directory `dir`: `store.1.prefix` (the tree children first, then
/// a dangling-parent record for each parent, then the commit, which refers to its tree and
/// parents by offset), `store.1.mapping` (one record: the prefix holds
/// global offsets 0 to its size), an empty `store.1.suffix`, `store.dict` (the steps the tree
/// uses), `store.control`, `index/log` and `store.branches`. Every file and directory is synced.
/// The commit's hash is checked against its fields and the tree's hash first.
pub fn write_one_commit(
    source: Arc<dyn ObjectSource>,
    root: &NodeRef,
    commit: &ExportCommit,
    dir: &Path,
) -> Result<ExportStats> {
    write_one_commit_with_progress(source, root, commit, dir, &mut |_| {})
}

/// [`write_one_commit`], telling `progress` the statistics so far (the objects, the bytes of
/// `store.1.prefix` and `store.dict` written, the dict's steps; the commit's offset and length
/// stay 0 until the end) every 65,536 objects of the tree as it goes.
pub fn write_one_commit_with_progress(
    source: Arc<dyn ObjectSource>,
    root: &NodeRef,
    commit: &ExportCommit,
    dir: &Path,
    progress: &mut dyn FnMut(&ExportStats),
) -> Result<ExportStats> {
    let tree_hash = root.hash();
    let parent_hashes: Vec<Hash> = commit.parents.iter().map(ExportParent::hash).collect();
    let computed = schema::commit_hash(&tree_hash, &parent_hashes, &commit.info);
    if computed != commit.hash {
        return Err(IrminError::HashMismatch {
            what: "commit",
            file: dir.to_path_buf(),
            offset: 0,
            stored: commit.hash,
            computed,
        });
    }
    let prefix_path = dir.join(format!("store.{GENERATION}.prefix"));
    let mut writer = Writer {
        source,
        prefix: Out::create(prefix_path)?,
        dict_out: Out::create(dir.join("store.dict"))?,
        dict: HashMap::new(),
        roots: Memo::default(),
        inodes: Memo::default(),
        contents: Memo::default(),
        entry: Vec::with_capacity(4096),
        stats: ExportStats::default(),
        progress,
        records: 0,
    };
    let (tree_offset, written_hash) = writer.node(root, true, 0)?;
    if written_hash != tree_hash {
        return Err(IrminError::HashMismatch {
            what: "node",
            file: writer.prefix.path.clone(),
            offset: tree_offset,
            stored: tree_hash,
            computed: written_hash,
        });
    }
    let mut parents = Vec::with_capacity(commit.parents.len());
    for parent in &commit.parents {
        match parent {
            ExportParent::Known { hash, tree_hash, parents: grand, info } => {
                let computed = schema::commit_hash(tree_hash, grand, info);
                if computed != *hash {
                    return Err(IrminError::HashMismatch {
                        what: "commit",
                        file: writer.prefix.path.clone(),
                        offset: writer.prefix.pos,
                        stored: *hash,
                        computed,
                    });
                }
                let grand: Vec<Address> = grand.iter().map(|h| Address::Hash(*h)).collect();
                writer.commit_body(Address::Hash(*tree_hash), &grand, info);
                parents.push(Address::Offset(writer.emit(hash, b'P')?));
                writer.stats.dangling_parents += 1;
            }
            ExportParent::HashOnly(hash) => {
                let info = CommitInfo { date: 0, author: String::new(), message: String::new() };
                writer.commit_body(Address::Offset(PLACEHOLDER_OFFSET), &[], &info);
                parents.push(Address::Offset(writer.emit(hash, b'P')?));
                writer.stats.dangling_parents += 1;
            }
        }
    }
    writer.commit_body(Address::Offset(tree_offset), &parents, &commit.info);
    let commit_offset = writer.emit(&commit.hash, b'D')?;
    let prefix_bytes = writer.prefix.pos;
    let commit_length = prefix_bytes - commit_offset;
    let mut stats = writer.stats;
    stats.prefix_bytes = prefix_bytes;
    stats.dict_bytes = writer.dict_out.pos;
    stats.dict_steps = writer.dict.len() as u64;
    stats.commit_offset = commit_offset;
    stats.commit_length = commit_length;
    writer.prefix.finish()?;
    writer.dict_out.finish()?;

    let mut mapping = Vec::with_capacity(24);
    for field in [0u64, 0, prefix_bytes] {
        mapping.extend_from_slice(&field.to_le_bytes());
    }
    write_small(dir.join(format!("store.{GENERATION}.mapping")), &mapping)?;
    write_small(dir.join(format!("store.{GENERATION}.suffix")), &[])?;
    write_small(dir.join("store.branches"), EMPTY_BRANCHES)?;
    let index_dir = dir.join("index");
    std::fs::create_dir(&index_dir).map_err(|source| io(&index_dir, 0, "create directory", source))?;
    let length = u32::try_from(commit_length)
        .map_err(|_| IrminError::corrupt(dir.join("index/log"), 32, "commit entry longer than 4 GiB"))?;
    write_small(index_dir.join("log"), &index_log_bytes(&commit.hash, commit_offset, length))?;
    sync_dir(&index_dir)?;
    // The control file last: a store without it is not a store.
    let control = control_bytes(stats.dict_bytes, prefix_bytes, commit_offset, mapping.len() as u64);
    write_small(dir.join("store.control"), &control)?;
    sync_dir(dir)?;
    Ok(stats)
}
