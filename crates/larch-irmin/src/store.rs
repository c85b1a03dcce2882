//! [`IrminStore`]: an irmin-pack store opened read-only, its commits, and the verified decoding of
//! its objects into larch nodes and contents.

use crate::control::Control;
use crate::dict::Dict;
use crate::entry::{self, Address, Decoded, InodeValue, Target, Value};
use crate::error::{IrminError, Result};
use crate::index::{Index, IndexEntry};
use crate::layout::{DataFile, Layout};
use larch_core::schema::{self, STABLE_HASH_MAX};
use larch_core::{
    CommitInfo, Contents, ContentsRef, Entry, Hash, InodeTree, Name, Node, NodeBody, NodeRef, ObjectKey,
    StoreId,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A commit of the Irmin store, decoded and verified: its hash is the one larch computes from its
/// tree hash, parents and info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrminCommit {
    /// The commit hash.
    pub hash: Hash,
    /// Global pack offset of the commit entry.
    pub offset: u64,
    /// Hash of the root tree.
    pub tree_hash: Hash,
    /// Global pack offset of the root tree.
    pub tree_offset: u64,
    /// Parent commit hashes, in stored order.
    pub parents: Vec<Hash>,
    /// Date, author and message.
    pub info: CommitInfo,
}

/// Counters of what was read from the Irmin store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Objects decoded (nodes, inodes, contents, commits).
    pub objects: u64,
    /// Bytes read from the pack files.
    pub bytes: u64,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    control: Control,
    layout: Layout,
    dict: Dict,
    index: Index,
    objects: AtomicU64,
    /// This handle's identity in the keys of the lazy references it hands out.
    id: StoreId,
}

/// An irmin-pack store (Irmin 3.x, Tezos schema), opened read-only; cheap to clone.
#[derive(Clone, Debug)]
pub struct IrminStore {
    inner: Arc<Inner>,
}

/// Guard against crafted stores: a root inode's flattening visits at most this many inodes.
const MAX_FLATTEN_INODES: usize = 1024;

impl IrminStore {
    /// Opens the store in `dir`; the lower layer, if the control file names volumes, is read from
    /// `dir/lower` (where Irmin's `lower_root` points in Octez and in the fixtures).
    pub fn open(dir: impl AsRef<Path>) -> Result<IrminStore> {
        let dir = dir.as_ref();
        IrminStore::open_with_lower(dir, &dir.join("lower"))
    }

    /// Opens the store in `dir` with its lower volumes in `lower_root`.
    pub fn open_with_lower(dir: impl AsRef<Path>, lower_root: &Path) -> Result<IrminStore> {
        let dir = dir.as_ref().to_path_buf();
        let control_file = DataFile::open(dir.join("store.control"))?;
        if control_file.len > crate::control::MAX_CONTROL_BYTES {
            return Err(IrminError::corrupt(
                &control_file.path,
                0,
                format!("control file of {} bytes (max 4096)", control_file.len),
            ));
        }
        let control = Control::decode(&control_file.read_all()?, &control_file.path)?;
        let layout = Layout::open(&dir, &control, lower_root)?;
        let dict_header = if control.legacy_headers() { 16 } else { 0 };
        let dict = Dict::open(&dir.join("store.dict"), dict_header, control.dict_end_poff)?;
        let index = Index::open(&dir.join("index"))?;
        Ok(IrminStore {
            inner: Arc::new(Inner {
                dir,
                control,
                layout,
                dict,
                index,
                objects: AtomicU64::new(0),
                id: StoreId::fresh(),
            }),
        })
    }

    /// The key of the object at pack `offset`, as this store's lazy references carry it.
    pub fn key(&self, offset: u64) -> ObjectKey {
        ObjectKey::new(self.inner.id, offset)
    }

    /// The pack offset of `key`, a key this store handed out; a key of another store is not
    /// readable here.
    pub fn offset_of(&self, key: ObjectKey) -> Result<u64> {
        key.offset_in(self.inner.id).ok_or(IrminError::Unreadable {
            offset: key.offset(),
            reason: "the key belongs to another store",
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The decoded control file.
    pub fn control(&self) -> &Control {
        &self.inner.control
    }

    /// End of the pack (global offset after the last entry).
    pub fn pack_end(&self) -> u64 {
        self.inner.layout.end()
    }

    /// What was read so far.
    pub fn stats(&self) -> ReadStats {
        ReadStats {
            objects: self.inner.objects.load(Ordering::Relaxed),
            bytes: self.inner.layout.bytes_read.load(Ordering::Relaxed),
        }
    }

    /// The commits the index lists (collected ones included), by increasing pack offset.
    pub fn indexed_commits(&self) -> Result<Vec<IndexEntry>> {
        let mut commits = self.inner.index.commits()?;
        commits.sort_unstable_by_key(|e| e.offset);
        Ok(commits)
    }

    /// The commits whose records and trees can be read (those from the last GC point on, and the
    /// older ones a lower layer archived), by increasing pack offset.
    pub fn commits(&self) -> Result<Vec<Hash>> {
        let mut out = Vec::new();
        for entry in self.indexed_commits()? {
            match self.find_commit(&entry.hash) {
                Ok(commit) => {
                    if self.inner.layout.read_upto(commit.tree_offset, 1).is_ok() {
                        out.push(commit.hash);
                    }
                }
                Err(IrminError::CommitCollected { .. } | IrminError::Unreadable { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The newest commit: the indexed commit with the highest pack offset below the pack's end.
    pub fn head(&self) -> Result<IrminCommit> {
        // An index entry past the published end of the pack (a writer interrupted between its
        // index and control-file writes) does not count.
        let end = self.pack_end();
        let newest =
            self.indexed_commits()?.into_iter().rfind(|entry| entry.offset < end).ok_or(IrminError::Empty)?;
        self.find_commit(&newest.hash)
    }

    /// Finds commit `hash` through the index, decodes it and verifies its hash.
    pub fn find_commit(&self, hash: &Hash) -> Result<IrminCommit> {
        let entry = self.inner.index.find(hash)?.ok_or(IrminError::UnknownCommit(*hash))?;
        self.commit_at(entry.offset, hash)
    }

    fn count(&self) {
        self.inner.objects.fetch_add(1, Ordering::Relaxed);
    }

    fn decode(&self, offset: u64) -> Result<Decoded> {
        self.count();
        entry::decode(&self.inner.layout, &self.inner.dict, offset, false)
    }

    /// Decodes the pack entry at global `offset` as it is stored, without verifying its hash or
    /// following its references: for tools and tests that compare stores entry by entry. Dict
    /// steps come back as their bytes; the next entry starts at `offset +` [`Decoded::length`].
    pub fn entry_at(&self, offset: u64) -> Result<Decoded> {
        self.decode(offset)
    }

    /// Resolves an address to an offset (a hash through the index), refusing forward references.
    fn resolve(&self, address: Address, from: &Decoded) -> Result<u64> {
        let offset = match address {
            Address::Offset(offset) => offset,
            Address::Hash(hash) => match self.inner.index.find(&hash)? {
                Some(entry) => entry.offset,
                None => {
                    return Err(IrminError::HashAddress {
                        file: from.file.clone(),
                        offset: from.offset,
                        hash,
                    });
                }
            },
        };
        if offset >= from.offset {
            return Err(IrminError::corrupt(
                &from.file,
                from.offset,
                format!("reference to pack offset {offset}, not before the entry at {}", from.offset),
            ));
        }
        Ok(offset)
    }

    /// The hash and kind at `offset`.
    fn header(&self, offset: u64) -> Result<(Hash, u8, PathBuf)> {
        let (hash, kind, file) = entry::header(&self.inner.layout, offset)?;
        Ok((hash, kind, self.inner.layout.file_path(file).to_path_buf()))
    }

    /// Decodes and verifies the commit at `offset`, expected to have hash `expected`.
    pub fn commit_at(&self, offset: u64, expected: &Hash) -> Result<IrminCommit> {
        let decoded = match self.decode(offset) {
            // A dangling parent kept by the GC in the prefix: a lower volume may hold the original.
            Ok(decoded) if decoded.kind == b'P' && self.control().volume_num > 0 => {
                match entry::decode(&self.inner.layout, &self.inner.dict, offset, true) {
                    Ok(original) => original,
                    Err(IrminError::Unreadable { .. }) => decoded,
                    Err(e) => return Err(e),
                }
            }
            Ok(decoded) => decoded,
            Err(IrminError::Unreadable { .. }) => {
                return Err(IrminError::CommitCollected { hash: *expected, offset });
            }
            Err(e) => return Err(e),
        };
        if decoded.hash != *expected {
            return Err(IrminError::WrongTarget {
                file: decoded.file,
                offset,
                expected: *expected,
                found: decoded.hash,
            });
        }
        let Value::Commit(raw) = &decoded.value else {
            return Err(IrminError::corrupt(
                &decoded.file,
                offset,
                format!("entry kind {:?} is not a commit", decoded.kind as char),
            ));
        };
        if decoded.kind == b'P' {
            // A dangling parent kept by the GC: its tree is gone.
            return Err(IrminError::CommitCollected { hash: *expected, offset });
        }
        let tree_offset = self.resolve(raw.node, &decoded)?;
        let (tree_hash, tree_kind, _) = self.header(tree_offset).map_err(|e| match e {
            IrminError::Unreadable { .. } => IrminError::CommitCollected { hash: *expected, offset },
            e => e,
        })?;
        if !matches!(tree_kind, b'R' | b'N' | b'I') {
            return Err(IrminError::corrupt(
                &decoded.file,
                offset,
                format!("the commit's tree at {tree_offset} has kind {:?}", tree_kind as char),
            ));
        }
        let mut parents = Vec::with_capacity(raw.parents.len());
        for parent in &raw.parents {
            let hash = match parent {
                Address::Hash(hash) => *hash,
                Address::Offset(_) => {
                    let at = self.resolve(*parent, &decoded)?;
                    let (hash, kind, file) = self.header(at)?;
                    if !matches!(kind, b'D' | b'P' | b'C') {
                        return Err(IrminError::corrupt(
                            file,
                            at,
                            format!("parent of commit at {offset} has kind {:?}", kind as char),
                        ));
                    }
                    hash
                }
            };
            parents.push(hash);
        }
        let text = |bytes: &[u8], what: &str| {
            String::from_utf8(bytes.to_vec()).map_err(|_| {
                IrminError::corrupt(&decoded.file, offset, format!("commit {what} is not UTF-8"))
            })
        };
        let info = CommitInfo {
            date: raw.date,
            author: text(&raw.author, "author")?,
            message: text(&raw.message, "message")?,
        };
        let computed = schema::commit_hash(&tree_hash, &parents, &info);
        if computed != decoded.hash {
            return Err(IrminError::HashMismatch {
                what: "commit",
                file: decoded.file,
                offset,
                stored: decoded.hash,
                computed,
            });
        }
        Ok(IrminCommit { hash: decoded.hash, offset, tree_hash, tree_offset, parents, info })
    }

    /// Loads and verifies the contents at `offset` whose hash is `expected`.
    pub fn load_contents(&self, offset: u64, expected: &Hash) -> Result<Contents> {
        let decoded = self.decode(offset)?;
        if decoded.hash != *expected {
            return Err(IrminError::WrongTarget {
                file: decoded.file,
                offset,
                expected: *expected,
                found: decoded.hash,
            });
        }
        let Value::Contents(bytes) = decoded.value else {
            return Err(IrminError::corrupt(
                &decoded.file,
                offset,
                format!("entry kind {:?} is not contents", decoded.kind as char),
            ));
        };
        // Small values are held inside the `Contents` (no allocation), as larch's store does.
        let contents = if bytes.len() <= 22 { Contents::from_slice(&bytes) } else { Contents::new(bytes) };
        let computed = contents.hash();
        if computed != decoded.hash {
            return Err(IrminError::HashMismatch {
                what: "contents",
                file: decoded.file,
                offset,
                stored: decoded.hash,
                computed,
            });
        }
        Ok(contents)
    }

    /// Loads and verifies the directory or inode at `offset` whose hash is `expected`, as a larch
    /// node whose children are stored references (keys: Irmin pack offsets). A directory root of
    /// at most 256 entries becomes a flat node (its inode children are read now); a larger one, an
    /// inode tree.
    pub fn load_node(&self, offset: u64, expected: &Hash) -> Result<Node> {
        let decoded = self.decode(offset)?;
        if decoded.hash != *expected {
            return Err(IrminError::WrongTarget {
                file: decoded.file,
                offset,
                expected: *expected,
                found: decoded.hash,
            });
        }
        let Value::Inode { root, value } = &decoded.value else {
            return Err(IrminError::corrupt(
                &decoded.file,
                offset,
                format!("entry kind {:?} is not a node", decoded.kind as char),
            ));
        };
        let (body, computed, what) = match (root, value) {
            (true, InodeValue::Values(list)) => {
                if list.len() > STABLE_HASH_MAX {
                    return Err(IrminError::corrupt(
                        &decoded.file,
                        offset,
                        format!("root values inode of {} entries", list.len()),
                    ));
                }
                let entries =
                    self.entries(list.iter().map(|(s, t, a)| (s.as_slice(), *t, *a)), &decoded, false)?;
                let hash = flat_hash(&entries);
                (NodeBody::Flat(entries), hash, "node")
            }
            (true, InodeValue::Tree { depth, length, pointers }) => {
                if *depth != 0 {
                    return Err(IrminError::corrupt(
                        &decoded.file,
                        offset,
                        format!("root inode at depth {depth}"),
                    ));
                }
                if *length <= STABLE_HASH_MAX as u64 {
                    let entries = self.flatten(&decoded, *length)?;
                    let hash = flat_hash(&entries);
                    (NodeBody::Flat(entries), hash, "node")
                } else {
                    let tree = self.inode_tree(&decoded, *depth, *length, pointers)?;
                    let hash = tree_hash(&tree);
                    (NodeBody::Tree(tree), hash, "node")
                }
            }
            (false, InodeValue::Values(list)) => {
                let entries =
                    self.entries(list.iter().map(|(s, t, a)| (s.as_slice(), *t, *a)), &decoded, false)?;
                let hash = schema::values_inode_hash(
                    entries.len(),
                    entries.iter().map(|(name, entry)| (name.as_bytes(), entry.kind(), entry.hash())),
                );
                (NodeBody::Values(entries), hash, "inode")
            }
            (false, InodeValue::Tree { depth, length, pointers }) => {
                let tree = self.inode_tree(&decoded, *depth, *length, pointers)?;
                let hash = tree_hash(&tree);
                (NodeBody::Tree(tree), hash, "inode")
            }
        };
        if computed != decoded.hash {
            return Err(IrminError::HashMismatch {
                what,
                file: decoded.file,
                offset,
                stored: decoded.hash,
                computed,
            });
        }
        Ok(Node::with_hash(body, computed))
    }

    /// Larch entries of a values inode (sorted check; `sort` when they come from several inodes).
    fn entries<'a>(
        &self,
        list: impl Iterator<Item = (&'a [u8], Target, Address)>,
        from: &Decoded,
        sort: bool,
    ) -> Result<Vec<(Name, Entry)>> {
        // The names of one node share one buffer (one allocation per node, as larch's own store
        // decodes them).
        let mut buffer: Vec<u8> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        let mut targets: Vec<Entry> = Vec::new();
        for (step, target, address) in list {
            let offset = self.resolve(address, from)?;
            let (hash, kind, file) = self.header(offset)?;
            let entry = match target {
                Target::Contents if kind == b'B' => {
                    Entry::Contents(ContentsRef::Stored { hash, key: self.key(offset) })
                }
                Target::Node if matches!(kind, b'R' | b'N' | b'I') => {
                    Entry::Node(NodeRef::Stored { hash, key: self.key(offset) })
                }
                _ => {
                    return Err(IrminError::corrupt(
                        file,
                        offset,
                        format!(
                            "entry {:?} of the node at {} points to kind {:?}",
                            String::from_utf8_lossy(step),
                            from.offset,
                            kind as char
                        ),
                    ));
                }
            };
            buffer.extend_from_slice(step);
            ends.push(buffer.len());
            targets.push(entry);
        }
        let names = Name::split(&buffer, &ends)
            .ok_or_else(|| IrminError::corrupt(&from.file, from.offset, "directory names too long"))?;
        let mut out: Vec<(Name, Entry)> = names.into_iter().zip(targets).collect();
        if sort {
            out.sort_by(|a, b| a.0.cmp(&b.0));
        }
        if out.windows(2).any(|pair| pair.first().map(|p| &p.0) >= pair.get(1).map(|p| &p.0)) {
            return Err(IrminError::corrupt(
                &from.file,
                from.offset,
                "directory entries not in strictly ascending order",
            ));
        }
        Ok(out)
    }

    /// The inode tree of a large directory or of an inner inode, children as stored references.
    fn inode_tree(
        &self,
        decoded: &Decoded,
        depth: u8,
        length: u64,
        pointers: &[(u8, Address)],
    ) -> Result<InodeTree> {
        let mut children = Vec::with_capacity(pointers.len());
        for (bucket, address) in pointers {
            let offset = self.resolve(*address, decoded)?;
            let (hash, kind, file) = self.header(offset)?;
            if !matches!(kind, b'O' | b'I' | b'N') {
                return Err(IrminError::corrupt(
                    file,
                    offset,
                    format!("inode child of the inode at {} has kind {:?}", decoded.offset, kind as char),
                ));
            }
            children.push((*bucket, NodeRef::Stored { hash, key: self.key(offset) }));
        }
        Ok(InodeTree { depth, length, children })
    }

    /// All entries of a root inode tree of at most 256 entries (hashed flat), read from its
    /// inner inodes.
    fn flatten(&self, root: &Decoded, length: u64) -> Result<Vec<(Name, Entry)>> {
        let mut out: Vec<(Name, Entry)> = Vec::new();
        // Inodes still to read: (offset, depth of the parent); the root is `root` itself.
        let mut stack: Vec<(u64, Option<u8>)> = vec![(root.offset, None)];
        let mut decoded = 0usize;
        while let Some((offset, parent_depth)) = stack.pop() {
            decoded += 1;
            if decoded > MAX_FLATTEN_INODES {
                return Err(IrminError::corrupt(
                    &root.file,
                    root.offset,
                    "inode tree too large for its length",
                ));
            }
            let inode = if parent_depth.is_none() { root.clone() } else { self.decode(offset)? };
            let Value::Inode { value, root: is_root, .. } = &inode.value else {
                return Err(IrminError::corrupt(&inode.file, inode.offset, "not an inode"));
            };
            if *is_root != parent_depth.is_none() {
                return Err(IrminError::corrupt(
                    &inode.file,
                    inode.offset,
                    "a root inode inside an inode tree",
                ));
            }
            match value {
                InodeValue::Values(list) => {
                    if (out.len() + list.len()) as u64 > length {
                        return Err(IrminError::corrupt(
                            &root.file,
                            root.offset,
                            format!("inode tree holds more than its length {length}"),
                        ));
                    }
                    let part =
                        self.entries(list.iter().map(|(s, t, a)| (s.as_slice(), *t, *a)), &inode, false)?;
                    out.extend(part);
                }
                InodeValue::Tree { pointers, depth, .. } => {
                    if parent_depth.is_some_and(|parent| *depth <= parent) {
                        return Err(IrminError::corrupt(
                            &inode.file,
                            offset,
                            "inode depth does not increase",
                        ));
                    }
                    for (_, address) in pointers {
                        stack.push((self.resolve(*address, &inode)?, Some(*depth)));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if out.len() as u64 != length
            || out.windows(2).any(|pair| pair.first().map(|p| &p.0) == pair.get(1).map(|p| &p.0))
        {
            return Err(IrminError::corrupt(
                &root.file,
                root.offset,
                format!("inode tree of length {length} holds {} distinct entries", out.len()),
            ));
        }
        Ok(out)
    }
}

fn flat_hash(entries: &[(Name, Entry)]) -> Hash {
    schema::flat_node_hash(
        entries.len(),
        entries.iter().map(|(name, entry)| (name.as_bytes(), entry.kind(), entry.hash())),
    )
}

fn tree_hash(tree: &InodeTree) -> Hash {
    schema::tree_inode_hash(
        tree.depth,
        tree.length,
        tree.children.len(),
        tree.children.iter().map(|(i, c)| (*i, c.hash())),
    )
}
