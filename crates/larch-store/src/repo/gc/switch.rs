//! The GC's switch and deletion (docs/gc-design.md §4–§5): a finished GC's fields go into the
//! slot being published, the in-memory layout and commit map follow once it is durable, and the
//! retired files are unlinked after one more publish.

use crate::error::{FileKind, Result, StoreError};
use crate::format::control::ControlState;
use crate::format::index;
use crate::format::names::segment_name;
use crate::gc::report::GcReport;
use crate::gc::run::{GcRun, NextSlice, Retired, Switch};
use crate::gc::worker::SliceCarry;
use crate::gc::worker::lock_roots;
use crate::pack::layout::SegmentExtent;
use crate::repo::Repo;
use larch_core::Hash;
use std::time::Instant;

impl Repo {
    /// Gives up a switch that cannot be published (the store stays as it is). Its segment was
    /// written in the store directory: it is removed from there only, never from a lower one.
    pub(crate) fn gc_abandon(&mut self, switch: &Switch, reason: &str) {
        let _ = switch.run.dir.remove_upper(&segment_name(switch.run.generation));
        self.gc_after.failed = Some(StoreError::GcAbandoned(reason.to_string()));
    }

    /// At a publish: takes the GC if its worker is done and its late roots are live. An abandoned
    /// GC (worker error, late root not live) is recorded for `gc_finish` and its segment removed.
    pub(crate) fn gc_take_switch(&mut self) -> Option<Switch> {
        if !self.gc.as_ref().is_some_and(|run| run.is_finished()) {
            return None;
        }
        let mut run = *self.gc.take()?;
        let checked = Instant::now();
        self.source.reader.set_cache_reserve(0);
        let joined = run.take_result();
        let abandon = |this: &mut Repo, run: &GcRun, e: StoreError| {
            let _ = run.dir.remove_upper(&segment_name(run.generation));
            this.gc_after.failed = Some(match e {
                e @ StoreError::GcAbandoned(_) => e,
                other => StoreError::GcAbandoned(other.to_string()),
            });
        };
        let output = match joined {
            Ok(output) => output,
            Err(e) => {
                abandon(self, &run, e);
                return None;
            }
        };
        // Late roots: every existing record the writer pointed to during the GC must survive it.
        // The worker checked those written before it finished; the rest (about one commit's) here.
        // Roots below the region are in old segments kept whole.
        let rest = std::mem::take(&mut *lock_roots(&run.late_roots)).sorted_from(output.region_start);
        let layout = self.source.reader.layout().clone();
        let read = |offset: u64, buf: &mut [u8]| layout.read(offset, buf);
        let unsafe_root =
            crate::gc::worker::first_unsafe_root(rest, &output, run.region_end, run.keep_from, &read);
        if let Some(root) = unsafe_root {
            let e = StoreError::GcAbandoned(format!(
                "a commit written during the GC points to the record at {root}, which the GC of commit {} \
                 would remove; run the GC again",
                run.commit
            ));
            abandon(self, &run, e);
            return None;
        }
        let pause = checked.elapsed();
        Some(Switch { run, output, checked, pause, branches_removed: Vec::new() })
    }

    /// Puts a switch's fields into the state being published.
    pub(crate) fn gc_apply(&self, switch: &mut Switch, state: &mut ControlState) {
        let run = &switch.run;
        state.gc_generation = run.generation;
        state.keep_from = run.keep_from;
        state.index_keep_from = switch.output.index_keep_from;
        state.first_chunk = switch.output.first_chunk.unwrap_or(run.first_chunk);
        state.segments.retain(|segment| segment.range_start < switch.output.region_start);
        if let Some(kept) = switch.output.kept_chunks.first() {
            state.segments.push(kept.entry);
        }
        if let Some(segment) = &switch.output.segment {
            state.segments.push(segment.reference);
        }
        let removed: Vec<String> = state
            .branches
            .iter()
            .filter(|(_, (_, offset))| *offset < run.keep_from)
            .map(|(name, _)| name.clone())
            .collect();
        for name in &removed {
            state.branches.remove(name);
        }
        switch.branches_removed = removed;
    }

    /// After the switch's slot is durable: the layout and the commit map change, the region's
    /// files are retired, the report is kept for `gc_finish`.
    pub(crate) fn gc_switched(&mut self, switch: Switch, generation: u64) {
        let started = Instant::now();
        let Switch { run, output, checked, pause, branches_removed } = switch;
        let layout = self.source.reader.layout().clone();
        // One name per entry of the segment list (as `segments_marked` counts them).
        let merged: Vec<String> = crate::pack::layout::entries_of(&layout.segments())
            .iter()
            .filter(|(entry, ..)| entry.range_start >= output.region_start)
            .map(|(entry, ..)| entry.describe())
            .collect();
        let first_chunk = output.first_chunk.unwrap_or(run.first_chunk);
        let retired = layout.collect(output.segment.clone(), first_chunk, output.kept_chunks.clone());
        let region_bytes: u64 = retired
            .iter()
            .map(|name| run.dir.open(name, false).and_then(|file| file.len()).unwrap_or(0))
            .sum();
        let complete = output.first_chunk.is_none();
        // The deep-mark trigger's baseline: measured by a deep mark (the unmerged segments' live
        // bytes and the new segment), else kept (at this handle's first GC: the segments' bytes).
        let segment_bytes: u64 =
            layout.segments().iter().map(|segment| segment.segment.summary().record_bytes).sum();
        self.gc_after.baseline = if run.deep {
            let unmerged: u64 = output
                .candidates
                .iter()
                .filter(|(segment, _)| segment.range_start < output.region_start)
                .map(|(_, live)| live)
                .sum();
            Some(unmerged + output.copied_bytes)
        } else {
            // A shallow GC leaves it (the new segments are the growth the trigger measures).
            Some(self.gc_after.baseline.unwrap_or(segment_bytes))
        };
        let segments_garbage =
            output.candidates.iter().map(|(segment, live)| segment.record_bytes.saturating_sub(*live)).sum();
        self.commits.retain(|_, offset| *offset >= run.keep_from);
        self.gc_after.oldest_kept = Some(run.commit);
        self.gc_after.appended_during_last = self.state.pack_end.saturating_sub(run.pack_end_at_start);
        if let Some(last) = self.last_commit
            && last < run.keep_from
        {
            self.last_commit = None;
        }
        if !retired.is_empty() {
            self.gc_after.retired.push(Retired { published_at: generation, files: retired });
        }
        let report = GcReport {
            commit: run.commit,
            generation: run.generation,
            disk_before: run.disk_before,
            disk_after: output.disk_after_copy,
            disk_peak: run.disk_before.max(output.disk_after_copy),
            region_bytes,
            live_records: output.copied_records,
            copied_bytes: output.copied_bytes,
            base_only_records: output.base_only.len() as u64,
            chunks_removed: 0,
            branches_removed,
            mark_time: output.mark_time,
            window_bytes: output.window.0,
            window_summarised_bytes: output.window.1,
            root_summary_bytes: output.summary_bytes,
            copy_time: output.copy_time,
            switch_pause: pause + started.elapsed(),
            total_time: checked.duration_since(run.started),
            bytes_waiting: 0,
            segment: output.segment.as_ref().map(SegmentExtent::name),
            kept_in_place: output
                .kept_chunks
                .first()
                .map(|kept| (kept.entry.describe(), kept.entry.range_end - kept.entry.range_start)),
            deep_mark: run.deep,
            segments_marked: output.candidates.len(),
            merged_segments: merged,
            segments_garbage,
            complete,
            slice: run.slice,
            marks: u32::from(output.marked),
            mark_records: output.mark_records.0,
            mark_reads: output.mark_records.1,
        };
        self.gc_after.report = Some(report);
        // The next slice takes this one's mark (the live records of the chunks left).
        self.gc_after.next_slice = (!complete).then(|| NextSlice {
            commit: run.commit,
            options: run.options,
            slice: run.slice + 1,
            disk_before: run.disk_before,
            carry: Box::new(SliceCarry {
                live: output.live,
                base_only: output.base_only,
                boundary_full: output.boundary_full,
                ends: output.later_ends,
            }),
            keep_from: run.keep_from,
            late_roots: crate::gc::late_roots::LateRoots::default(),
        });
    }

    /// After a publish of control generation `generation`: unlinks the files retired by switches
    /// published before it (both slots are now post-GC). A failure leaves them for the next
    /// publish (or the next writer's open).
    pub(crate) fn gc_delete_retired(&mut self, generation: u64) {
        if !self.gc_after.retired.iter().any(|retired| retired.published_at < generation) {
            return;
        }
        let dir = self.source.reader.layout().directory().clone();
        let mut removed_chunks = 0;
        if self.gc_after.sync_delete {
            self.gc_after.retired.retain_mut(|retired| {
                if retired.published_at >= generation {
                    return true;
                }
                retired.files.retain(|name| match dir.remove(name) {
                    Ok(()) => {
                        removed_chunks += usize::from(parse_seq(name).is_some());
                        false
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                    Err(_) => true,
                });
                !retired.files.is_empty()
            });
        } else {
            // Unlinking large files takes milliseconds: a background thread does it, so that the
            // commit whose publish allowed it does not wait. A failed unlink leaves the file for
            // the next writer's open (it is named by no slot).
            let (due, waiting): (Vec<Retired>, Vec<Retired>) = std::mem::take(&mut self.gc_after.retired)
                .into_iter()
                .partition(|retired| retired.published_at < generation);
            self.gc_after.retired = waiting;
            let names: Vec<String> = due.into_iter().flat_map(|retired| retired.files).collect();
            removed_chunks = names.iter().filter(|name| parse_seq(name).is_some()).count();
            let spawned = std::thread::Builder::new().name("larch-gc-unlink".into()).spawn(move || {
                for name in names {
                    let _ = dir.remove(&name);
                }
            });
            if spawned.is_err() {
                // No thread: the next writer's open removes them.
                removed_chunks = 0;
            }
        }
        if let Some(report) = self.gc_after.report.as_mut() {
            report.chunks_removed += removed_chunks;
        }
    }

    /// Whether `hash` names a commit garbage collection removed (found in the commit index below
    /// the oldest kept commit's entry).
    pub(crate) fn is_collected(&self, hash: &Hash) -> Result<bool> {
        let end = self.state.index_keep_from;
        let mut at = index::INDEX_HEADER_LEN;
        let entry_len = index::ENTRY_LEN as u64;
        let mut buf = vec![0u8; 1024 * index::ENTRY_LEN];
        while at < end {
            let len = usize::try_from((end - at).min(buf.len() as u64)).unwrap_or(0);
            let piece = buf.get_mut(..len).unwrap_or_default();
            self.files
                .index
                .read_at(at, piece)
                .map_err(|e| StoreError::io(FileKind::Index, at, "read", e))?;
            if piece.chunks_exact(index::ENTRY_LEN).any(|entry| entry.get(..32) == Some(&hash.as_bytes()[..]))
            {
                return Ok(true);
            }
            at += len as u64 / entry_len * entry_len;
            if len < index::ENTRY_LEN {
                break;
            }
        }
        Ok(false)
    }

    /// The error for commit `hash` of this read-only handle's commit map whose record a writer's GC
    /// (generation `gc_generation`) collected since the handle's last reload
    /// ([`StoreError::Collected`]); the oldest kept commit is read from the published state's
    /// commit index.
    pub(crate) fn collected_since_reload(&self, hash: &Hash, gc_generation: u64) -> StoreError {
        let oldest_kept = crate::switch::control_file::read_control(&*self.files.control)
            .ok()
            .and_then(|control| control.newest().and_then(|slot| control.state(slot)).cloned())
            .and_then(|state| {
                let mut entry = [0u8; index::ENTRY_LEN];
                self.files.index.read_at(state.index_keep_from, &mut entry).ok()?;
                let entries = index::decode_entries(&entry, state.index_keep_from).ok()?;
                entries.first().map(|(hash, _)| *hash)
            });
        StoreError::Collected {
            commit: *hash,
            gc_generation,
            oldest_kept: oldest_kept.or(self.gc_after.oldest_kept).unwrap_or(Hash([0; 32])),
        }
    }

    /// The error for a commit that is not in the commit map: [`StoreError::Collected`] when GC
    /// removed it, else [`StoreError::UnknownCommit`].
    pub(crate) fn missing_commit(&self, hash: &Hash) -> StoreError {
        match (self.state.keep_from, self.is_collected(hash)) {
            (keep_from, Ok(true)) if keep_from > 0 => StoreError::Collected {
                commit: *hash,
                gc_generation: self.state.gc_generation,
                oldest_kept: self.gc_after.oldest_kept.unwrap_or(Hash([0; 32])),
            },
            (_, Err(e)) => e,
            _ => StoreError::UnknownCommit(*hash),
        }
    }
}

/// The sequence number of a chunk file name (the legacy single pack is chunk 0).
fn parse_seq(name: &str) -> Option<u32> {
    crate::format::names::parse_chunk_name(name)
        .or_else(|| (name == crate::format::names::LEGACY_PACK).then_some(0))
}
