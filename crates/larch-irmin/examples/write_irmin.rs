//! Benchmark helper: writes the commits of a larch store as an irmin-pack store (control V5, one
//! suffix chunk, minimal indexing, Tezos schema), so that `larch import irmin` can be timed on a
//! store of realistic size. This is NOT Irmin: the store has Irmin's layout and hashes (checked by
//! the importer, which verifies every object), but its object sharing is larch's.
//!
//! `cargo run --release -p larch-irmin --example write_irmin -- LARCH_STORE IRMIN_DIR`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use larch_core::ocaml_hash::ocaml_seeded_hash;
use larch_core::schema::{self, Kind, write_leb128};
use larch_core::{ContentsRef, Entry, Hash, NodeBody, NodeRef, ObjectSource};
use larch_store::Repo;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

struct Writer {
    out: std::io::BufWriter<std::fs::File>,
    pos: u64,
    dict: HashMap<Vec<u8>, u64>,
    dict_bytes: Vec<u8>,
    nodes: HashMap<larch_core::ObjectKey, (u64, Hash)>,
    contents: HashMap<Hash, u64>,
    commits: HashMap<Hash, u64>,
    index: Vec<u8>,
    source: Arc<dyn ObjectSource>,
}

/// A directory entry as Irmin writes it: name, kind, child offset, child hash.
type Child = (Vec<u8>, Kind, u64, Hash);

impl Writer {
    fn entry(&mut self, hash: &Hash, kind: u8, body: &[u8]) -> u64 {
        let offset = self.pos;
        let mut head = hash.as_bytes().to_vec();
        head.push(kind);
        write_leb128(&mut head, body.len() as u64);
        self.out.write_all(&head).unwrap();
        self.out.write_all(body).unwrap();
        self.pos += (head.len() + body.len()) as u64;
        offset
    }

    fn contents(&mut self, bytes: &[u8]) -> (u64, Hash) {
        let hash = schema::contents_hash(bytes);
        if let Some(offset) = self.contents.get(&hash) {
            return (*offset, hash);
        }
        let offset = self.entry(&hash, b'B', bytes);
        self.contents.insert(hash, offset);
        (offset, hash)
    }

    fn step(&mut self, out: &mut Vec<u8>, name: &[u8], node: bool) {
        let id = if name.len() > 3 && self.dict.len() < 100_000 {
            let next = self.dict.len() as u64;
            Some(*self.dict.entry(name.to_vec()).or_insert_with(|| {
                self.dict_bytes.extend_from_slice(&(name.len() as u32).to_be_bytes());
                self.dict_bytes.extend_from_slice(name);
                next
            }))
        } else {
            None
        };
        match id {
            Some(id) => {
                write_leb128(out, if node { 2 } else { 0 });
                write_leb128(out, id);
            }
            None => {
                write_leb128(out, if node { 8 } else { 6 });
                write_leb128(out, name.len() as u64);
                out.extend_from_slice(name);
            }
        }
    }

    fn values(&mut self, children: &[Child], hash: &Hash, root: bool) -> u64 {
        let mut body = vec![0u8];
        write_leb128(&mut body, children.len() as u64);
        for (name, kind, offset, _) in children {
            self.step(&mut body, name, *kind == Kind::Node);
            body.extend_from_slice(&offset.to_be_bytes());
        }
        self.entry(hash, if root { b'R' } else { b'O' }, &body)
    }

    fn tree(&mut self, depth: u8, length: u64, pointers: &[(u8, u64)], hash: &Hash, root: bool) -> u64 {
        let mut body = vec![1u8];
        write_leb128(&mut body, u64::from(depth));
        write_leb128(&mut body, length);
        write_leb128(&mut body, pointers.len() as u64);
        for (index, offset) in pointers {
            write_leb128(&mut body, u64::from(*index));
            body.push(0);
            body.extend_from_slice(&offset.to_be_bytes());
        }
        self.entry(hash, if root { b'R' } else { b'O' }, &body)
    }

    /// Irmin's inode shape for a directory of at most 256 entries: `Values` up to 32, else a
    /// `Tree` whose buckets are split by OCaml's seeded hash of the name at each depth.
    fn small_dir(&mut self, children: &[Child], depth: u8, root_hash: Option<&Hash>) -> (u64, Hash) {
        if children.len() <= 32 {
            let hash = match root_hash {
                Some(hash) => *hash,
                None => schema::values_inode_hash(
                    children.len(),
                    children.iter().map(|(n, k, _, h)| (n.as_slice(), *k, *h)),
                ),
            };
            return (self.values(children, &hash, root_hash.is_some()), hash);
        }
        let mut buckets: Vec<Vec<Child>> = vec![Vec::new(); 32];
        for child in children {
            let bucket = ocaml_seeded_hash(u32::from(depth), &child.0) % 32;
            buckets[bucket as usize].push(child.clone());
        }
        let mut pointers = Vec::new();
        let mut hashes = Vec::new();
        for (index, bucket) in buckets.iter().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            let (offset, hash) = self.small_dir(bucket, depth + 1, None);
            pointers.push((index as u8, offset));
            hashes.push((index as u8, hash));
        }
        let hash = match root_hash {
            Some(hash) => *hash,
            None => schema::tree_inode_hash(depth, children.len() as u64, hashes.len(), hashes.into_iter()),
        };
        (self.tree(depth, children.len() as u64, &pointers, &hash, root_hash.is_some()), hash)
    }

    fn children(&mut self, entries: &[(larch_core::Name, Entry)]) -> Vec<Child> {
        entries
            .iter()
            .map(|(name, entry)| {
                let (kind, (offset, hash)) = match entry {
                    Entry::Node(node) => (Kind::Node, self.node(node, true)),
                    Entry::Contents(ContentsRef::Mem(contents)) => (Kind::Contents, self.contents(contents)),
                    Entry::Contents(ContentsRef::Inline(value)) => {
                        (Kind::Contents, self.contents(value.as_bytes()))
                    }
                    Entry::Contents(ContentsRef::Stored { hash, key }) => {
                        let contents = self.source.load_contents(*key, hash).unwrap();
                        (Kind::Contents, self.contents(&contents))
                    }
                };
                (name.as_bytes().to_vec(), kind, offset, hash)
            })
            .collect()
    }

    /// Writes a directory (root) or an inner inode of a large directory.
    fn node(&mut self, node: &NodeRef, root: bool) -> (u64, Hash) {
        let key = match node {
            NodeRef::Stored { key, .. } => Some(*key),
            NodeRef::Mem(_) => None,
        };
        if let Some(done) = key.and_then(|key| self.nodes.get(&key)) {
            return *done;
        }
        let loaded = match node {
            NodeRef::Stored { hash, key } => self.source.load_node(*key, hash).unwrap(),
            NodeRef::Mem(node) => node.clone(),
        };
        let hash = node.hash();
        let written = match loaded.body() {
            NodeBody::Flat(entries) => {
                let children = self.children(entries);
                self.small_dir(&children, 0, Some(&hash))
            }
            NodeBody::Values(entries) => {
                let children = self.children(entries);
                (self.values(&children, &hash, root), hash)
            }
            NodeBody::Tree(tree) => {
                let pointers: Vec<(u8, u64)> =
                    tree.children.iter().map(|(index, child)| (*index, self.node(child, false).0)).collect();
                (self.tree(tree.depth, tree.length, &pointers, &hash, root), hash)
            }
        };
        if let Some(key) = key {
            self.nodes.insert(key, written);
        }
        written
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (from, to) = (&args[1], std::path::Path::new(&args[2]));
    let repo = Repo::open_read_only(from).unwrap();
    let commits = repo.commits();
    std::fs::create_dir_all(to.join("index")).unwrap();
    let file = std::fs::File::create(to.join("store.0.suffix")).unwrap();
    let mut writer = Writer {
        out: std::io::BufWriter::with_capacity(1 << 20, file),
        pos: 0,
        dict: HashMap::new(),
        dict_bytes: Vec::new(),
        nodes: HashMap::new(),
        contents: HashMap::new(),
        commits: HashMap::new(),
        index: Vec::new(),
        source: repo.source(),
    };
    for hash in &commits {
        let details = repo.commit_details(hash).unwrap();
        let tree = repo.checkout(hash).unwrap();
        let Entry::Node(root) = tree.root() else { panic!("root is contents") };
        let (tree_offset, tree_hash) = writer.node(root, true);
        assert_eq!(tree_hash, details.tree_hash);
        let mut body = vec![0u8];
        body.extend_from_slice(&tree_offset.to_be_bytes());
        write_leb128(&mut body, details.parents.len() as u64);
        for parent in &details.parents {
            match writer.commits.get(parent) {
                Some(offset) => {
                    body.push(0);
                    body.extend_from_slice(&offset.to_be_bytes());
                }
                None => {
                    body.push(1);
                    body.extend_from_slice(parent.as_bytes());
                }
            }
        }
        body.extend_from_slice(&details.info.date.to_be_bytes());
        for text in [&details.info.author, &details.info.message] {
            write_leb128(&mut body, text.len() as u64);
            body.extend_from_slice(text.as_bytes());
        }
        let start = writer.pos;
        let offset = writer.entry(hash, b'D', &body);
        writer.commits.insert(*hash, offset);
        writer.index.extend_from_slice(hash.as_bytes());
        writer.index.extend_from_slice(&offset.to_be_bytes());
        writer.index.extend_from_slice(&((writer.pos - start) as u32).to_be_bytes());
        writer.index.push(b'D');
    }
    writer.out.flush().unwrap();
    std::fs::write(to.join("store.dict"), &writer.dict_bytes).unwrap();
    std::fs::write(to.join("store.branches"), [0u8; 16]).unwrap();
    let mut log = (writer.index.len() as u64).to_be_bytes().to_vec();
    log.extend_from_slice(b"00000001");
    log.extend_from_slice(&[0u8; 16]);
    log.extend_from_slice(&writer.index);
    std::fs::write(to.join("index/log"), &log).unwrap();
    let mut control = b"00000005".to_vec();
    control.extend_from_slice(&(writer.dict_bytes.len() as u64).to_be_bytes());
    control.extend_from_slice(&writer.pos.to_be_bytes());
    control.push(0); // upgraded_from: None
    let checksum_at = control.len();
    control.extend_from_slice(&[0u8; 8]);
    control.extend_from_slice(&[0, 1, 0, 1]); // chunk_start_idx, chunk_num, volume_num, No_gc_yet
    let checksum = adler32(&control[8..]);
    control[checksum_at..checksum_at + 8].copy_from_slice(&u64::from(checksum).to_be_bytes());
    std::fs::write(to.join("store.control"), &control).unwrap();
    println!(
        "wrote {} commits, {} bytes of pack, {} nodes, {} contents, {} dict steps",
        commits.len(),
        writer.pos,
        writer.nodes.len(),
        writer.contents.len(),
        writer.dict.len()
    );
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for byte in bytes {
        a = (a + u32::from(*byte)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}
