//! Export: walks the tree of one commit children first and writes each object once (within the
//! back-reference window), streaming the records through a [`FrameWriter`].

use crate::error::{Result, SnapshotError};
use crate::format::{DEFAULT_WINDOW, FRAME_MAX, FrameWriter, WINDOW_MAX};
use crate::records::*;
use crate::{Counts, Progress};
use larch_core::{Contents, ContentsRef, Entry, Hash, Node, NodeBody, NodeRef, ObjectSource, schema};
use larch_store::Repo;
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

/// Cuts the record stream into frames and hands them to the thread that deflates and writes them,
/// so that the walk and the compression run on two cores.
struct FrameSender<'a> {
    raw: Vec<u8>,
    tx: SyncSender<Vec<u8>>,
    /// Buffers the writer thread is done with, to reuse.
    spare: Receiver<Vec<u8>>,
    stream_bytes: u64,
    file_bytes: &'a AtomicU64,
}

fn writer_gone() -> SnapshotError {
    SnapshotError::Io {
        op: "writing",
        path: "the snapshot".into(),
        source: std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the snapshot writer stopped"),
    }
}

impl FrameSender<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.raw.extend_from_slice(bytes);
        self.stream_bytes += bytes.len() as u64;
        let mut start = 0;
        while self.raw.len() - start >= FRAME_MAX {
            self.send(start, start + FRAME_MAX)?;
            start += FRAME_MAX;
        }
        if start > 0 {
            self.raw.drain(..start);
        }
        Ok(())
    }

    fn send(&mut self, start: usize, end: usize) -> Result<()> {
        let mut frame = self.spare.try_recv().unwrap_or_else(|_| Vec::with_capacity(FRAME_MAX));
        frame.clear();
        frame.extend_from_slice(self.raw.get(start..end).unwrap_or_default());
        self.tx.send(frame).map_err(|_| writer_gone())
    }

    /// Sends the last, partial frame.
    fn finish(mut self) -> Result<()> {
        if !self.raw.is_empty() {
            self.send(0, self.raw.len())?;
        }
        Ok(())
    }
}

/// The writer thread: frames every chunk it receives, returns the output, file bytes and frames.
fn write_frames<W: Write>(
    out: W,
    window: u32,
    level: Option<u32>,
    rx: Receiver<Vec<u8>>,
    spare: std::sync::mpsc::Sender<Vec<u8>>,
    file_bytes: &AtomicU64,
) -> Result<(W, u64, u64)> {
    let mut writer = FrameWriter::new(out, window, level)?;
    for raw in rx {
        writer.write_frame(&raw)?;
        file_bytes.store(writer.file_bytes, Ordering::Relaxed);
        let _ = spare.send(raw);
    }
    writer.finish()
}

/// How to export.
#[derive(Clone, Copy, Debug)]
pub struct ExportOptions {
    /// Deflate level of the frames (0–9), or `None` to store them as they are.
    pub compression: Option<u32>,
    /// The back-reference window, in objects (at most [`WINDOW_MAX`]): how far back a repeated
    /// object can be referred to instead of written again. Bounds the exporter's and the
    /// importer's memory.
    pub window: u32,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions { compression: Some(1), window: DEFAULT_WINDOW }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    /// The commit exported.
    pub commit: Hash,
    /// Its root tree.
    pub tree: Hash,
    /// Records written, by kind, and references.
    pub counts: Counts,
    /// Bytes of the record stream (before compression).
    pub stream_bytes: u64,
    /// Bytes of the snapshot file.
    pub file_bytes: u64,
    /// Frames written.
    pub frames: u64,
}

/// The objects numbered in the last `window` records: hash → number, oldest first for eviction.
struct Window {
    size: u64,
    map: HashMap<Hash, u64, larch_core::hash::BuildPrefixHasher>,
    order: VecDeque<Hash>,
    /// Objects numbered so far.
    count: u64,
}

impl Window {
    fn new(size: u32) -> Window {
        let capacity = (size as usize).min(1 << 16);
        Window {
            size: u64::from(size),
            map: HashMap::with_capacity_and_hasher(capacity, Default::default()),
            order: VecDeque::with_capacity(capacity),
            count: 0,
        }
    }

    /// The number of `hash` if it can still be referred to.
    fn get(&self, hash: &Hash) -> Option<u64> {
        self.map.get(hash).copied().filter(|number| self.count - number <= self.size)
    }

    /// Numbers a new object; returns its number.
    fn push(&mut self, hash: Hash) -> u64 {
        let number = self.count;
        self.count += 1;
        if self.order.len() as u64 >= self.size
            && let Some(old) = self.order.pop_front()
            && self.map.get(&old).is_some_and(|n| self.count - n > self.size)
        {
            self.map.remove(&old);
        }
        self.map.insert(hash, number);
        self.order.push_back(hash);
        number
    }
}

/// How a child will be referred to by its parent's record.
#[derive(Clone)]
enum Plan {
    /// Contents written inline.
    Inline(Arc<Contents>),
    /// A child written for this parent: the `n`-th of its segment of the importer's stack.
    Fresh(u64),
    /// An object numbered earlier: a back-reference, if still in the window when the parent is
    /// written.
    Window(u64),
    /// Being written (its frame is above on the walk's stack).
    Pending,
}

/// A directory or inode being walked.
struct Frame {
    node: Arc<Node>,
    hash: Hash,
    /// Inode depth: 0 for a directory root.
    depth: u8,
    /// Where the parent records this frame's result.
    slot: usize,
    plans: Vec<Plan>,
    next: usize,
    fresh: u64,
}

fn child_count(node: &Node) -> usize {
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => entries.len(),
        NodeBody::Tree(tree) => tree.children.len(),
    }
}

/// What a child slot holds.
enum Child<'a> {
    Contents(&'a ContentsRef),
    Node(&'a NodeRef),
}

fn child_at(node: &Node, index: usize) -> Option<Child<'_>> {
    match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            entries.get(index).map(|(_, entry)| match entry {
                Entry::Contents(contents) => Child::Contents(contents),
                Entry::Node(node) => Child::Node(node),
            })
        }
        NodeBody::Tree(tree) => tree.children.get(index).map(|(_, child)| Child::Node(child)),
    }
}

struct Exporter<'a> {
    source: Arc<dyn ObjectSource>,
    out: FrameSender<'a>,
    window: Window,
    record: Vec<u8>,
    counts: Counts,
    progress: &'a mut dyn FnMut(Progress),
}

fn load_node(source: &dyn ObjectSource, node: &NodeRef) -> Result<Arc<Node>> {
    match node {
        NodeRef::Mem(node) => Ok(node.clone()),
        NodeRef::Stored { hash, key } => Ok(source.load_node(*key, hash)?),
    }
}

impl Exporter<'_> {
    fn emit(&mut self) -> Result<()> {
        let record = std::mem::take(&mut self.record);
        let result = self.out.write(&record);
        self.record = record;
        self.record.clear();
        self.counts.records += 1;
        if self.counts.records.is_multiple_of(4096) {
            (self.progress)(Progress {
                objects: self.window.count,
                stream_bytes: self.out.stream_bytes,
                file_bytes: self.out.file_bytes.load(Ordering::Relaxed),
            });
        }
        result
    }

    fn contents_record(&mut self, contents: &Contents, hash: Hash) -> Result<u64> {
        if contents.len() as u64 > CONTENTS_MAX {
            return Err(SnapshotError::TooLarge(format!("a contents value of {} bytes", contents.len())));
        }
        self.record.push(TAG_CONTENTS);
        write_leb128(&mut self.record, contents.len() as u64);
        self.record.extend_from_slice(contents.as_bytes());
        self.counts.contents += 1;
        self.counts.value_bytes += contents.len() as u64;
        self.emit()?;
        Ok(self.window.push(hash))
    }

    /// Plans the contents child `contents`: inline, a back-reference, or a record written now.
    fn plan_contents(&mut self, contents: &ContentsRef, fresh: &mut u64) -> Result<Plan> {
        let (loaded, known) = match contents {
            ContentsRef::Mem(contents) => (contents.clone(), None),
            ContentsRef::Inline(value) => (value.to_contents(), None),
            ContentsRef::Stored { hash, key } => {
                if let Some(number) = self.window.get(hash) {
                    return Ok(Plan::Window(number));
                }
                (self.source.load_contents(*key, hash)?, Some(*hash))
            }
        };
        if loaded.len() <= INLINE_MAX {
            return Ok(Plan::Inline(loaded));
        }
        // A stored value's hash is its reference's (looked up above); only a value held in memory
        // is hashed.
        let hash = match known {
            Some(hash) => hash,
            None => {
                let hash = loaded.hash();
                if let Some(number) = self.window.get(&hash) {
                    return Ok(Plan::Window(number));
                }
                hash
            }
        };
        self.contents_record(&loaded, hash)?;
        *fresh += 1;
        Ok(Plan::Fresh(*fresh - 1))
    }

    fn write_ref(&mut self, plan: &Plan, fresh: u64) {
        match plan {
            Plan::Fresh(index) => write_leb128(&mut self.record, *index),
            Plan::Window(number) => {
                self.counts.back_references += 1;
                write_leb128(&mut self.record, fresh + (self.window.count - number) - 1);
            }
            Plan::Inline(_) | Plan::Pending => {}
        }
    }

    /// Writes the record of a fully planned frame; returns its number.
    fn node_record(&mut self, frame: &Frame) -> Result<u64> {
        match frame.node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let flat = matches!(frame.node.body(), NodeBody::Flat(_));
                self.record.push(if flat { TAG_FLAT } else { TAG_VALUES });
                self.record.extend_from_slice(frame.hash.as_bytes());
                if flat {
                    self.counts.flat += 1;
                } else {
                    self.record.push(frame.depth);
                    self.counts.values += 1;
                }
                write_leb128(&mut self.record, frame.fresh);
                write_leb128(&mut self.record, entries.len() as u64);
                for ((name, entry), plan) in entries.iter().zip(&frame.plans) {
                    if name.len() as u64 > NAME_MAX {
                        return Err(SnapshotError::TooLarge(format!("a name of {} bytes", name.len())));
                    }
                    let tag = match (entry, plan) {
                        (_, Plan::Inline(_)) => ENTRY_INLINE,
                        (Entry::Node(_), _) => ENTRY_NODE,
                        (Entry::Contents(_), _) => ENTRY_CONTENTS,
                    };
                    if is_hex_name(name) {
                        self.record.push(tag | ENTRY_HEX);
                        write_leb128(&mut self.record, name.len() as u64 / 2);
                        pack_hex(name, &mut self.record);
                    } else {
                        self.record.push(tag);
                        write_leb128(&mut self.record, name.len() as u64);
                        self.record.extend_from_slice(name);
                    }
                    self.counts.name_bytes += name.len() as u64;
                    if let Plan::Inline(contents) = plan {
                        write_leb128(&mut self.record, contents.len() as u64);
                        self.record.extend_from_slice(contents.as_bytes());
                        self.counts.inline += 1;
                        self.counts.value_bytes += contents.len() as u64;
                    } else {
                        self.write_ref(plan, frame.fresh);
                    }
                }
            }
            NodeBody::Tree(tree) => {
                self.record.push(TAG_TREE);
                self.record.extend_from_slice(frame.hash.as_bytes());
                self.record.push(tree.depth);
                write_leb128(&mut self.record, tree.length);
                write_leb128(&mut self.record, frame.fresh);
                self.record.push(tree.children.len() as u8);
                for ((bucket, _), plan) in tree.children.iter().zip(&frame.plans) {
                    self.record.push(*bucket);
                    self.write_ref(plan, frame.fresh);
                }
                self.counts.tree += 1;
            }
        }
        self.emit()?;
        Ok(self.window.push(frame.hash))
    }

    fn frame(&self, node: Arc<Node>, hash: Hash, depth: u8, slot: usize) -> Frame {
        let count = child_count(&node);
        Frame { node, hash, depth, slot, plans: Vec::with_capacity(count), next: 0, fresh: 0 }
    }

    /// Writes the tree below `root` (a directory), children first; the root's record is last.
    fn tree(&mut self, root: &NodeRef) -> Result<()> {
        let node = load_node(&*self.source, root)?;
        let mut stack = vec![self.frame(node, root.hash(), 0, 0)];
        while let Some(top) = stack.last_mut() {
            let count = child_count(&top.node);
            if top.next < count {
                let index = top.next;
                top.next += 1;
                let node = top.node.clone();
                let child_depth = if matches!(node.body(), NodeBody::Tree(_)) { top.depth + 1 } else { 0 };
                match child_at(&node, index) {
                    Some(Child::Contents(contents)) => {
                        let mut fresh = top.fresh;
                        let plan = self.plan_contents(contents, &mut fresh)?;
                        if let Some(top) = stack.last_mut() {
                            top.fresh = fresh;
                            top.plans.push(plan);
                        }
                    }
                    Some(Child::Node(child)) => {
                        let hash = child.hash();
                        if let Some(number) = self.window.get(&hash) {
                            top.plans.push(Plan::Window(number));
                        } else {
                            top.plans.push(Plan::Pending);
                            let loaded = load_node(&*self.source, child)?;
                            let frame = self.frame(loaded, hash, child_depth, index);
                            stack.push(frame);
                        }
                    }
                    None => {}
                }
                continue;
            }
            // Every child planned: a back-reference that left the window while later children
            // were written is written again, as a fresh child (rare: a subtree larger than the
            // window); then the record.
            let size = self.window.size;
            let count = self.window.count;
            let stale = top.plans.iter().position(|plan| matches!(plan, Plan::Window(n) if count - n > size));
            if let Some(index) = stale {
                let node = top.node.clone();
                let child_depth = if matches!(node.body(), NodeBody::Tree(_)) { top.depth + 1 } else { 0 };
                if let Some(slot) = top.plans.get_mut(index) {
                    *slot = Plan::Pending;
                }
                match child_at(&node, index) {
                    Some(Child::Contents(contents)) => {
                        let loaded = match contents {
                            ContentsRef::Mem(contents) => contents.clone(),
                            ContentsRef::Inline(value) => value.to_contents(),
                            ContentsRef::Stored { hash, key } => self.source.load_contents(*key, hash)?,
                        };
                        self.contents_record(&loaded, contents.hash())?;
                        if let Some(top) = stack.last_mut() {
                            if let Some(slot) = top.plans.get_mut(index) {
                                *slot = Plan::Fresh(top.fresh);
                            }
                            top.fresh += 1;
                        }
                    }
                    Some(Child::Node(child)) => {
                        let loaded = load_node(&*self.source, child)?;
                        let frame = self.frame(loaded, child.hash(), child_depth, index);
                        stack.push(frame);
                    }
                    None => {}
                }
                continue;
            }
            let Some(done) = stack.pop() else { break };
            self.node_record(&done)?;
            if let Some(parent) = stack.last_mut() {
                if let Some(slot) = parent.plans.get_mut(done.slot) {
                    *slot = Plan::Fresh(parent.fresh);
                }
                parent.fresh += 1;
            }
        }
        Ok(())
    }
}

/// Exports commit `commit` of `repo` (its head when `None`) to `out`; `progress` is called every
/// few thousand records.
pub fn export<W: Write + Send>(
    repo: &Repo,
    commit: Option<Hash>,
    out: W,
    options: ExportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(ExportSummary, W)> {
    let commit = match commit {
        Some(commit) => commit,
        None => repo.head().ok_or(SnapshotError::NoHead)?,
    };
    let details = repo.commit_details(&commit)?;
    let recorded = schema::commit_hash(&details.tree_hash, &details.parents, &details.info);
    if recorded != commit {
        return Err(SnapshotError::CorruptStore(format!(
            "the record of commit {commit} hashes to {recorded}"
        )));
    }
    let window = options.window.clamp(1, WINDOW_MAX);
    let tree = repo.checkout(&commit)?;
    let Entry::Node(root) = tree.root().clone() else {
        return Err(SnapshotError::TooLarge("the commit's root is not a directory".into()));
    };
    let file_bytes = AtomicU64::new(0);
    // The walk runs here; framing, deflating and writing on a second thread, a few frames behind.
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let (spare_tx, spare_rx) = std::sync::mpsc::channel();
        let level = options.compression;
        let file_bytes = &file_bytes;
        let writer = scope.spawn(move || write_frames(out, window, level, rx, spare_tx, file_bytes));
        let sender = FrameSender {
            raw: Vec::with_capacity(2 * FRAME_MAX),
            tx,
            spare: spare_rx,
            stream_bytes: 0,
            file_bytes,
        };
        let walked = walk(repo, &root, &commit, &details, window, sender, progress);
        let written = writer.join().unwrap_or_else(|_| Err(writer_gone()));
        match (walked, written) {
            (Ok((counts, objects, stream_bytes)), Ok((out, file_bytes, frames))) => {
                progress(Progress { objects, stream_bytes, file_bytes });
                let summary = ExportSummary {
                    commit,
                    tree: details.tree_hash,
                    counts,
                    stream_bytes,
                    file_bytes,
                    frames,
                };
                Ok((summary, out))
            }
            // The writer's own error explains a walk stopped by it.
            (_, Err(error)) | (Err(error), Ok(_)) => Err(error),
        }
    })
}

/// Walks the tree of `root` and writes the whole record stream to `out`; returns the counts, the
/// objects and the stream bytes.
fn walk(
    repo: &Repo,
    root: &NodeRef,
    commit: &Hash,
    details: &larch_store::CommitDetails,
    window: u32,
    out: FrameSender<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Counts, u64, u64)> {
    let mut exporter = Exporter {
        source: repo.source(),
        out,
        window: Window::new(window),
        record: Vec::with_capacity(1 << 16),
        counts: Counts::default(),
        progress,
    };
    exporter.tree(root)?;
    // The commit: the root is the last object written (or, if the root was written before, a
    // back-reference; never in practice).
    let info = &details.info;
    exporter.record.push(TAG_COMMIT);
    exporter.record.extend_from_slice(commit.as_bytes());
    write_leb128(&mut exporter.record, 1);
    write_leb128(&mut exporter.record, 0);
    write_leb128(&mut exporter.record, details.parents.len() as u64);
    for parent in &details.parents {
        exporter.record.extend_from_slice(parent.as_bytes());
    }
    exporter.record.extend_from_slice(&info.date.to_le_bytes());
    for text in [&info.author, &info.message] {
        write_leb128(&mut exporter.record, text.len() as u64);
        exporter.record.extend_from_slice(text.as_bytes());
    }
    exporter.emit()?;
    exporter.record.push(TAG_END);
    write_leb128(&mut exporter.record, exporter.window.count);
    exporter.emit()?;
    let Exporter { out, counts, window, .. } = exporter;
    let stream_bytes = out.stream_bytes;
    out.finish()?;
    Ok((counts, window.count, stream_bytes))
}
