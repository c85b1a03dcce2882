//! The mark phase of garbage collection (docs/gc-design.md §4): which records of the region below
//! the GC commit are still needed by the commits that are kept.
//!
//! Given the GC commit's record offset `K`, the region end (records starting below it are
//! candidates for collection; `region_end ≤ K`) and the scan end (the published end), the mark:
//!
//! 1. scans the *window* `[K, scan_end)` sequentially: every record there belongs to a kept commit
//!    (a commit at or after `K`, or a node of such a commit's tree), so each pointer of each record
//!    is a root, except commit parent pointers. A patch in the window whose base lies below `K`
//!    is decoded (its children are its base's entries with the changes applied) and its base is a
//!    *base-only* root; a patch whose base is in the window needs only its own change pointers;
//! 2. traverses descending from the roots: pending offsets in a `BTreeMap` popped from the largest
//!    (children are always at lower offsets, so each record is read once, after all its
//!    referrers). A *full* record pushes its children as full (a patch: the children of its decoded
//!    node) and, if a patch, its base as base-only; a *base-only* record pushes only its own base
//!    (a patch needs its base's record to decode, never the base's children). Records in
//!    `[region_end, K)` are traversed but not collected; records below `region_end` form the live
//!    set.
//!
//! The records are read through [`RecordSource`], implemented by today's single-file
//! [`PackReader`] and, later, by the chunked layout. Full records are decoded pointers-only
//! (no names, no nodes); only patches whose decoded children are needed are decoded, through a
//! small cache of decoded bases, as names and child offsets only (`gc_children`).

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{Cursor, MAX_BODY_LEN, PACK_HEADER_LEN, RecordKind};
use crate::format::patch;
use crate::gc::children::{self, Decoded, NodeChildren};
use crate::gc::live::{LiveRuns, LiveRunsBuilder};
use crate::gc::roots::{PackedOffsets, PackedPairs, RootSpan, RootSpans, SPAN_BYTES};
use crate::pack::read_ahead::{self, ReadAhead};
use crate::pack::reader::PackReader;
use block::Block;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod block;

/// Records by global offset, as the mark reads them.
pub(crate) trait RecordSource {
    /// The published end: records lie below it.
    fn end(&self) -> u64;
    /// Reads raw bytes at a global offset (sequential scans), without checks.
    fn read_raw(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Reads the record at `offset`, checks its framing and checksum and calls `decode` on its kind
    /// and body; returns `decode`'s result and the record's total length.
    fn with_record<T>(
        &self,
        offset: u64,
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)>;
    /// Advice that the bytes `[offset, offset + len)` will be read soon (the system may start
    /// reading them from disk); nothing by default.
    fn will_need(&self, _offset: u64, _len: u64) {}
    /// [`RecordSource::with_record`], taking the record from `pre` (the pack's bytes from
    /// `offset` on, read already) when it holds it whole; the default reads it again.
    fn with_record_from<T>(
        &self,
        offset: u64,
        _pre: &[u8],
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        self.with_record(offset, decode)
    }
}

impl RecordSource for PackReader {
    fn end(&self) -> u64 {
        PackReader::end(self)
    }

    fn read_raw(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        PackReader::read_raw(self, offset, buf)
    }

    fn with_record<T>(
        &self,
        offset: u64,
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        PackReader::with_record(self, offset, decode)
    }

    fn will_need(&self, offset: u64, len: u64) {
        self.layout().will_need(offset, len);
    }

    fn with_record_from<T>(
        &self,
        offset: u64,
        pre: &[u8],
        decode: impl FnOnce(RecordKind, &[u8]) -> Result<T>,
    ) -> Result<(T, u64)> {
        PackReader::with_record_from(self, offset, pre, decode)
    }
}

/// Where a mark runs: the GC commit's offset `K`, the end of the region (records starting below it
/// may be collected), and the end of the window scanned for roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkBounds {
    /// Record offset of the GC commit: every record at or after it is kept.
    pub keep_from: u64,
    /// Records starting below this offset are candidates for collection (≤ `keep_from`).
    pub region_end: u64,
    /// End of the window `[keep_from, scan_end)` whose records are roots (the published end).
    pub scan_end: u64,
}

/// The result of a mark: the live records of the region and what the mark cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcMark {
    /// The bounds it ran with.
    pub bounds: Option<MarkBounds>,
    /// Live records of the region, as runs of contiguous records, increasing.
    pub runs: LiveRuns,
    /// The live records, by increasing offset: (offset, length with framing), read back from
    /// `runs` by [`crate::Repo::gc_mark`] (a diagnostic; a GC never lists them).
    #[cfg(any(test, feature = "fault-injection"))]
    pub live: Vec<(u64, u32)>,
    /// Of these, the offsets kept only as patch bases (their children are not live through them),
    /// increasing.
    pub base_only: Vec<u64>,
    /// Bytes of the live records.
    pub live_bytes: u64,
    /// Bytes of the base-only records.
    pub base_only_bytes: u64,
    /// Records of the window scanned for roots, and their bytes.
    pub window_records: u64,
    /// Bytes of the window.
    pub window_bytes: u64,
    /// Of these, the bytes whose roots came from an earlier GC's summary of them, not read.
    pub window_summarised_bytes: u64,
    /// Roots found in the window (distinct offsets below `keep_from`).
    pub roots: u64,
    /// Records traversed in `[region_end, keep_from)` (kept physically).
    pub boundary_records: u64,
    /// Patches decoded to find their children (the rest was decoded pointers-only).
    pub patches_decoded: u64,
    /// Bytes of the records read: the window once (but its summarised spans), plus every record
    /// read by the traversal and patch decoding (not the gaps between the records of a block the
    /// traversal reads at once, `mark/block.rs`).
    pub bytes_read: u64,
    /// Records read by the traversal and patch decoding (the window's sequential scan not
    /// included): each record the traversal visits once, plus the window's patches whose
    /// children are needed, and each patch base read once more to decode its patch (unless the
    /// small cache of decoded bases still held it).
    pub records_read: u64,
    /// Records the traversal visited: each live or boundary record exactly once (the pending set
    /// is keyed by offset and popped from the top, so no record is visited twice).
    pub records_visited: u64,
    /// The largest number of pending offsets (the traversal's frontier).
    pub max_pending: usize,
    /// Records of `[region_end, keep_from)` traversed as *full* (their children were followed),
    /// increasing: a late root there is safe only if it is one of them.
    pub boundary_full: Vec<u64>,
    /// Time of the window scan.
    pub scan_time: Duration,
    /// Time of the traversal.
    pub traverse_time: Duration,
}

#[cfg(any(test, feature = "fault-injection"))]
impl GcMark {
    /// Whether the record at `offset` is in the live set (the `live` list filled by
    /// [`crate::Repo::gc_mark`]).
    pub fn is_live(&self, offset: u64) -> bool {
        self.live.binary_search_by_key(&offset, |(start, _)| *start).is_ok()
    }

    /// Heap bytes held by the result's sets as a GC holds them (the runs and the base-only list;
    /// not the diagnostic `live` list).
    pub fn heap_bytes(&self) -> usize {
        self.runs.heap_bytes() + self.base_only.capacity() * 8
    }
}

/// How a pending record is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mark {
    /// Only as the base of a patch: its record, and its own base.
    BaseOnly,
    /// As a node or contents of a kept tree: the record and all its children.
    Full,
}

/// The pointers of one record, decoded without names or nodes.
#[derive(Default)]
struct Pointers {
    /// A patch's base.
    base: Option<u64>,
    /// Every other child pointer (a commit's tree; not its parents).
    children: Vec<u64>,
}

/// Entry tags (docs/format.md §3.5): the target in bits 0–1.
const TARGET_NODE: u8 = 0;
const TARGET_INLINE: u8 = 1;
const TARGET_CONTENTS: u8 = 2;
const TARGET_REMOVED: u8 = 3;

/// Skips `count` entries of a directory, `Values` inode or entries patch (`removals` allowed in
/// patches only), collecting their pointers.
fn entry_pointers(cursor: &mut Cursor<'_>, count: u64, removals: bool, out: &mut Vec<u64>) -> Result<()> {
    for _ in 0..count {
        let tag = cursor.u8()?;
        if tag & !0b111 != 0 {
            return Err(cursor.error(format!("bad entry tag {tag:#04x}")));
        }
        let len = cursor.length()?;
        cursor.take(len)?;
        match tag & 3 {
            TARGET_NODE | TARGET_CONTENTS => out.push(cursor.pointer()?.1),
            TARGET_INLINE => {
                let len = cursor.length()?;
                cursor.take(len)?;
            }
            TARGET_REMOVED if removals => {}
            _ => return Err(cursor.error("a removal where an entry was expected")),
        }
    }
    Ok(())
}

/// The pointers of the record at `offset` (kind and body), without building names or nodes.
fn record_pointers(kind: RecordKind, body: &[u8], offset: u64, out: &mut Pointers) -> Result<()> {
    out.base = None;
    out.children.clear();
    let mut cursor = Cursor::new(body, FileKind::Pack, offset);
    match kind {
        RecordKind::Contents => return Ok(()),
        RecordKind::Flat | RecordKind::Values => {
            let count = cursor.leb()?;
            entry_pointers(&mut cursor, count, false, &mut out.children)?;
        }
        RecordKind::Tree => {
            cursor.u8()?;
            cursor.leb()?;
            let count = cursor.u8()?;
            for _ in 0..count {
                cursor.u8()?;
                out.children.push(cursor.pointer()?.1);
            }
        }
        RecordKind::Commit => {
            // The tree only: parents are not followed (a kept commit's parent below `K` is
            // collected), and the rest of the record is not needed.
            out.children.push(cursor.pointer()?.1);
            return Ok(());
        }
        RecordKind::PatchEntries => {
            out.base = Some(cursor.pointer()?.1);
            cursor.u8()?;
            let count = cursor.leb()?;
            entry_pointers(&mut cursor, count, true, &mut out.children)?;
        }
        RecordKind::PatchTree => {
            out.base = Some(cursor.pointer()?.1);
            cursor.u8()?;
            cursor.leb()?;
            let count = cursor.u8()?;
            for _ in 0..count {
                cursor.u8()?;
                match cursor.u8()? {
                    0 => {}
                    1 => out.children.push(cursor.pointer()?.1),
                    flag => return Err(cursor.error(format!("bad bucket change flag {flag}"))),
                }
            }
        }
    }
    if !cursor.at_end() {
        return Err(cursor.error("trailing bytes in record body"));
    }
    Ok(())
}

fn is_patch(kind: RecordKind) -> bool {
    matches!(kind, RecordKind::PatchEntries | RecordKind::PatchTree)
}

/// Decoded nodes kept for patch decoding (bases are shared by consecutive versions), up to this
/// many bytes of estimated heap: the GC runs inside the writer's process, whose memory budget it
/// shares. 1 MiB marks as fast as 4, 16 or 64 MiB on the default trace.
const DECODED_CACHE_BYTES: u64 = 1 << 20;

/// The weight of a cached decoded node: its estimated heap bytes.
#[derive(Clone, Copy, Debug, Default)]
struct ChildrenWeight;

impl quick_cache::Weighter<u64, (Arc<NodeChildren>, u8)> for ChildrenWeight {
    fn weight(&self, _offset: &u64, (node, _): &(Arc<NodeChildren>, u8)) -> u64 {
        node.heap_bytes()
    }
}

/// The window's bytes, read sequentially in pieces of about 1 MiB.
#[derive(Default)]
struct WindowBuf {
    bytes: Vec<u8>,
    /// The global offset of `bytes[0]`.
    start: u64,
}

impl WindowBuf {
    /// Reads `len` bytes from `offset` into the buffer.
    fn fill<S: RecordSource>(
        &mut self,
        source: &S,
        offset: u64,
        len: u64,
        result: &mut GcMark,
    ) -> Result<()> {
        let len =
            usize::try_from(len).map_err(|_| StoreError::corrupt(FileKind::Pack, offset, "huge record"))?;
        self.bytes.resize(len, 0);
        source.read_raw(offset, &mut self.bytes)?;
        result.bytes_read += len as u64;
        self.start = offset;
        Ok(())
    }

    /// The record at `offset`: its kind, header length and whole bytes (framing and checksum
    /// included, not checked), reading more of the window when needed.
    fn record<S: RecordSource>(
        &mut self,
        source: &S,
        offset: u64,
        scan_end: u64,
        result: &mut GcMark,
    ) -> Result<(RecordKind, usize, &[u8])> {
        const PIECE: u64 = 1 << 20;
        // The record's head: a kind byte and a LEB128 length (at most 11 bytes).
        let head_end = offset.saturating_add(11).min(scan_end);
        if offset < self.start || head_end > self.start + self.bytes.len() as u64 {
            self.fill(source, offset, (scan_end - offset).min(PIECE), result)?;
        }
        let at = usize::try_from(offset - self.start).unwrap_or(usize::MAX);
        let mut cursor = Cursor::new(self.bytes.get(at..).unwrap_or_default(), FileKind::Pack, offset);
        let kind_byte = cursor.u8()?;
        let kind = RecordKind::from_byte(kind_byte).ok_or_else(|| {
            StoreError::corrupt(FileKind::Pack, offset, format!("unknown record kind {kind_byte}"))
        })?;
        let body_len = cursor.leb()?;
        if body_len > MAX_BODY_LEN {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                offset,
                format!("record body of {body_len} bytes"),
            ));
        }
        let header = cursor.position();
        let total = header as u64 + body_len + 4;
        if offset.checked_add(total).is_none_or(|end| end > scan_end) {
            return Err(StoreError::corrupt(FileKind::Pack, offset, "record runs past the scanned end"));
        }
        if offset + total > self.start + self.bytes.len() as u64 {
            // A record larger than what is left of the buffer: read it whole (bounded by the
            // format's body limit, checked above, and by the scanned end).
            self.fill(source, offset, total.max(PIECE).min(scan_end - offset), result)?;
        }
        let at = usize::try_from(offset - self.start).unwrap_or(usize::MAX);
        let record = usize::try_from(total)
            .ok()
            .and_then(|total| self.bytes.get(at..at.checked_add(total)?))
            .ok_or_else(|| StoreError::corrupt(FileKind::Pack, offset, "record past the window"))?;
        Ok((kind, header, record))
    }
}

/// The traversal's state.
struct Marker<'a, S: RecordSource> {
    source: &'a S,
    bounds: MarkBounds,
    pending: BTreeMap<u64, Mark>,
    decoded: quick_cache::unsync::Cache<u64, (Arc<NodeChildren>, u8), ChildrenWeight>,
    /// Scratch for a decoded patch's children.
    children: Vec<u64>,
    result: GcMark,
    /// Offsets below this are not followed (older GC segments kept whole).
    floor: u64,
    /// The live set being built (records pushed decreasing).
    live: LiveRunsBuilder,
    /// Window patches whose decoded children are needed, decoded [`PATCH_BATCH`] at a time.
    deferred: Vec<u64>,
    /// Records of the deferred patches' chains, read and decoded ahead of their turn
    /// ([`Marker::stage_chains`]), with their lengths.
    staged: HashMap<u64, (Decoded, u64)>,
}

/// Window patches decoded together: the records down their chains are read level by level, each
/// level's asked for at once (`POSIX_FADV_WILLNEED`), instead of one after the other.
const PATCH_BATCH: usize = 256;

impl<S: RecordSource> Marker<'_, S> {
    /// Adds `offset` to the pending set (records of the window are roots' sources, not targets).
    fn push(&mut self, offset: u64, mark: Mark) {
        if offset >= self.bounds.keep_from || offset < self.floor {
            return;
        }
        self.pending.entry(offset).and_modify(|old| *old = (*old).max(mark)).or_insert(mark);
    }

    /// The children of the node at `offset` and its patch chain length (at most `max_chain`),
    /// decoded through its bases; cached.
    fn decoded_node(&mut self, offset: u64, max_chain: u8) -> Result<(Arc<NodeChildren>, u8)> {
        if let Some((node, chain)) = self.decoded.get(&offset) {
            if *chain > max_chain {
                return Err(StoreError::corrupt(FileKind::Pack, offset, "patch chain too long"));
            }
            return Ok((node.clone(), *chain));
        }
        let (decoded, total) = match self.staged.remove(&offset) {
            Some(staged) => staged,
            None => self.source.with_record(offset, |kind, body| children::decode(kind, body, offset))?,
        };
        self.result.bytes_read += total;
        self.result.records_read += 1;
        let (node, chain) = match decoded {
            Decoded::Full(node) => (node, 0),
            Decoded::Patch { base, chain, changes } => {
                if chain > max_chain {
                    return Err(StoreError::corrupt(FileKind::Pack, offset, "patch chain too long"));
                }
                (self.patched(offset, base, chain, changes)?, chain)
            }
        };
        let node = Arc::new(node);
        self.decoded.insert(offset, (node.clone(), chain));
        Ok((node, chain))
    }

    /// The children of the patch at `offset` (chain length `chain` ≥ 1) with `changes`, applied to
    /// its base's, decoded through the cache.
    fn patched(
        &mut self,
        offset: u64,
        base: u64,
        chain: u8,
        changes: children::Changes,
    ) -> Result<NodeChildren> {
        // Recursion bounded by `MAX_CHAIN`: each level lowers the chain (≥ 1, checked on decode).
        let below = chain
            .checked_sub(1)
            .ok_or_else(|| StoreError::corrupt(FileKind::Pack, offset, "patch chain length 0"))?;
        let (base_node, base_chain) = self.decoded_node(base, below)?;
        if base_chain != below {
            return Err(StoreError::corrupt(FileKind::Pack, offset, "patch chain length mismatch"));
        }
        children::apply(&base_node, changes, offset)
    }

    /// Pushes the children of `node` as full.
    fn push_children(&mut self, node: &NodeChildren) {
        let mut children = std::mem::take(&mut self.children);
        children.clear();
        node.offsets(&mut children);
        for &child in &children {
            self.push(child, Mark::Full);
        }
        self.children = children;
    }

    /// [`Marker::push_patch_children`] for a patch of the window, in its batch.
    fn defer_patch_children(&mut self, patch: u64) -> Result<()> {
        self.deferred.push(patch);
        if self.deferred.len() >= PATCH_BATCH {
            self.flush_patches()?;
        }
        Ok(())
    }

    /// Pushes the children of the deferred patches, their chains staged first.
    fn flush_patches(&mut self) -> Result<()> {
        let mut batch = std::mem::take(&mut self.deferred);
        self.stage_chains(&batch);
        let pushed = batch.iter().try_for_each(|&patch| self.push_patch_children(patch));
        self.staged.clear();
        batch.clear();
        self.deferred = batch;
        pushed
    }

    /// Reads and decodes the records down the chains of `patches` that the cache of decoded nodes
    /// does not hold, level by level: each level's records are asked for at once, then read (each
    /// names its base, the next level). A record that fails to read or decode is left out: its
    /// decoding in [`Marker::decoded_node`] reports it.
    fn stage_chains(&mut self, patches: &[u64]) {
        let mut level: Vec<u64> = patches.to_vec();
        for _ in 0..=patch::MAX_CHAIN {
            level.sort_unstable_by(|a, b| b.cmp(a));
            level.dedup();
            level.retain(|offset| !self.decoded.contains_key(offset) && !self.staged.contains_key(offset));
            if level.is_empty() {
                return;
            }
            let source = self.source;
            read_ahead::ask_for_all(level.iter().copied(), |at, len| source.will_need(at, len));
            let mut next = Vec::with_capacity(level.len());
            for &offset in &level {
                let read = source.with_record(offset, |kind, body| children::decode(kind, body, offset));
                if let Ok((decoded, total)) = read {
                    if let Decoded::Patch { base, .. } = &decoded {
                        next.push(*base);
                    }
                    self.staged.insert(offset, (decoded, total));
                }
            }
            level = next;
        }
    }

    /// Pushes the children of the decoded patch at `offset` as full.
    fn push_patch_children(&mut self, offset: u64) -> Result<()> {
        self.result.patches_decoded += 1;
        let (node, _) = self.decoded_node(offset, patch::MAX_CHAIN)?;
        self.push_children(&node);
        Ok(())
    }

    /// Step 1: the window's roots, from the spans an earlier GC summarised
    /// ([`crate::gc::roots`]) and from its records, read sequentially, elsewhere; the spans read
    /// are summarised for the next GC.
    fn scan_window(&mut self, mut spans: Option<&mut RootSpans>) -> Result<()> {
        let MarkBounds { keep_from, scan_end, .. } = self.bounds;
        let mut window = WindowBuf::default();
        let mut offset = keep_from;
        while offset < scan_end {
            if let Some(span) = spans.as_deref().and_then(|spans| spans.at(offset, scan_end)) {
                self.apply_span(&span)?;
                self.result.window_records += span.records;
                self.result.window_bytes += span.end - offset;
                self.result.window_summarised_bytes += span.end - offset;
                offset = span.end;
                continue;
            }
            let step =
                spans.as_deref().map(RootSpans::span_bytes).filter(|&bytes| bytes > 0).unwrap_or(SPAN_BYTES);
            let aligned = (offset / step + 1).saturating_mul(step);
            let next_kept = spans.as_deref().and_then(|spans| spans.next_start(offset));
            let limit = next_kept.map_or(aligned, |next| next.min(aligned)).min(scan_end);
            let keep = spans.as_deref_mut().filter(|spans| spans.span_bytes() > 0);
            let (end, span) = self.scan_span(&mut window, offset, limit, keep.is_some())?;
            if let (Some(spans), Some(span)) = (keep, span) {
                self.apply_span(&span)?;
                spans.insert(offset, Arc::new(span));
            }
            offset = end;
        }
        self.flush_patches()?;
        self.result.roots = self.pending.len() as u64;
        Ok(())
    }

    /// Pushes what a span contributes to the roots (through [`Marker::push`]'s filter): its
    /// pointers, and for each patch whose base lies below the GC's commit, the base as base-only
    /// and the patch's decoded children (what a read of the span's records pushes).
    fn apply_span(&mut self, span: &RootSpan) -> Result<()> {
        for offset in span.pointers.iter() {
            self.push(offset, Mark::Full);
        }
        for (patch, base) in span.patches.iter() {
            if base < self.bounds.keep_from {
                self.push(base, Mark::BaseOnly);
                self.defer_patch_children(patch)?;
            }
        }
        Ok(())
    }

    /// Reads the records from `start` (a record boundary) up to the first one starting at or after
    /// `limit`; returns the end of the last one read. With `summarise`, returns what they point to
    /// below `start` (for [`Marker::apply_span`] and later GCs); without, pushes their roots.
    fn scan_span(
        &mut self,
        window: &mut WindowBuf,
        start: u64,
        limit: u64,
        summarise: bool,
    ) -> Result<(u64, Option<RootSpan>)> {
        let MarkBounds { keep_from, scan_end, .. } = self.bounds;
        let (mut own, mut patches, mut records) = (Vec::new(), PackedPairs::default(), 0);
        // The span's pointers repeat (the same old subtrees, block after block): deduplicated as
        // they accumulate, so that the list stays near the span's distinct targets.
        let mut dedup_at = 1 << 16;
        let mut pointers = Pointers::default();
        let mut offset = start;
        while offset < limit {
            let (kind, header, record) = window.record(self.source, offset, scan_end, &mut self.result)?;
            let total = record.len() as u64;
            if offset == keep_from && kind != RecordKind::Commit {
                return Err(StoreError::GcRefused(format!(
                    "the record at {keep_from} is a {}, not a commit",
                    kind.name()
                )));
            }
            let (data, crc) = record.split_at(record.len().saturating_sub(4));
            if crc32fast::hash(data) != u32::from_le_bytes(crc.try_into().unwrap_or_default()) {
                return Err(StoreError::corrupt(FileKind::Pack, offset, "record checksum mismatch"));
            }
            let body = data.get(header..).unwrap_or_default();
            record_pointers(kind, body, offset, &mut pointers)?;
            if summarise {
                own.extend(pointers.children.iter().filter(|&&child| child < start));
                if own.len() >= dedup_at {
                    own.sort_unstable();
                    own.dedup();
                    dedup_at = dedup_at.max(own.len() * 2);
                }
                if let Some(base) = pointers.base.filter(|&base| base < start) {
                    patches.push(offset, base);
                }
            } else {
                match pointers.base {
                    Some(base) if base < keep_from => {
                        // The base is not in the window: the decoded node's children are needed.
                        self.push(base, Mark::BaseOnly);
                        self.defer_patch_children(offset)?;
                    }
                    _ => {
                        for &child in &pointers.children {
                            self.push(child, Mark::Full);
                        }
                    }
                }
            }
            records += 1;
            self.result.window_records += 1;
            self.result.window_bytes += total;
            offset += total;
        }
        if !summarise {
            return Ok((offset, None));
        }
        patches.shrink();
        Ok((offset, Some(RootSpan { end: offset, pointers: PackedOffsets::new(&mut own), patches, records })))
    }

    /// Step 2: the descending traversal.
    fn traverse(&mut self) -> Result<()> {
        let region_end = self.bounds.region_end;
        let mut pointers = Pointers::default();
        let mut base_only: Vec<u64> = Vec::new();
        let mut read_ahead = ReadAhead::new();
        let mut block = Block::default();
        while let Some((offset, mark)) = self.pending.pop_last() {
            let pending = &self.pending;
            read_ahead.advance(
                offset,
                |below| pending.range(..below).rev().map(|(offset, _)| *offset),
                |at, len| self.source.will_need(at, len),
            );
            // A kept patch not decoded yet is decoded from this read (its children are needed);
            // any other record is decoded pointers-only.
            if block.bytes_at(offset).is_none() {
                block.fill(self.source, &self.pending, offset);
            }
            let cached = &self.decoded;
            let mut decode = |kind, body: &[u8]| {
                if kind == RecordKind::Commit {
                    return Err(StoreError::corrupt(
                        FileKind::Pack,
                        offset,
                        "a tree pointer to a commit record",
                    ));
                }
                record_pointers(kind, body, offset, &mut pointers)?;
                if mark == Mark::Full && is_patch(kind) && !cached.contains_key(&offset) {
                    return Ok((kind, Some(children::decode(kind, body, offset)?)));
                }
                Ok((kind, None))
            };
            let from_block =
                block.bytes_at(offset).map(|pre| self.source.with_record_from(offset, pre, &mut decode));
            let (decoded, total) = match from_block {
                Some(Ok(read)) => read,
                // A problem is reported as a read of the record alone reports it (a block holds
                // zeros where a segment has a hole; a read alone names the collected record).
                Some(Err(_)) | None => self.source.with_record(offset, &mut decode)?,
            };
            let (kind, decoded) = decoded;
            self.result.bytes_read += total;
            self.result.records_read += 1;
            self.result.records_visited += 1;
            let length = u32::try_from(total)
                .map_err(|_| StoreError::corrupt(FileKind::Pack, offset, "record too large"))?;
            if offset < region_end {
                self.live.push(offset, length)?;
                self.result.live_bytes += total;
                if mark == Mark::BaseOnly {
                    base_only.push(offset);
                    self.result.base_only_bytes += total;
                }
            } else {
                self.result.boundary_records += 1;
                if mark == Mark::Full {
                    self.result.boundary_full.push(offset);
                }
            }
            if let Some(base) = pointers.base {
                self.push(base, Mark::BaseOnly);
            }
            if mark == Mark::Full {
                if let Some(Decoded::Patch { base, chain, changes }) = decoded {
                    self.result.patches_decoded += 1;
                    let node = self.patched(offset, base, chain, changes)?;
                    self.push_children(&node);
                } else if is_patch(kind) {
                    self.push_patch_children(offset)?;
                } else {
                    for &child in &pointers.children {
                        self.push(child, Mark::Full);
                    }
                }
            }
            self.result.max_pending = self.result.max_pending.max(self.pending.len());
        }
        base_only.reverse();
        self.result.boundary_full.reverse();
        self.result.runs = std::mem::take(&mut self.live).finish();
        self.result.base_only = base_only;
        Ok(())
    }
}

/// Computes the live records of the region `[16, region_end)` for a GC keeping every commit at or
/// after `bounds.keep_from` (docs/gc-design.md §4).
#[cfg(any(test, feature = "fault-injection"))]
pub(crate) fn mark<S: RecordSource>(source: &S, bounds: MarkBounds) -> Result<GcMark> {
    mark_above(source, bounds, 0, Vec::new(), None)
}

/// [`mark`] ignoring every record below `floor` (older GC segments that this GC keeps whole: their
/// records only point lower, so nothing of the region is reached through them), taking the roots
/// of the window's spans that `spans` summarises from there, and adding the spans it reads to it
/// ([`crate::gc::roots`]). The live runs never extend across any of `splits` (the layout's chunk
/// and segment bounds: [`crate::gc::live`]).
pub(crate) fn mark_above<S: RecordSource>(
    source: &S,
    bounds: MarkBounds,
    floor: u64,
    splits: Vec<u64>,
    spans: Option<&mut RootSpans>,
) -> Result<GcMark> {
    let MarkBounds { keep_from, region_end, scan_end } = bounds;
    if region_end < PACK_HEADER_LEN
        || region_end > keep_from
        || keep_from >= scan_end
        || scan_end > source.end()
    {
        return Err(StoreError::GcRefused(format!(
            "bounds out of order: need {PACK_HEADER_LEN} ≤ region end {region_end} ≤ commit offset {keep_from} \
             < scan end {scan_end} ≤ published end {}",
            source.end()
        )));
    }
    let mut marker = Marker {
        source,
        bounds,
        pending: BTreeMap::new(),
        decoded: quick_cache::unsync::Cache::with_weighter(4096, DECODED_CACHE_BYTES, ChildrenWeight),
        children: Vec::new(),
        result: GcMark { bounds: Some(bounds), ..GcMark::default() },
        floor,
        live: LiveRunsBuilder::new(splits),
        deferred: Vec::new(),
        staged: HashMap::new(),
    };
    let start = Instant::now();
    marker.scan_window(spans)?;
    marker.result.scan_time = start.elapsed();
    marker.result.max_pending = marker.pending.len();
    let start = Instant::now();
    marker.traverse()?;
    marker.result.traverse_time = start.elapsed();
    Ok(marker.result)
}
