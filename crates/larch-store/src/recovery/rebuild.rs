//! Recovery of a store whose control file has no valid slot (both torn, or the file lost):
//! the layouts the pack's files allow, rebuilt from the chunk headers and the GC segments' headers
//! (docs/gc-design.md §8, *`larch recover`*). Nothing is written or unlinked here.
//!
//! The chunks are taken in *runs*: chunk files whose headers check out, each continuing the one
//! below it (consecutive numbers, starting inside the previous one's data). The run holding the
//! newest chunk comes first, then the older runs (below a chunk missing or damaged). A candidate
//! layout is a run from one of its chunks on, that chunk being the first live one, tried from the
//! lowest up (the lowest keeps the most):
//!
//! - a chunk starting at 16 (chunk 0, or a format-2 `pack`): the pre-GC layout, every segment
//!   ignored (nothing is lost; collected commits become readable again until the next GC);
//! - another chunk: the segments whose ranges join it, chosen from its start down to 16 (at each
//!   step the newest segment ending where the chain stands), with `keep_from`,
//!   `index_keep_from` and `gc_generation` from the newest segment's header.
//!
//! An older run gives the commits below the gap (chunk 0's run: as for a store never collected).

use crate::format::codec::PACK_HEADER_LEN;
use crate::format::control::{ControlState, MAX_SEGMENTS, SegmentRef};
use crate::format::names::{CHUNK_HEADER_LEN, LEGACY_PACK, decode_chunk_header, parse_chunk_name};
use crate::io::storage::Directory;
use crate::pack::segment::Segment;
use std::fmt::Write as _;

/// A layout recovery can try.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    /// `None`: the chunks from chunk 0 up (the pre-GC layout). `Some`: the GC fields of a
    /// collected layout (`gc_generation`, `keep_from`, `index_keep_from`, `first_chunk`,
    /// `segments`; the rest is filled by the plan).
    pub(super) gc: Option<ControlState>,
    /// The GC commit named by the newest segment's header (checked against the pack's record at
    /// `keep_from`).
    pub(super) gc_commit: Option<larch_core::Hash>,
    /// What the layout is, for reports and errors.
    pub(super) description: String,
}

/// A chunk file whose header checks out.
#[derive(Clone, Copy, Debug)]
struct ChunkInfo {
    seq: u32,
    start: u64,
    /// Bytes of records the file holds (its length minus its header).
    data: u64,
}

/// A segment file that opened and validated.
#[derive(Clone, Debug)]
struct SegmentInfo {
    reference: SegmentRef,
    keep_from: u64,
    index_keep_from: u64,
    commit: larch_core::Hash,
}

/// The chunk file `name` (`chunk.<seq>` or a format-2 `pack`), if its header checks out.
fn chunk_info(dir: &dyn Directory, name: &str) -> Result<ChunkInfo, String> {
    let file = dir.open(name, false).map_err(|e| format!("{name}: {e}"))?;
    let len = file.len().map_err(|e| format!("{name}: {e}"))?;
    if name == LEGACY_PACK {
        let mut header = [0u8; PACK_HEADER_LEN as usize];
        file.read_at(0, &mut header).map_err(|e| format!("{name}: header: {e}"))?;
        crate::format::names::check_pack_header(&header).map_err(|e| format!("{name}: {e}"))?;
        return Ok(ChunkInfo { seq: 0, start: PACK_HEADER_LEN, data: len.saturating_sub(PACK_HEADER_LEN) });
    }
    let mut header = [0u8; CHUNK_HEADER_LEN as usize];
    file.read_at(0, &mut header).map_err(|e| format!("{name}: header: {e}"))?;
    let (seq, start) = decode_chunk_header(&header, name).map_err(|e| e.to_string())?;
    if parse_chunk_name(name) != Some(seq) {
        return Err(format!("{name}: its header says chunk {seq}"));
    }
    Ok(ChunkInfo { seq, start, data: len.saturating_sub(CHUNK_HEADER_LEN) })
}

/// The generation a segment file name (`seg.` and at least 6 digits, as written) carries.
fn segment_generation(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("seg.")?;
    if digits.len() < 6 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let generation: u64 = digits.parse().ok()?;
    (crate::format::names::segment_name(generation) == name).then_some(generation)
}

/// Whether `name` is a segment file's name.
pub(super) fn is_segment_name(name: &str) -> bool {
    segment_generation(name).is_some()
}

/// The segment file `name` of generation `generation`, if it opens and validates.
fn segment_info(dir: &dyn Directory, name: &str, generation: u64) -> Result<SegmentInfo, String> {
    let file = dir.open(name, false).map_err(|e| format!("{name}: {e}"))?;
    let segment = Segment::open(file).map_err(|e| format!("{name}: {e}"))?;
    let header = *segment.header();
    if header.generation != generation {
        return Err(format!("{name}: its header says generation {}", header.generation));
    }
    if header.range_start >= header.range_end || header.range_start < PACK_HEADER_LEN {
        return Err(format!(
            "{name}: range [{}, {}) is empty or below 16",
            header.range_start, header.range_end
        ));
    }
    let summary = segment.summary();
    Ok(SegmentInfo {
        reference: SegmentRef {
            generation,
            range_start: header.range_start,
            range_end: header.range_end,
            file_len: summary.file_len,
            footer_crc: summary.footer_crc,
        },
        keep_from: header.keep_from,
        index_keep_from: header.index_keep_from,
        commit: header.commit,
    })
}

/// Whether chunk `above` continues chunk `below`: the next sequence number, starting within
/// `below`'s records.
fn joins(below: &ChunkInfo, above: &ChunkInfo) -> bool {
    below.seq.checked_add(1) == Some(above.seq)
        && below.start <= above.start
        && above.start <= below.start.saturating_add(below.data)
}

/// The segments that join global offset `end` down to 16: at each step the newest segment
/// ending where the chain stands; at the bottom, the store's first chunks `first` (a run of
/// format-3 chunks, each continuing the one before, the first starting at 16) when one of them
/// holds records up to where the chain stands and no segment ends there (chunks the first GC kept
/// in place, up to that one). `None` when no chain reaches 16 (or it is longer than a control slot
/// holds). The result is by increasing range, with the kept chunks' entry apart.
fn chain_to(
    segments: &[SegmentInfo],
    first: &[ChunkInfo],
    end: u64,
) -> Option<(Option<SegmentRef>, Vec<SegmentInfo>)> {
    let mut chain: Vec<SegmentInfo> = Vec::new();
    let mut kept = None;
    let mut at = end;
    // Each step moves `at` strictly down (ranges are not empty), so the chain uses a segment at
    // most once; the bound is the slot's capacity.
    while at != PACK_HEADER_LEN {
        if chain.len() + usize::from(kept.is_some()) >= MAX_SEGMENTS {
            return None;
        }
        let next = segments
            .iter()
            .filter(|segment| segment.reference.range_end == at)
            .max_by_key(|segment| segment.reference.generation);
        match next {
            Some(next) => {
                at = next.reference.range_start;
                chain.push(next.clone());
            }
            None => {
                // The chunk whose records reach `at` (bytes past it, unpublished ones of a crash
                // before it was sealed, are not part of its range: as in `joins`).
                let bottom = first.first()?;
                // The newest chunk starting below `at`: an older one's unpublished bytes may reach
                // past where the next one starts.
                let last = first.iter().rposition(|chunk| chunk.start < at).filter(|&i| {
                    first.get(i).is_some_and(|chunk| at <= chunk.start.saturating_add(chunk.data))
                });
                if chain.is_empty() || bottom.start != PACK_HEADER_LEN {
                    return None;
                }
                let last = first.get(last?)?;
                let count = last.seq.checked_sub(bottom.seq)?.checked_add(1)?;
                let file_len = last.data.saturating_add(CHUNK_HEADER_LEN);
                kept = Some(SegmentRef::kept_chunks_entry(bottom.seq, count, bottom.start, at, file_len)?);
                at = PACK_HEADER_LEN;
            }
        }
    }
    chain.reverse();
    Some((kept, chain))
}

/// The candidate layouts of the pack's files in `dir`, in the order recovery tries them; an error
/// message saying what is missing when there is none.
pub(super) fn candidates(dir: &dyn Directory) -> Result<Vec<Candidate>, String> {
    let mut names = dir.list().map_err(|e| format!("listing the store directory: {e}"))?;
    names.sort();
    let mut chunks = Vec::new();
    let mut problems = Vec::new();
    for name in &names {
        if name != LEGACY_PACK && parse_chunk_name(name).is_none() {
            continue;
        }
        // A format-2 `pack` is chunk 0 only when `chunk.000000` does not exist.
        if name == LEGACY_PACK && names.iter().any(|other| parse_chunk_name(other) == Some(0)) {
            continue;
        }
        match chunk_info(dir, name) {
            Ok(info) => chunks.push(info),
            Err(problem) => problems.push(problem),
        }
    }
    chunks.sort_by_key(|chunk| chunk.seq);
    let mut segments = Vec::new();
    for name in &names {
        let Some(generation) = segment_generation(name) else { continue };
        match segment_info(dir, name, generation) {
            Ok(info) => segments.push(info),
            Err(problem) => problems.push(problem),
        }
    }
    // Runs of chunks, each chunk continuing the one below it; the newest run first.
    let mut runs: Vec<Vec<ChunkInfo>> = Vec::new();
    for chunk in &chunks {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|below| joins(below, chunk)) => run.push(*chunk),
            _ => runs.push(vec![*chunk]),
        }
    }
    runs.reverse();
    // The store's first chunks, which the first GC may have kept in place (format-3 chunk files,
    // not a format-2 `pack`): the run of chunks from the one starting at 16.
    let first_chunks: Vec<ChunkInfo> = chunks
        .iter()
        .position(|chunk| {
            chunk.start == PACK_HEADER_LEN
                && names.iter().any(|name| parse_chunk_name(name) == Some(chunk.seq))
        })
        .map(|at| {
            let mut run: Vec<ChunkInfo> = Vec::new();
            for chunk in chunks.iter().skip(at) {
                if run.last().is_some_and(|below| !joins(below, chunk)) {
                    break;
                }
                run.push(*chunk);
            }
            run
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for run in &runs {
        let head = run.last().map_or(0, |chunk| chunk.seq);
        for chunk in run {
            if chunk.start == PACK_HEADER_LEN {
                out.push(Candidate {
                    gc: None,
                    gc_commit: None,
                    description: format!(
                        "the pre-GC layout (chunks {}..={head}, segments ignored)",
                        chunk.seq
                    ),
                });
                continue;
            }
            let Some((kept, chain)) = chain_to(&segments, &first_chunks, chunk.start) else { continue };
            let Some(newest) = chain.iter().max_by_key(|segment| segment.reference.generation) else {
                continue;
            };
            if newest.keep_from < chunk.start {
                problems.push(format!(
                    "seg.{:06} says the GC commit is at {}, below chunk {} (start {})",
                    newest.reference.generation, newest.keep_from, chunk.seq, chunk.start
                ));
                continue;
            }
            let gc = ControlState {
                gc_generation: newest.reference.generation,
                keep_from: newest.keep_from,
                index_keep_from: newest.index_keep_from,
                first_chunk: chunk.seq,
                segments: kept.into_iter().chain(chain.iter().map(|segment| segment.reference)).collect(),
                ..ControlState::default()
            };
            let generations: Vec<String> = kept
                .iter()
                .map(|kept| format!("{} (kept in place)", kept.describe()))
                .chain(chain.iter().map(|segment| format!("seg.{:06}", segment.reference.generation)))
                .collect();
            out.push(Candidate {
                gc: Some(gc),
                gc_commit: Some(newest.commit),
                description: format!(
                    "the collected layout {} then chunks {}..={head} (GC generation {})",
                    generations.join(", "),
                    chunk.seq,
                    newest.reference.generation
                ),
            });
        }
    }
    let run = runs.first().map(Vec::as_slice).unwrap_or_default();
    if out.is_empty() {
        return Err(missing_report(&chunks, run, &segments, &problems, dir.layers().is_some()));
    }
    Ok(out)
}

/// What is missing for a layout: the chunks and segments found, and what could not be read.
fn missing_report(
    chunks: &[ChunkInfo],
    run: &[ChunkInfo],
    segments: &[SegmentInfo],
    problems: &[String],
    layered: bool,
) -> String {
    let mut out = String::new();
    match (run.first(), run.last()) {
        (Some(first), Some(last)) => {
            let _ = write!(
                out,
                "no chunk file starts at 16 and no chain of GC segments from 16 joins a chunk present (the \
                 newest chunks: chunk.{:06} to chunk.{:06}, from global offset {})",
                first.seq, last.seq, first.start
            );
        }
        _ => out.push_str("no chunk file with a valid header was found"),
    }
    if !chunks.is_empty() && chunks.len() != run.len() {
        let others: Vec<String> = chunks
            .iter()
            .filter(|chunk| !run.iter().any(|kept| kept.seq == chunk.seq))
            .map(|chunk| format!("chunk.{:06}", chunk.seq))
            .collect();
        let _ = write!(out, "; older chunks, not joined to them: {}", others.join(", "));
    }
    if segments.is_empty() {
        out.push_str("; no valid segment file");
    } else {
        let list: Vec<String> = segments
            .iter()
            .map(|segment| {
                format!(
                    "seg.{:06} [{}, {})",
                    segment.reference.generation, segment.reference.range_start, segment.reference.range_end
                )
            })
            .collect();
        let _ = write!(out, "; segments: {}", list.join(", "));
    }
    if !problems.is_empty() {
        let _ = write!(out, "; unreadable: {}", problems.join("; "));
    }
    if !layered {
        out.push_str(
            "; if the store is in archive mode, its older chunks are in the lower directory: give it with \
             --lower DIR",
        );
    }
    out
}
