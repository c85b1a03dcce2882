//! Recovery of a store whose published state is damaged, missing or behind its pack (`larch recover`):
//! find the newest complete commit from the pack and the commit index, report what publishing it
//! would drop, and publish it only when asked ([`RecoveryPlan::apply`]).

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, PACK_HEADER_LEN, RecordKind};
use crate::format::control::{ControlFileState, ControlState, FLAG_ARCHIVE, PAGE, Slot};
use crate::format::index;
use crate::io::classify::{DirKind, classify};
use crate::io::layered::LowerLayer;
use crate::io::storage::{Directory, DiskDirectory, FileStorage, MemStorage, Storage, StoreFiles};
use crate::options::RepoOptions;
use crate::pack::layout::Layout;
use crate::pack::reader::PackReader;
use crate::repo::{DEFAULT_BRANCH, Repo};
use crate::switch::control_file;
use larch_core::Hash;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::rebuild;

use rebuild::Candidate;

/// Candidates (newest first) checked with fsck before giving up.
const MAX_CANDIDATES: usize = 16;

/// A commit found in the pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundCommit {
    /// The commit hash.
    pub hash: Hash,
    /// Offset of its record.
    pub offset: u64,
    /// Offset just past its record: the pack length that publishes it.
    pub end: u64,
}

/// What `larch recover` found, and what it would publish.
#[derive(Debug)]
pub struct RecoveryPlan {
    /// The store directory.
    pub path: PathBuf,
    /// The newest valid control slot, if any.
    pub published: Option<ControlState>,
    /// Why the store does not open as it is (`None`: it opens).
    pub open_error: Option<String>,
    /// Length of the pack file.
    pub pack_len: u64,
    /// Where the scan of the pack's records stopped (a damaged or torn record, or the end).
    pub scan_end: u64,
    /// The commit records found by the scan, in pack order.
    pub found: Vec<FoundCommit>,
    /// The newest complete commit (fsck-clean with every commit before it), the new head.
    pub chosen: Option<FoundCommit>,
    /// Newer commits that are not complete, with the first problem fsck found.
    pub rejected: Vec<(FoundCommit, String)>,
    /// Commits named by the commit index whose records are not in the readable pack.
    pub index_only: Vec<(Hash, u64)>,
    /// Branches of the published state that would be dropped (their commit is not kept).
    pub dropped_branches: Vec<String>,
    /// With no valid control slot: the layout rebuilt from the chunk and segment files.
    pub rebuilt_layout: Option<String>,
    state: Option<ControlState>,
    entries: Vec<(Hash, u64)>,
    /// The control file the plan was made from (`None`: it could not be read): publishing is
    /// refused unless `control` still holds exactly these bytes.
    planned_control: Option<Vec<u8>>,
}

impl RecoveryPlan {
    /// Whether publishing the plan would change nothing: the store opens and stands on the chosen
    /// commit already.
    pub fn is_noop(&self) -> bool {
        self.open_error.is_none()
            && match (&self.published, &self.state) {
                (Some(published), Some(state)) => {
                    published.pack_end == state.pack_end
                        && published.index_end == state.index_end
                        && published.branches == state.branches
                }
                (None, None) => true,
                _ => false,
            }
    }

    /// Commits published now that the plan drops (published index longer than the chosen one).
    pub fn dropped_published_commits(&self) -> u64 {
        let published = self.published.as_ref().map_or(0, |state| state.index_end);
        let chosen = self.state.as_ref().map_or(index::INDEX_HEADER_LEN, |state| state.index_end);
        published.saturating_sub(chosen) / index::ENTRY_LEN as u64
    }

    /// Publishes the chosen commit: rewrites the commit index, then both control slots (each
    /// synced), under the writer's lock. The pack is not modified; bytes past the chosen end
    /// become its tail. Refused with [`StoreError::StalePlan`] when `control` changed since the
    /// plan was made (a writer published meanwhile): planning again sees its commits.
    pub fn apply(&self) -> Result<()> {
        if self.state.is_none() {
            return Err(StoreError::NeedsRecovery {
                path: self.path.clone(),
                reason: "no complete commit was found in the pack; nothing to publish".into(),
                missing_file: false,
            });
        }
        let path = &self.path;
        let dir = File::open(path).map_err(|source| StoreError::Directory {
            path: path.clone(),
            op: "open",
            source,
        })?;
        match fs4::fs_std::FileExt::try_lock_exclusive(&dir) {
            Ok(true) => {}
            Ok(false) => return Err(StoreError::Locked { path: path.clone() }),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(StoreError::Locked { path: path.clone() });
            }
            Err(source) => return Err(StoreError::Directory { path: path.clone(), op: "lock", source }),
        }
        // Every file operation goes through the directory the lock is held on.
        let dir_error = |op, source| StoreError::Directory { path: path.clone(), op, source };
        let directory =
            Arc::new(DiskDirectory::open_locked(path, &dir, None).map_err(|e| dir_error("open", e))?);
        let open = |kind: FileKind| -> Result<Arc<dyn Storage>> {
            let file = directory
                .open_file(kind.file_name(), true, true, false)
                .map_err(|e| StoreError::io(kind, 0, "open", e))?;
            Ok(Arc::new(file))
        };
        let files = StoreFiles {
            control: open(FileKind::Control)?,
            index: open(FileKind::Index)?,
            dir: directory.clone(),
        };
        self.apply_to(&files)?;
        directory.sync().map_err(|e| dir_error("sync", e))?;
        Ok(())
    }

    /// [`RecoveryPlan::apply`] on `files` (no lock taken: the caller excludes writers): checks that
    /// `control` is byte for byte the one planned from ([`StoreError::StalePlan`] otherwise), then
    /// rewrites the commit index (synced), both control slots (each synced) and the confirmation.
    /// The pack is not written.
    pub fn apply_to(&self, files: &StoreFiles) -> Result<()> {
        let Some(state) = &self.state else {
            return Err(StoreError::NeedsRecovery {
                path: self.path.clone(),
                reason: "no complete commit was found in the pack; nothing to publish".into(),
                missing_file: false,
            });
        };
        if files.control.read_all().ok() != self.planned_control {
            return Err(StoreError::StalePlan { path: self.path.clone() });
        }
        let mut bytes = index::header().to_vec();
        for (hash, offset) in &self.entries {
            index::encode_entry(&mut bytes, hash, *offset);
        }
        files.index.write_at(0, &bytes).map_err(|e| StoreError::io(FileKind::Index, 0, "write", e))?;
        files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
        let control = &*files.control;
        let mut state = state.clone();
        for slot in 0..2 {
            state.generation += 1;
            control_file::write_slot(control, slot, &state.encode()?)?;
            control.sync().map_err(|e| StoreError::io(FileKind::Control, slot as u64 * PAGE, "sync", e))?;
        }
        control_file::write_confirm(control, state.generation)?;
        control.sync().map_err(|e| StoreError::io(FileKind::Control, 0, "sync", e))?;
        Ok(())
    }
}

/// Examines the store at `path` (read-only) and plans its recovery.
pub fn plan_recovery(path: impl AsRef<Path>) -> Result<RecoveryPlan> {
    plan_recovery_with(path, None)
}

/// [`plan_recovery`] of a store in archive mode: its chunk files are looked up in the store
/// directory, then in `lower` (`--lower DIR`). Without it, a store whose published state says
/// it is archived is refused with [`StoreError::NeedsLower`].
pub fn plan_recovery_with(path: impl AsRef<Path>, lower: Option<&Path>) -> Result<RecoveryPlan> {
    plan_recovery_in(path.as_ref(), lower, None)
}

/// [`plan_recovery`] of a store in archive mode over a lower layer given as a [`LowerLayer`]
/// (object storage: `larch-remote`'s, opened read-only), with the same rules as
/// [`plan_recovery_with`]'s lower directory: chunk files are looked up in the store directory,
/// then in the layer, which recovery never writes.
pub fn plan_recovery_layered(path: impl AsRef<Path>, layer: Option<LowerLayer>) -> Result<RecoveryPlan> {
    plan_recovery_in(path.as_ref(), None, layer)
}

fn plan_recovery_in(path: &Path, lower: Option<&Path>, layer: Option<LowerLayer>) -> Result<RecoveryPlan> {
    let path = path.to_path_buf();
    match classify(&path)? {
        DirKind::Store | DirKind::NoControl(_) => {}
        DirKind::Interrupted | DirKind::Empty => {
            return Err(StoreError::NotAStore {
                path,
                reason: "no store data here (empty directory)".into(),
            });
        }
        DirKind::Missing => return Err(StoreError::NotAStore { path, reason: "no such directory".into() }),
        // A collected store without its control file holds GC segments, which `classify` (for
        // opening) does not count as a store's files.
        DirKind::Foreign(_) if holds_only_store_files(&path)? => {}
        DirKind::Foreign(reason) => return Err(StoreError::NotAStore { path, reason }),
    }
    let options =
        RepoOptions { create: false, lower: lower.map(Path::to_path_buf), ..RepoOptions::default() };
    let open_error = match &layer {
        Some(layer) => Repo::open_read_only_layered(&path, options, Some(layer.clone())),
        None => Repo::open_read_only_options(&path, options),
    }
    .err()
    .map(|e| e.to_string());
    let open = |kind: FileKind| -> Result<Arc<dyn Storage>> {
        match FileStorage::open(&path.join(kind.file_name()), false, false) {
            Ok(file) => Ok(Arc::new(file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Arc::new(MemStorage::new())),
            Err(e) => Err(StoreError::io(kind, 0, "open", e)),
        }
    };
    let mut files = StoreFiles {
        control: open(FileKind::Control)?,
        index: open(FileKind::Index)?,
        dir: Arc::new(DiskDirectory::new(&path, None)),
    };
    if let Some(lower) = lower {
        files = crate::io::layered::with_lower(files, &path, lower, None, false)?;
    }
    if let Some(layer) = &layer {
        files = layer.over(files, &path);
    }
    plan(files, path, open_error)
}

/// Whether every file of the directory at `path` is one a store holds (control, commit index,
/// lock, pack, chunk and segment files), with at least one segment or chunk file.
fn holds_only_store_files(path: &Path) -> Result<bool> {
    let dir_error = |op, source| StoreError::Directory { path: path.into(), op, source };
    let fixed = [FileKind::Control, FileKind::Pack, FileKind::Index, FileKind::Lock].map(FileKind::file_name);
    let mut data = false;
    for entry in std::fs::read_dir(path).map_err(|e| dir_error("list", e))? {
        let name = entry.map_err(|e| dir_error("list", e))?.file_name().to_string_lossy().into_owned();
        let pack_file =
            crate::format::names::parse_chunk_name(&name).is_some() || rebuild::is_segment_name(&name);
        if !pack_file && !fixed.contains(&name.as_str()) {
            return Ok(false);
        }
        data |= pack_file;
    }
    Ok(data)
}

#[cfg(feature = "fault-injection")]
/// [`plan_recovery`] of a store held by `files` (any [`Storage`]: memory, fault injection).
pub fn plan_recovery_files(files: StoreFiles) -> Result<RecoveryPlan> {
    let options = RepoOptions { create: false, cache_bytes: 1 << 20, ..RepoOptions::default() };
    let open_error = Repo::open_files(files.clone(), false, options, None).err().map(|e| e.to_string());
    let published = control_file::read_control(&*files.control)
        .ok()
        .and_then(|control| control.newest().and_then(|slot| control.state(slot)).cloned());
    let collected = published.clone().filter(|state| state.gc_generation > 0);
    let discovered = match &collected {
        Some(state) => Layout::discover_collected(files.dir.clone(), state),
        None => Layout::discover(files.dir.clone()),
    };
    let pack_len = match discovered {
        Ok(layout) => layout.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?,
        // No valid slot and no chunk 0 (a collected store): the layouts rebuilt from its files.
        Err(_) if published.is_none() && rebuild::candidates(&*files.dir).is_ok() => u64::MAX,
        Err(_) => 0,
    };
    if pack_len <= PACK_HEADER_LEN {
        return Err(StoreError::NotAStore { path: "<storage>".into(), reason: "no store data".into() });
    }
    plan(files, PathBuf::from("<storage>"), open_error)
}

fn plan(files: StoreFiles, path: PathBuf, open_error: Option<String>) -> Result<RecoveryPlan> {
    // The plan is made from one reading of `control`, kept: publishing it is refused if a writer
    // changed the file since (issue 39 item 4).
    let planned_control = files.control.read_all().ok();
    let control_state = match &planned_control {
        Some(bytes) => readable_control(&MemStorage::from_bytes(bytes.clone()))?,
        None => readable_control(&*files.control)?,
    };
    let mut plan = plan_candidates(&files, path, open_error, &control_state)?;
    plan.planned_control = planned_control;
    Ok(plan)
}

/// The plan on the published state's layout, or on the first layout rebuilt from the files that
/// gives a complete commit.
fn plan_candidates(
    files: &StoreFiles,
    path: PathBuf,
    open_error: Option<String>,
    control_state: &ControlFileState,
) -> Result<RecoveryPlan> {
    let published = control_state.newest().and_then(|slot| control_state.state(slot)).cloned();
    if let Some(state) = &published {
        // Archive mode: chunk files may be only in the lower directory.
        if state.flags & FLAG_ARCHIVE != 0 && files.dir.layers().is_none() {
            return Err(StoreError::NeedsLower { path });
        }
        // A collected store: the layout of its newest slot's GC (segments, then the chunks from
        // the first live one).
        let collected = Some(state.clone()).filter(|state| state.gc_generation > 0);
        let candidate = Candidate { gc: collected, gc_commit: None, description: String::new() };
        return plan_on(files, path, open_error, control_state, &candidate);
    }
    // No valid slot: the layouts the files allow, tried in turn until one gives a complete
    // commit (docs/gc-design.md §8).
    let candidates = rebuild::candidates(&*files.dir)
        .map_err(|reason| StoreError::Unrecoverable { path: path.clone(), reason })?;
    let mut first_plan = None;
    let mut failures = Vec::new();
    for candidate in &candidates {
        match plan_on(files, path.clone(), open_error.clone(), control_state, candidate) {
            Ok(plan) if plan.chosen.is_some() => return Ok(plan),
            Ok(plan) => {
                failures.push(format!("{}: no complete commit", candidate.description));
                first_plan.get_or_insert(plan);
            }
            Err(e) => failures.push(format!("{}: {e}", candidate.description)),
        }
    }
    first_plan.ok_or_else(|| StoreError::Unrecoverable { path, reason: failures.join("; ") })
}

/// The control file as far as it can be read: recovery never depends on it. Unreadable (an I/O
/// error): both slots taken as damaged, the layouts rebuilt from the files. Only a slot of another
/// format (its checksum intact) is refused: this build would overwrite a store it cannot read.
fn readable_control(control: &dyn Storage) -> Result<ControlFileState> {
    match control_file::read_control(control) {
        Ok(state) => Ok(state),
        Err(e @ StoreError::UnknownVersion { .. }) => Err(e),
        Err(e) => {
            let damaged = Slot::Damaged(format!("unreadable control file: {e}"));
            Ok(ControlFileState { slots: [damaged.clone(), damaged], confirmed: None })
        }
    }
}

/// Plans the recovery of the store on the layout `candidate` names (the published state's, or
/// one rebuilt from the files when no slot is valid).
fn plan_on(
    files: &StoreFiles,
    path: PathBuf,
    open_error: Option<String>,
    control_state: &ControlFileState,
    candidate: &Candidate,
) -> Result<RecoveryPlan> {
    let (dir, index_file) = (files.dir.clone(), files.index.clone());
    let published = control_state.newest().and_then(|slot| control_state.state(slot)).cloned();
    // A collected store: its segments then the chunks from the first live one, the commit index
    // below the oldest kept commit as it is (synced before the GC switched), and commits found
    // only from the oldest kept one on.
    let collected = candidate.gc.clone();
    let (layout, scan_from, prefix) = match &collected {
        Some(state) => {
            let layout = Layout::discover_collected(dir.clone(), state)?;
            let from = layout.chunk_files(u64::MAX).first().map_or(PACK_HEADER_LEN, |(_, start, _)| *start);
            let len = state.index_keep_from.saturating_sub(index::INDEX_HEADER_LEN);
            let index_len = index_file.len().unwrap_or(0);
            if state.index_keep_from > index_len {
                return Err(StoreError::corrupt(
                    FileKind::Index,
                    index_len,
                    format!(
                        "the commit index holds {index_len} bytes: the entries of the collected commits (up to \
                         {}) are missing",
                        state.index_keep_from
                    ),
                ));
            }
            let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
            index_file
                .read_at(index::INDEX_HEADER_LEN, &mut bytes)
                .map_err(|e| StoreError::io(FileKind::Index, index::INDEX_HEADER_LEN, "read", e))?;
            let prefix = index::decode_entries(&bytes, index::INDEX_HEADER_LEN)?;
            (layout, from, prefix)
        }
        // The chunks present from chunk 0 on, without a gap (a format-2 `pack` is chunk 0).
        None => (Layout::discover(dir.clone())?, PACK_HEADER_LEN, Vec::new()),
    };
    let keep_from = collected.as_ref().map_or(0, |state| state.keep_from);
    let layout = Arc::new(layout);
    let pack_len = layout.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))?;

    // Scan the records from the header until the first one that does not check out.
    let reader = PackReader::new(layout.clone(), pack_len, 0);
    let mut found = Vec::new();
    let mut at = scan_from;
    while at < pack_len {
        let Ok((hash, total)) = reader.with_record(at, |kind, body| match kind {
            RecordKind::Commit => Ok(Some(codec::decode_commit(body, at)?.hash())),
            _ => Ok(None),
        }) else {
            break;
        };
        if let Some(hash) = hash
            && at >= keep_from
        {
            found.push(FoundCommit { hash, offset: at, end: at + total });
        }
        at += total;
    }
    let scan_end = at;
    // A layout rebuilt from segment headers: the newest one names the GC commit at `keep_from`.
    if let (Some(gc), Some(commit)) = (&collected, candidate.gc_commit)
        && found.first().is_none_or(|first| first.offset != gc.keep_from || first.hash != commit)
    {
        return Err(StoreError::corrupt(
            FileKind::Segment,
            56,
            format!(
                "the GC commit {commit} the newest segment names is not the commit record at {}",
                gc.keep_from
            ),
        ));
    }
    // Index entries (checksums valid) naming commits the scan did not reach.
    let mut index_only = Vec::new();
    if let Ok(len) = index_file.len()
        && len > index::INDEX_HEADER_LEN
    {
        let whole = (len - index::INDEX_HEADER_LEN) / index::ENTRY_LEN as u64 * index::ENTRY_LEN as u64;
        let mut bytes = vec![0u8; usize::try_from(whole).unwrap_or(0)];
        if index_file.read_at(index::INDEX_HEADER_LEN, &mut bytes).is_ok() {
            for chunk in bytes.chunks(index::ENTRY_LEN) {
                if let Ok(entries) = index::decode_entries(chunk, 0)
                    && let Some((hash, offset)) = entries.first()
                    && *offset >= scan_end
                {
                    index_only.push((*hash, *offset));
                }
            }
        }
    }

    let archive_flag = if published.as_ref().is_some_and(|state| state.flags & FLAG_ARCHIVE != 0)
        || dir.layers().is_some()
    {
        FLAG_ARCHIVE
    } else {
        0
    };
    let mut plan = RecoveryPlan {
        path: path.clone(),
        published: published.clone(),
        open_error,
        pack_len,
        scan_end,
        found: found.clone(),
        chosen: None,
        rejected: Vec::new(),
        index_only,
        dropped_branches: Vec::new(),
        rebuilt_layout: (!candidate.description.is_empty()).then(|| candidate.description.clone()),
        state: None,
        entries: Vec::new(),
        planned_control: None,
    };
    for position in (0..found.len()).rev().take(MAX_CANDIDATES) {
        let Some(candidate) = found.get(position).cloned() else { continue };
        let entries: Vec<(Hash, u64)> = prefix
            .iter()
            .copied()
            .chain(found.get(..=position).unwrap_or_default().iter().map(|c| (c.hash, c.offset)))
            .collect();
        let mut state = ControlState {
            generation: published
                .as_ref()
                .map_or(0, |state| state.generation)
                .max(control_state.max_generation()),
            pack_end: candidate.end,
            index_end: index::INDEX_HEADER_LEN + (entries.len() * index::ENTRY_LEN) as u64,
            index_synced: 0,
            // Archive mode: a recovered state keeps saying that chunks may be in the lower
            // directory (when the published state said so, or recovery was given a lower one).
            flags: archive_flag,
            // A new lineage: readers holding the timeline recovery leaves reopen (issue 39 item 5).
            lineage: control_state.max_lineage() + 1,
            ..ControlState::default()
        };
        state.index_synced = state.index_end;
        if let Some(gc) = &collected {
            state.gc_generation = gc.gc_generation;
            state.keep_from = gc.keep_from;
            state.index_keep_from = gc.index_keep_from;
            state.first_chunk = gc.first_chunk;
            state.segments = gc.segments.clone();
        }
        (state.head_chunk, state.head_start) = layout.chunk_before(candidate.end);
        let mut dropped = Vec::new();
        if let Some(published) = &published {
            for (name, target) in &published.branches {
                if entries.contains(target) {
                    state.branches.insert(name.clone(), *target);
                } else {
                    dropped.push(name.clone());
                }
            }
        }
        // Keep `main` where the published state put it when that commit is kept and nothing newer
        // than the published state exists; otherwise it moves to the newest complete commit.
        let beyond = published.as_ref().is_none_or(|published| candidate.end > published.pack_end);
        if beyond || !state.branches.contains_key(DEFAULT_BRANCH) {
            state.branches.insert(DEFAULT_BRANCH.to_string(), (candidate.hash, candidate.offset));
        }
        match check_candidate(&dir, &state, &entries) {
            Ok(()) => {
                plan.chosen = Some(candidate);
                plan.dropped_branches = dropped;
                plan.state = Some(state);
                plan.entries = entries;
                break;
            }
            Err(problem) => plan.rejected.push((candidate, problem)),
        }
    }
    Ok(plan)
}

/// Opens the candidate state over the real pack (index and control in memory) and checks it.
fn check_candidate(
    dir: &Arc<dyn Directory>,
    state: &ControlState,
    entries: &[(Hash, u64)],
) -> Result<(), String> {
    let mut control = vec![0u8; crate::format::control::CONTROL_LEN as usize];
    let encoded = state.encode().map_err(|e| e.to_string())?;
    control.get_mut(..encoded.len()).unwrap_or_default().copy_from_slice(&encoded);
    let mut index_bytes = index::header().to_vec();
    for (hash, offset) in entries {
        index::encode_entry(&mut index_bytes, hash, *offset);
    }
    let files = StoreFiles {
        control: Arc::new(MemStorage::from_bytes(control)),
        index: Arc::new(MemStorage::from_bytes(index_bytes)),
        dir: dir.clone(),
    };
    let options = RepoOptions { create: false, cache_bytes: 64 << 20, ..RepoOptions::default() };
    let repo = Repo::open_files(files, false, options, None).map_err(|e| e.to_string())?;
    let report = repo.fsck();
    match report.problems.first() {
        None => Ok(()),
        Some(problem) => Err(format!("{} problems, first: {problem}", report.problems.len())),
    }
}
