//! GC segments in the layout (docs/gc-design.md §3, docs/format.md §3.8): segment file names, the
//! [`SegmentExtent`] of a layout, opening the segments a control slot names, and the layout's
//! operations that involve collected space: opening a published state's layout, a reader's swap to
//! a newer one, the worker's snapshot, the writer's switch (`collect`), and the cleanup and checks
//! of the files a state does not name.

use super::{Extent, Layout, Pending, io_error, open_chunk};
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::control::SegmentRef;
use crate::format::names::{LEGACY_PACK, parse_chunk_name, parse_segment_name};
use crate::io::storage::Directory;
use crate::pack::handles::FilePool;
use crate::pack::segment::Segment;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex, RwLock};

/// A GC segment of the layout: the live records of a collected range (docs/gc-design.md §3.3), or
/// one chunk of an entry keeping chunks in place.
#[derive(Clone, Debug)]
pub struct SegmentExtent {
    /// What the layout reads: the slot's entry, or for one chunk of an entry keeping several in
    /// place, that chunk's own range and length (as an entry of one chunk would say).
    pub reference: SegmentRef,
    /// The slot's entry this extent belongs to (equal to `reference` but for the chunks of an
    /// entry keeping several in place).
    pub entry: SegmentRef,
    /// The opened, validated segment.
    pub segment: Arc<Segment>,
}

impl SegmentExtent {
    /// An extent that is a whole entry of the slot.
    pub fn whole(reference: SegmentRef, segment: Segment) -> SegmentExtent {
        SegmentExtent { reference, entry: reference, segment: Arc::new(segment) }
    }

    /// The file's name.
    pub fn name(&self) -> String {
        self.reference.file_name()
    }
}

/// The slot's entries of `segments` (the layout's, by increasing range): each entry once, with the
/// record bytes and the file bytes of its extents.
pub(crate) fn entries_of(segments: &[SegmentExtent]) -> Vec<(SegmentRef, u64, u64)> {
    let mut out: Vec<(SegmentRef, u64, u64)> = Vec::new();
    for segment in segments {
        let (records, file) = (segment.segment.summary().record_bytes, segment.reference.file_len);
        match out.last_mut() {
            Some((entry, total, files)) if *entry == segment.entry => {
                *total += records;
                *files += file;
            }
            _ => out.push((segment.entry, records, file)),
        }
    }
    out
}

/// Opens the chunks a kept-chunks entry names, each read as a segment of one run through `pool`
/// (so that thousands of them hold no more descriptors than the pool allows): each a format-3
/// chunk whose header names its number, the first starting at the entry's range start, each
/// next where the one before ends, each file holding its range, the last one's exactly as long
/// as the entry says and ending its range at the entry's end.
fn open_kept_chunks(
    dir: &Arc<dyn Directory>,
    pool: &Arc<FilePool>,
    reference: &SegmentRef,
    seqs: std::ops::Range<u32>,
) -> Result<Vec<SegmentExtent>> {
    let mismatch = |seq: u32, what: String| {
        StoreError::corrupt(
            FileKind::Pack,
            0,
            format!(
                "{}: {what}, not what the control file keeps in place",
                crate::format::names::chunk_name(seq)
            ),
        )
    };
    // Grown as they open (the count is the slot's: a missing chunk stops the loop).
    let mut chunks = Vec::new();
    for seq in seqs {
        let (probe, file) = open_chunk(&**dir, seq, false)?;
        let expected = chunks.last().map_or(reference.range_start, |(_, start, _, _)| *start);
        if probe.legacy || probe.start < expected || (chunks.is_empty() && probe.start != expected) {
            return Err(mismatch(seq, format!("a chunk starting at {}", probe.start)));
        }
        let (start, len) = (probe.start, probe.len);
        // Entered in the pool as soon as it is opened: the pool closes the least used ones.
        let chunk = probe.into_extent(dir, pool, file, false);
        chunks.push((seq, start, len, chunk));
    }
    let mut out = Vec::with_capacity(chunks.len());
    for (i, (seq, start, len, chunk)) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let end = chunks.get(i + 1).map_or(reference.range_end, |(_, next, _, _)| *next);
        if end <= *start || (last && *len != reference.file_len) {
            return Err(mismatch(
                *seq,
                format!("a chunk (start {start}, {len} bytes) ending its range at {end}"),
            ));
        }
        let own = SegmentRef::kept_chunk_entry(*seq, *start, end, *len);
        let segment = Segment::over_chunk(chunk.file.clone(), own.generation, (*start, end), chunk.data_at)?;
        out.push(SegmentExtent { reference: own, entry: *reference, segment: Arc::new(segment) });
    }
    Ok(out)
}

/// Opens and validates the segments a control slot names: each file's header, mapping and footer
/// ([`Segment::open`]), and its generation, range, length and footer CRC against the slot's;
/// chunks kept in place through `pool` ([`open_kept_chunks`]).
fn open_segments(
    dir: &Arc<dyn Directory>,
    pool: &Arc<FilePool>,
    references: &[SegmentRef],
) -> Result<Vec<SegmentExtent>> {
    let mut out = Vec::with_capacity(references.len());
    let mut previous_end = PACK_HEADER_LEN;
    for reference in references {
        let name = reference.file_name();
        let corrupt = |reason: String| StoreError::corrupt(FileKind::Segment, 0, format!("{name}: {reason}"));
        if reference.range_start != previous_end {
            return Err(StoreError::corrupt(
                FileKind::Control,
                96,
                format!(
                    "{name} starts at {}, not where the previous range ends ({previous_end})",
                    reference.range_start
                ),
            ));
        }
        previous_end = reference.range_end;
        if let Some(seqs) = reference.kept_chunks() {
            out.extend(open_kept_chunks(dir, pool, reference, seqs)?);
            continue;
        }
        let file = match dir.open(&name, false) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StoreError::MissingFile {
                    file: FileKind::Segment,
                    what: "segment",
                    name: name.clone(),
                    detail: e.to_string(),
                });
            }
            Err(e) => return Err(StoreError::io(FileKind::Segment, 0, "open", e)),
        };
        let segment = Segment::open(file)?;
        let header = segment.header();
        let summary = segment.summary();
        if header.generation != reference.generation
            || header.range_start != reference.range_start
            || header.range_end != reference.range_end
            || summary.file_len != reference.file_len
            || summary.footer_crc != reference.footer_crc
        {
            return Err(corrupt(format!(
                "the file (generation {}, range [{}, {}), {} bytes, footer CRC {:#010x}) is not the one the \
                 control file names",
                header.generation, header.range_start, header.range_end, summary.file_len, summary.footer_crc
            )));
        }
        out.push(SegmentExtent::whole(*reference, segment));
    }
    Ok(out)
}

impl Layout {
    /// [`Layout::discover`] for a collected store whose published state is `state` (recovery):
    /// its segments (checked against the slot), then the chunks present from `state.first_chunk`
    /// on without a gap, read-only.
    pub fn discover_collected(
        dir: Arc<dyn Directory>,
        state: &crate::format::control::ControlState,
    ) -> Result<Layout> {
        let pool = FilePool::new(crate::options::DEFAULT_OPEN_FILES);
        let segments = open_segments(&dir, &pool, &state.segments)?;
        let expected = segments.last().map_or(PACK_HEADER_LEN, |segment| segment.reference.range_end);
        let (first, file) = open_chunk(&*dir, state.first_chunk, false)?;
        if first.start != expected {
            return Err(StoreError::corrupt(
                FileKind::Pack,
                24,
                "the first live chunk does not join the segments",
            ));
        }
        let mut last = first.clone();
        let mut extents: Vec<Extent> = segments.into_iter().map(Extent::Segment).collect();
        extents.push(Extent::Chunk(first.into_extent(&dir, &pool, file, false)));
        while let Some(seq) = last.seq.checked_add(1) {
            let (next, file) = match open_chunk(&*dir, seq, false) {
                Ok(opened) => opened,
                // Gone since the listing, or left unfinished by a crashed roll: the pack ends here.
                Err(StoreError::MissingFile { .. } | StoreError::Corrupt { .. }) => break,
                // The system's failure (out of descriptors, say) is not the pack's end.
                Err(e) => return Err(e),
            };
            if !next.follows(&last) {
                break;
            }
            last = next.clone();
            extents.push(Extent::Chunk(next.into_extent(&dir, &pool, file, false)));
        }
        Ok(Layout {
            dir,
            writable: false,
            extents: RwLock::new(extents),
            pending: Mutex::default(),
            pool,
            refresher: super::refresh::Refresher::at(state.gc_generation, state.keep_from),
            usage: crate::io::usage::DiskUsage::default(),
        })
    }

    /// Opens the layout a published state names: its GC segments (each checked against the
    /// slot: header, length, footer CRC), then its chunks `first_chunk..=head_chunk`, the first
    /// of which starts where the last segment ends (16 without segments).
    pub fn open_state(
        dir: Arc<dyn Directory>,
        state: &crate::format::control::ControlState,
        writable: bool,
        pool: Arc<FilePool>,
    ) -> Result<Layout> {
        let segments = open_segments(&dir, &pool, &state.segments)?;
        let layout = Layout::open(
            dir,
            (state.first_chunk, state.head_chunk),
            state.head_start,
            state.pack_end,
            writable,
            pool,
        )?;
        let expected_start = segments.last().map_or(PACK_HEADER_LEN, |segment| segment.reference.range_end);
        let first_start = layout.extents().first().map_or(PACK_HEADER_LEN, Extent::start);
        if first_start != expected_start {
            return Err(StoreError::corrupt(
                FileKind::Control,
                72,
                format!(
                    "the first live chunk {} starts at {first_start}, not where the collected space ends \
                     ({expected_start})",
                    state.first_chunk
                ),
            ));
        }
        if !segments.is_empty() {
            let mut extents = layout.extents.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            let chunks = std::mem::take(&mut *extents);
            extents.extend(segments.into_iter().map(Extent::Segment));
            extents.extend(chunks);
        }
        layout.set_published(state.gc_generation, state.keep_from);
        Ok(layout)
    }

    /// A read-only copy of this layout as it is now (the same open files): what a GC worker
    /// reads while the writer appends and rolls.
    pub fn snapshot(&self) -> Layout {
        Layout {
            dir: self.dir.clone(),
            writable: false,
            extents: RwLock::new(self.extents().clone()),
            pending: Mutex::new(Pending::default()),
            pool: self.pool.clone(),
            refresher: super::refresh::Refresher::at(self.gc_generation(), self.keep_from()),
            usage: crate::io::usage::DiskUsage::default(),
        }
    }

    /// The directory holding the files.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        &self.dir
    }

    /// The bounded set of open chunk files this layout reads through.
    pub fn pool(&self) -> &Arc<FilePool> {
        &self.pool
    }

    /// The GC segments, by increasing range.
    pub fn segments(&self) -> Vec<SegmentExtent> {
        self.extents()
            .iter()
            .filter_map(|extent| match extent {
                Extent::Segment(segment) => Some(segment.clone()),
                Extent::Chunk(_) => None,
            })
            .collect()
    }

    /// Sequence number and start of the chunk holding global offset `global`.
    pub fn chunk_holding(&self, global: u64) -> Option<(u32, u64)> {
        let extents = self.extents();
        let index = extents.partition_point(|extent| extent.start() <= global);
        extents.get(index.checked_sub(1)?).and_then(Extent::as_chunk).map(|chunk| (chunk.seq, chunk.start))
    }

    /// The switch of a GC: the segment `new` replaces every segment whose range starts at or
    /// above its start (merged into it) and every chunk below `first_chunk`. Returns the names of
    /// the files no longer in the layout (to unlink once no published slot names them).
    ///
    /// `kept_chunks`, the chunks the GC keeps in place (each read as a segment), join the
    /// segments below `new` instead of being retired.
    pub fn collect(
        &self,
        new: Option<SegmentExtent>,
        first_chunk: u32,
        kept_chunks: Vec<SegmentExtent>,
    ) -> Vec<String> {
        let mut extents = self.extents.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let merged_from = new.as_ref().map_or(u64::MAX, |segment| segment.reference.range_start);
        let kept_seqs: Vec<u32> =
            kept_chunks.iter().filter_map(|segment| segment.reference.kept_chunk()).collect();
        let mut retired = Vec::new();
        let mut kept = Vec::with_capacity(extents.len());
        for extent in extents.drain(..) {
            let drop = match &extent {
                Extent::Chunk(chunk) => chunk.seq < first_chunk,
                Extent::Segment(segment) => segment.reference.range_start >= merged_from,
            };
            if !drop {
                kept.push(extent);
                continue;
            }
            if matches!(&extent, Extent::Chunk(chunk) if kept_seqs.contains(&chunk.seq)) {
                continue; // Replaced by its segment view, below.
            }
            retired.push(match &extent {
                Extent::Chunk(chunk) => chunk.name(),
                Extent::Segment(segment) => segment.name(),
            });
        }
        let split = kept.iter().position(|extent| extent.as_chunk().is_some()).unwrap_or(kept.len());
        let chunks = kept.split_off(split);
        kept.extend(kept_chunks.into_iter().map(Extent::Segment));
        kept.extend(new.map(Extent::Segment));
        kept.extend(chunks);
        *extents = kept;
        retired
    }

    /// For a writer at open (after a crash): removes the files of the store directory the
    /// published state does not name: chunks below the first live chunk (retired by a GC whose
    /// deletion did not happen) and segments of other generations (written by a GC that never
    /// switched, or merged away). Syncs the directory if it removed any. Returns their names. Only
    /// the store directory itself is looked at, never a lower directory (issue 39 item 1).
    pub fn remove_unnamed(&self) -> Result<Vec<String>> {
        let first = self.first_seq();
        let named: Vec<u64> = self.segments().iter().map(|segment| segment.reference.generation).collect();
        let kept: Vec<u32> =
            self.segments().iter().filter_map(|segment| segment.reference.kept_chunk()).collect();
        let names = self.dir.list_upper().map_err(|e| io_error(0, "list", e))?;
        let unnamed: Vec<String> = names
            .into_iter()
            .filter(|name| {
                parse_chunk_name(name).is_some_and(|seq| seq < first && !kept.contains(&seq))
                    || parse_segment_name(name).is_some_and(|generation| !named.contains(&generation))
                    || (first > 0 && name == LEGACY_PACK)
            })
            .collect();
        for name in &unnamed {
            // Already gone: a previous handle's background unlink of retired files got there first.
            match self.dir.remove_upper(name) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_error(0, "remove unnamed file", e));
                }
                _ => {}
            }
        }
        if !unnamed.is_empty() {
            self.dir.sync().map_err(|e| io_error(0, "sync directory", e))?;
        }
        Ok(unnamed)
    }

    /// Bytes of records the layout holds: the segments' runs and the chunks' ranges up to `end`.
    pub fn stored_bytes(&self, end: u64) -> u64 {
        let extents = self.extents();
        let mut total = 0;
        for (i, extent) in extents.iter().enumerate() {
            total += match extent {
                Extent::Segment(segment) => segment.segment.summary().record_bytes,
                Extent::Chunk(chunk) => {
                    extents.get(i + 1).map_or(end, Extent::start).saturating_sub(chunk.start)
                }
            };
        }
        total
    }

    /// The segment files: name, global range and bytes of records kept.
    pub fn segment_files(&self) -> Vec<(String, u64, u64, u64)> {
        self.segments()
            .iter()
            .map(|segment| {
                let reference = segment.reference;
                (
                    segment.name(),
                    reference.range_start,
                    reference.range_end,
                    segment.segment.summary().record_bytes,
                )
            })
            .collect()
    }

    /// Opens every segment again and checks it against the layout (fsck).
    pub(super) fn check_segments(&self) -> Vec<(String, String)> {
        let segments = self.segments();
        let mut problems = Vec::new();
        let references: Vec<SegmentRef> =
            entries_of(&segments).into_iter().map(|(entry, ..)| entry).collect();
        if let Err(e) = open_segments(&self.dir, &self.pool, &references) {
            problems.push((segments.first().map(SegmentExtent::name).unwrap_or_default(), e.to_string()));
        }
        for segment in &segments {
            // Each run must hold whole framed records.
            for (global, position, len) in segment.segment.runs() {
                let mut at = 0u64;
                while at < len {
                    let mut head = [0u8; 11];
                    let take = usize::try_from((len - at).min(11)).unwrap_or(0);
                    let piece = head.get_mut(..take).unwrap_or_default();
                    if segment.segment.storage().read_at(position + at, piece).is_err() {
                        problems.push((segment.name(), format!("run at {global} cannot be read")));
                        break;
                    }
                    match crate::format::codec::record_len(piece, global + at) {
                        Ok(total) if at + total <= len => at += total,
                        _ => {
                            problems.push((
                                segment.name(),
                                format!("run at {global}: no whole record at global offset {}", global + at),
                            ));
                            break;
                        }
                    }
                }
            }
        }
        problems
    }
}
