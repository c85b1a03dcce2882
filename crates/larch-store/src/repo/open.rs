//! Opening a store (what is a store, creating one, choosing the published state among the two
//! control slots, loading the commit index). The protocol and its crash argument are in
//! `docs/store.md`; publishing is in `publish.rs`.

use crate::commit::writer::WriteCounts;
use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;
use crate::format::control::{ControlFileState, ControlState, Slot};
use crate::format::index;
use crate::format::names::{self, CHUNK_HEADER_LEN};
use crate::io::classify::{DirKind, classify};
use crate::io::layered::LowerLayer;
use crate::io::storage::{Directory, DiskDirectory, Storage, StoreFiles};
use crate::options::DEFAULT_CACHE_BYTES;
use crate::options::{RepoOptions, StoreStats};
use crate::pack::layout::Layout;
use crate::pack::reader::{PackReader, PackSource};
use crate::repo::Repo;
use crate::switch::control_file;
use std::collections::HashMap;
use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a directory that is not a usable store is refused, for the writer and the readers alike.
/// Whether the directory at `path` holds a pack file (`pack`, a chunk or a segment): a store's
/// data, rather than a stray `control`.
fn holds_pack_files(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|entries| {
        entries.filter_map(|entry| entry.ok()).any(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name == FileKind::Pack.file_name()
                || names::parse_chunk_name(&name).is_some()
                || names::parse_segment_name(&name).is_some()
        })
    })
}

fn refusal(path: &Path, kind: DirKind) -> StoreError {
    let not_a_store = |reason: &str| StoreError::NotAStore { path: path.into(), reason: reason.into() };
    match kind {
        DirKind::Missing => not_a_store("no such directory"),
        DirKind::Empty | DirKind::Interrupted => not_a_store("no store here (empty directory)"),
        DirKind::NoControl(pack) => StoreError::NeedsRecovery {
            path: path.into(),
            reason: format!("no control file beside a pack of {pack} bytes"),
            missing_file: false,
        },
        DirKind::Foreign(reason) => not_a_store(&reason),
        DirKind::Store => not_a_store("a store (not refused)"),
    }
}

/// Whether the pack's files hold any record bytes (a format-2 `pack` past its header, or a chunk
/// past its header).
fn pack_holds_data(dir: &dyn Directory) -> Result<bool> {
    let names = dir.list().map_err(|e| StoreError::io(FileKind::Pack, 0, "list", e))?;
    for name in names {
        let header = if name == FileKind::Pack.file_name() {
            PACK_HEADER_LEN
        } else if names::parse_chunk_name(&name).is_some() {
            CHUNK_HEADER_LEN
        } else {
            continue;
        };
        let file = dir.open(&name, false).map_err(|e| StoreError::io(FileKind::Pack, 0, "open", e))?;
        if file.len().map_err(|e| StoreError::io(FileKind::Pack, 0, "stat", e))? > header {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lock_directory(path: &Path) -> Result<File> {
    let dir =
        File::open(path).map_err(|source| StoreError::Directory { path: path.into(), op: "open", source })?;
    match fs4::fs_std::FileExt::try_lock_exclusive(&dir) {
        Ok(true) => Ok(dir),
        Ok(false) => Err(StoreError::Locked { path: path.into() }),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Err(StoreError::Locked { path: path.into() }),
        Err(source) => Err(StoreError::Directory { path: path.into(), op: "lock", source }),
    }
}

/// Whether no writer holds the store of `dir` ([`Directory::writer_absent`]; `false` when the
/// backend cannot tell). Asked only when the newest control slot is not confirmed: then either a
/// writer is between writing and confirming it (not yet durable), or the writer died (what
/// survives is all there is).
pub(crate) fn no_writer(dir: &dyn Directory) -> bool {
    dir.writer_absent().unwrap_or(false)
}

/// The slot a reader of the store of `dir` stands on (see [`ControlFileState::visible`]). When the
/// newest slot is not confirmed and no writer runs, the reader makes the control file durable
/// itself (`fdatasync` works on a read-only descriptor) before standing on the newest slot: the
/// writer may have died between writing the slot and syncing it.
fn reader_slot(control: &ControlFileState, dir: &dyn Directory, storage: &dyn Storage) -> Option<usize> {
    let visible = control.visible();
    if visible != control.newest() && no_writer(dir) && storage.sync().is_ok() {
        return control.newest();
    }
    visible
}

/// What each slot of `control` holds, for messages: its generation, "empty", or why it is damaged.
fn slots_summary(control: &ControlFileState) -> String {
    let what = |slot: &Slot| match slot {
        Slot::Valid(state) => format!("generation {}", state.generation),
        Slot::Empty => "empty".to_string(),
        Slot::Damaged(why) => format!("damaged: {why}"),
    };
    format!("slot 0: {}; slot 1: {}", what(&control.slots[0]), what(&control.slots[1]))
}

/// Whether `e` says a file of the layout is missing (unlinked by a GC after `control` was read).
fn is_missing_file(e: &StoreError) -> bool {
    match e {
        StoreError::MissingFile { .. } => true,
        StoreError::Io { source, .. } | StoreError::OpenFile { source, .. } => {
            source.kind() == ErrorKind::NotFound
        }
        _ => false,
    }
}

/// Whether `other` (the slot a writer's open does not stand on) may name a file that the clean-up
/// of `chosen` removes: a chunk below its first or above its head, or a segment it does not name.
fn names_files_beyond(other: &ControlState, chosen: &ControlState) -> bool {
    other.first_chunk != chosen.first_chunk
        || other.head_chunk > chosen.head_chunk
        || other.segments != chosen.segments
}

/// The refresh hook of a read-only handle's layout ([`crate::pack::layout::RefreshHook`]): the
/// layout of the state the handle would see now, when a GC switched since the layout was opened
/// (another GC generation, or another first chunk); `None` otherwise. A state of another lineage
/// is [`StoreError::Rewound`]: the handle's offsets may name other records there.
fn refresh_hook(
    files: &StoreFiles,
    path: Option<&Path>,
    lineage: u64,
) -> Arc<crate::pack::layout::RefreshHook> {
    let files = files.clone();
    let path = path.map(Path::to_path_buf);
    Arc::new(move |layout: &Layout| {
        for attempt in 0..8 {
            let control = control_file::read_control(&*files.control)?;
            let slot = reader_slot(&control, &*files.dir, &*files.control);
            let Some(state) = slot.and_then(|slot| control.state(slot)) else { return Ok(None) };
            if state.lineage != lineage {
                return Err(StoreError::Rewound {
                    path: path.clone().unwrap_or_default(),
                    reason: format!(
                        "the control file's lineage is {}, this handle loaded lineage {lineage}",
                        state.lineage
                    ),
                });
            }
            if state.gc_generation == layout.gc_generation() && state.first_chunk == layout.first_seq() {
                return Ok(None);
            }
            match Layout::open_state(files.dir.clone(), state, false, layout.pool().clone()) {
                Ok(fresh) => return Ok(Some(fresh)),
                // Yet another GC unlinked a file between our reading `control` and opening it.
                Err(e) if is_missing_file(&e) => {
                    std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    })
}

impl Repo {
    /// Opens (creating if absent) the store at `path` for writing, with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Repo> {
        Repo::open_with(path, RepoOptions::default())
    }

    /// Opens the store at `path` for writing with `options`. Fails with [`StoreError::Locked`] when
    /// another handle (of any process) writes it. A store is created only in a missing or empty
    /// directory (with `options.create`); a damaged store is reported
    /// ([`StoreError::NeedsRecovery`]), never initialised again.
    ///
    /// The writer holds an exclusive `flock` on the store directory itself for the handle's
    /// lifetime: deleting or replacing a file inside cannot let a second writer in.
    pub fn open_with(path: impl AsRef<Path>, options: RepoOptions) -> Result<Repo> {
        Repo::open_with_layer(path, options, None)
    }

    /// [`Repo::open_with`] in archive mode with `lower` (when given) as the lower layer instead of
    /// `options.lower`: a lower layer that is not a directory on disk (object storage).
    pub fn open_with_layer(
        path: impl AsRef<Path>,
        options: RepoOptions,
        lower: Option<LowerLayer>,
    ) -> Result<Repo> {
        let path = path.as_ref();
        let not_a_store = |reason: &str| StoreError::NotAStore { path: path.into(), reason: reason.into() };
        if classify(path)? == DirKind::Missing {
            if !options.create {
                return Err(not_a_store("no such directory"));
            }
            // The new directory's entry is synced in its parent (and any ancestor created with it).
            crate::io::dirs::create_dir_durably(path).map_err(|source| StoreError::Directory {
                path: path.into(),
                op: "create",
                source,
            })?;
        }
        // A reader probing for a live writer holds a shared lock for a moment: retry briefly.
        let mut attempts = 0;
        let lock = loop {
            match lock_directory(path) {
                Err(StoreError::Locked { .. }) if attempts < 20 => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                other => break other?,
            }
        };
        // Classified again under the lock: another writer may have created the store meanwhile.
        let create = match classify(path)? {
            DirKind::Missing => return Err(not_a_store("the directory disappeared")),
            DirKind::Store => false,
            DirKind::Empty | DirKind::Interrupted if options.create => true,
            other => return Err(refusal(path, other)),
        };
        // Every file operation goes through the directory the lock is held on (its descriptor),
        // whatever its path names later.
        let dir_error = |op, source| StoreError::Directory { path: path.into(), op, source };
        let dir = Arc::new(
            DiskDirectory::open_locked(path, &lock, map_budget(&options))
                .map_err(|e| dir_error("open", e))?,
        );
        let files = Self::disk_files(&dir, true, create)?;
        let (files, options) = Self::with_layer(files, options, lower.as_ref(), path);
        let mut repo = Repo::open_files(files, true, options, Some(path))?;
        if create {
            dir.sync().map_err(|e| dir_error("sync", e))?;
        }
        repo._lock = Some(lock);
        Ok(repo)
    }

    /// Opens the store at `path` read-only: it sees the last published state that is durable and
    /// [`Repo::reload`]s to see newer ones. Any number of readers may coexist with one writer.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Repo> {
        Repo::open_read_only_with(path, DEFAULT_CACHE_BYTES)
    }

    /// [`Repo::open_read_only`] with a cache of `cache_bytes`.
    pub fn open_read_only_with(path: impl AsRef<Path>, cache_bytes: u64) -> Result<Repo> {
        let options = RepoOptions { create: false, cache_bytes, ..RepoOptions::default() };
        Repo::open_read_only_options(path, options)
    }

    /// [`Repo::open_read_only`] with `options` (the cache size and the read mode are used).
    pub fn open_read_only_options(path: impl AsRef<Path>, options: RepoOptions) -> Result<Repo> {
        Repo::open_read_only_layered(path, options, None)
    }

    /// [`Repo::open_read_only_options`] in archive mode with `lower` (when given) as the lower
    /// layer instead of `options.lower`: a lower layer that is not a directory on disk.
    pub fn open_read_only_layered(
        path: impl AsRef<Path>,
        options: RepoOptions,
        lower: Option<LowerLayer>,
    ) -> Result<Repo> {
        let path = path.as_ref();
        match classify(path)? {
            DirKind::Store => {}
            other => return Err(refusal(path, other)),
        }
        let options = RepoOptions { create: false, ..options };
        let mut attempt = 0;
        loop {
            let dir = DiskDirectory::open(path, map_budget(&options))
                .map_err(|source| StoreError::Directory { path: path.into(), op: "open", source })?;
            let files = Self::disk_files(&Arc::new(dir), false, false)?;
            let (files, options) = Self::with_layer(files, options.clone(), lower.as_ref(), path);
            match Repo::open_files(files, false, options, Some(path)) {
                // A GC's deletion unlinked a file between our reading `control` and opening it:
                // `control` names newer files now.
                Err(StoreError::NeedsRecovery { missing_file: true, .. }) if attempt < 8 => {
                    std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// `files` over `lower` (then `options.lower` is not used), else as they are.
    fn with_layer(
        files: StoreFiles,
        options: RepoOptions,
        lower: Option<&LowerLayer>,
        path: &Path,
    ) -> (StoreFiles, RepoOptions) {
        match lower {
            Some(lower) => (lower.over(files, path), RepoOptions { lower: None, ..options }),
            None => (files, options),
        }
    }

    /// `control`, `commits` and the chunk files of the store directory `dir`.
    fn disk_files(dir: &Arc<DiskDirectory>, writable: bool, create: bool) -> Result<StoreFiles> {
        let path = dir.path();
        let open = |kind: FileKind| -> Result<Arc<dyn Storage>> {
            match dir.open_file(kind.file_name(), writable, create, false) {
                Ok(file) => Ok(Arc::new(file)),
                // A store's `control` beside its pack files, without its commit index: damage
                // that `larch recover` repairs (it rebuilds the index from the pack's records).
                Err(e)
                    if e.kind() == ErrorKind::NotFound
                        && kind == FileKind::Index
                        && holds_pack_files(path) =>
                {
                    Err(StoreError::NeedsRecovery {
                        path: path.into(),
                        reason: "the commit index `commits` is missing".into(),
                        missing_file: false,
                    })
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    Err(StoreError::NotAStore { path: path.into(), reason: format!("missing file {kind}") })
                }
                Err(e) => Err(StoreError::io(kind, 0, "open", e)),
            }
        };
        Ok(StoreFiles { control: open(FileKind::Control)?, index: open(FileKind::Index)?, dir: dir.clone() })
    }

    /// Opens a store held by `files` (any [`Storage`]: memory, fault injection). A writer creates
    /// the store when `files` hold no published state and no data and `options.create` is set. No
    /// lock is taken. With a `path` and `options.lower`, the directory is layered over the lower
    /// directory on disk (archive mode). Public only with the `fault-injection` feature (crash and
    /// corruption tests).
    #[cfg_attr(not(feature = "fault-injection"), doc(hidden))]
    pub fn open_files(
        files: StoreFiles,
        writable: bool,
        options: RepoOptions,
        path: Option<&Path>,
    ) -> Result<Repo> {
        let display_path = path.map_or_else(|| PathBuf::from("<storage>"), Path::to_path_buf);
        // Archive mode on disk: chunk files are looked up in the store directory, then the lower one.
        let files = match (path, options.lower.as_deref()) {
            (Some(path), Some(lower)) => {
                // The lower directory's maps count in the upper one's budget.
                let budget = files.dir.map_budget().or_else(|| map_budget(&options));
                crate::io::layered::with_lower(files, path, lower, budget, writable)?
            }
            _ => files,
        };
        let mut control = control_file::read_control(&*files.control)?;
        if control.newest().is_none() {
            let len = |storage: &dyn Storage, kind| match storage.len() {
                Ok(len) => Ok(len),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
                Err(e) => Err(StoreError::io(kind, 0, "stat", e)),
            };
            let fresh = !pack_holds_data(&*files.dir)?
                && len(&*files.index, FileKind::Index)? <= index::INDEX_HEADER_LEN;
            let damaged = control.slots.iter().any(|slot| matches!(slot, Slot::Damaged(_)));
            if fresh && writable && options.create {
                control = Self::initialize(&files)?;
            } else if fresh && !damaged {
                return Err(StoreError::NotAStore {
                    path: display_path,
                    reason: "no published state".into(),
                });
            } else {
                return Err(StoreError::NeedsRecovery {
                    path: display_path,
                    reason: format!("the control file has no valid slot ({})", slots_summary(&control)),
                    missing_file: false,
                });
            }
        }
        // A confirmation covering a generation no valid slot holds: a state the writer made durable
        // was damaged since, and standing on the older slot would silently drop its commits (and
        // let a writer overwrite them). A reader beside a live writer reads again first: a read
        // racing a publish can see the new confirmation beside the slot page as it was before.
        let mut rereads = 0;
        while let Some(lost) = control.lost_generation() {
            let live_writer = !no_writer(&*files.dir);
            if writable || !live_writer || rereads == 3 {
                return Err(StoreError::NeedsRecovery {
                    path: display_path,
                    reason: format!(
                        "the confirmation record says generation {lost} was made durable, but no valid \
                         control slot holds it ({}): a published state was lost",
                        slots_summary(&control)
                    ),
                    missing_file: false,
                });
            }
            rereads += 1;
            std::thread::sleep(std::time::Duration::from_millis(2));
            control = control_file::read_control(&*files.control)?;
        }
        // A writer stands on the newest valid slot; a reader on the newest confirmed durable one.
        // Either falls back to the other slot when its state is not fully present.
        let first =
            if writable { control.newest() } else { reader_slot(&control, &*files.dir, &*files.control) };
        let mut candidates: Vec<usize> = first.into_iter().collect();
        candidates.extend((0..2).filter(|i| Some(*i) != first && control.state(*i).is_some()));
        if let Some(first) = first {
            let first_generation = control.state(first).map_or(0, |state| state.generation);
            candidates
                .retain(|i| control.state(*i).is_some_and(|state| state.generation <= first_generation));
        }
        let mut first_error = None;
        for slot in candidates {
            let Some(state) = control.state(slot).cloned() else { continue };
            // A slot the writer confirmed durable was published after the pack was synced: if its
            // state is not present, synced data was lost or damaged, and falling back to the older
            // slot would silently drop acknowledged commits (and let a writer overwrite them).
            let confirmed = control.confirmed.is_some_and(|generation| state.generation <= generation);
            // Archive mode: chunk files may be in the lower directory only.
            if state.flags & crate::format::control::FLAG_ARCHIVE != 0 && files.dir.layers().is_none() {
                return Err(StoreError::NeedsLower { path: display_path });
            }
            match Self::load(&files, writable, &options, path, &control, slot, state) {
                // Archive mode: the writer cleans up what a move cut short. Never when standing on
                // the older slot because the newest failed to load: which upper copies are
                // redundant is judged from the newest valid state only (as for the deletions of
                // `load`); a later open does it.
                Ok(mut repo) if writable => {
                    if control.newest() == Some(slot) {
                        repo.archive_clean_up()?;
                    }
                    return Ok(repo);
                }
                Ok(repo) => return Ok(repo),
                // The system's failures (out of descriptors, say) are not the store's: no fallback.
                Err(
                    e @ (StoreError::Io { .. }
                    | StoreError::OpenFile { .. }
                    | StoreError::UnknownVersion { .. }),
                ) => return Err(e),
                Err(e) if confirmed && first_error.is_none() => {
                    return Err(StoreError::NeedsRecovery {
                        path: display_path,
                        reason: format!("the newest durable published state is not fully present ({e})"),
                        missing_file: matches!(e, StoreError::MissingFile { .. }),
                    });
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let missing_file = matches!(first_error, Some(StoreError::MissingFile { .. }));
        Err(StoreError::NeedsRecovery {
            path: display_path,
            reason: match first_error {
                Some(e) => format!("the published state is not fully present ({e})"),
                None => "no usable control slot".into(),
            },
            missing_file,
        })
    }

    fn load(
        files: &StoreFiles,
        writable: bool,
        options: &RepoOptions,
        path: Option<&Path>,
        control: &ControlFileState,
        slot: usize,
        mut state: ControlState,
    ) -> Result<Repo> {
        let pool = crate::pack::handles::FilePool::new(options.open_files);
        let layout = Arc::new(Layout::open_state(files.dir.clone(), &state, writable, pool)?);
        if !writable {
            layout.set_refresh(refresh_hook(files, path, state.lineage));
        }
        control_file::check_header(
            &*files.index,
            FileKind::Index,
            state.index_synced.max(index::INDEX_HEADER_LEN),
        )?;
        // A collected store's commit map starts at the oldest kept commit (docs/gc-design.md §9).
        let loaded = control_file::load_entries(
            (&*files.index, &layout),
            state.index_keep_from,
            state.index_end,
            state.index_synced,
            (None, state.keep_from),
            state.pack_end,
        )?;
        let oldest_kept = match loaded.entries.first() {
            Some((hash, offset)) if state.keep_from > 0 => {
                if *offset != state.keep_from {
                    return Err(StoreError::corrupt(
                        FileKind::Index,
                        state.index_keep_from,
                        format!(
                            "the oldest kept commit is at {offset}, the control file says {}",
                            state.keep_from
                        ),
                    ));
                }
                Some(*hash)
            }
            _ => None,
        };
        for (name, (hash, offset)) in &state.branches {
            if !loaded.entries.iter().any(|entry| entry == &(*hash, *offset)) {
                return Err(StoreError::corrupt(
                    FileKind::Control,
                    0,
                    format!("branch {name:?} names commit {hash} at {offset}, not in the index"),
                ));
            }
        }
        let last_commit = loaded.entries.last().map(|(_, offset)| *offset);
        let commits: HashMap<_, _> = loaded.entries.into_iter().collect();
        let confirmed = control.confirmed == Some(state.generation);
        // A damaged spare slot (bit rot, or a torn write of a publish never confirmed): the writer
        // republishes into it now rather than at its next publish.
        let spare_damaged = matches!(control.slots.get(1 - slot), Some(Slot::Damaged(_)));
        let mut max_generation = control.max_generation();
        // The slot the handle stands on: the chosen one, or the other after a republish.
        let mut target = slot;
        if writable {
            // The order matters (docs/store.md, *A writer's open*): the chosen state is made
            // durable and published into both slots first; files are deleted only then.
            let io = |op, e| StoreError::io(FileKind::Control, 0, op, e);
            // 1. The state may have been written but not synced by a writer that died: make it
            // durable before anything is deleted or the other slot is overwritten.
            if !confirmed {
                files.control.sync().map_err(|e| io("sync", e))?;
            }
            if let Some((at, bytes)) = &loaded.rebuilt {
                files
                    .index
                    .write_at(*at, bytes)
                    .map_err(|e| StoreError::io(FileKind::Index, *at, "write", e))?;
            }
            // 2. Republish into the other slot when it lags, is damaged, or names files this
            // state does not (after a GC: the retired chunks), so that after the deletions below
            // no valid slot names a missing file, whichever of the two a power loss leaves.
            let other_names_more =
                control.state(1 - slot).is_some_and(|other| names_files_beyond(other, &state));
            // Standing on the older slot because the newest failed to load: the commits of the
            // newest are dropped and this writer will append over them, so the state starts a new
            // lineage (readers holding the dropped timeline reopen), published before any write.
            let fallback = control.newest() != Some(slot);
            if fallback {
                state.lineage = control.max_lineage() + 1;
            }
            if state.index_synced < state.index_end
                || !confirmed
                || spare_damaged
                || other_names_more
                || fallback
            {
                files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
                state.index_synced = state.index_end;
                max_generation += 1;
                state.generation = max_generation;
                target = 1 - slot;
                control_file::write_slot(&*files.control, target, &state.encode()?)?;
                files.control.sync().map_err(|e| io("sync", e))?;
                control_file::write_confirm(&*files.control, state.generation)?;
            }
            // 3. Chunks created by a roll that was never published; files a GC retired, or wrote
            // without switching. Never when standing on an older slot because the newest failed
            // to load: its files are not ours to judge (they stay until a later open).
            if control.newest() == Some(slot) {
                layout.remove_orphans()?;
                layout.remove_unnamed()?;
            }
        }
        Ok(Self::assemble(
            files,
            layout,
            writable,
            options,
            path,
            state,
            (commits, last_commit, oldest_kept),
            target,
            max_generation,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        files: &StoreFiles,
        layout: Arc<Layout>,
        writable: bool,
        options: &RepoOptions,
        path: Option<&Path>,
        state: ControlState,
        (commits, last_commit, oldest_kept): (
            HashMap<larch_core::Hash, u64>,
            Option<u64>,
            Option<larch_core::Hash>,
        ),
        slot: usize,
        max_generation: u64,
    ) -> Repo {
        let reader =
            PackReader::new(layout, state.pack_end, options.cache_bytes).verifying(options.verify_on_load);
        Repo {
            path: path.map(Path::to_path_buf),
            files: files.clone(),
            source: PackSource::new(reader),
            synced_pack_end: state.pack_end,
            confirm_synced: false,
            state,
            commits,
            last_commit,
            slot,
            max_generation,
            writable,
            options: options.clone(),
            poisoned: false,
            unsynced_commits: 0,
            buffer: Vec::new(),
            encoder_tables: None,
            stats: StoreStats::default(),
            last_write: WriteCounts::default(),
            gc: None,
            gc_after: crate::gc::run::GcAfter::with_oldest_kept(oldest_kept),
            publisher: None,
            prime_fraction: crate::repo::PRIME_FRACTION,
            bulk_sessions: HashMap::new(),
            _lock: None,
        }
    }

    fn initialize(files: &StoreFiles) -> Result<ControlFileState> {
        let index_io = |op, e| StoreError::io(FileKind::Index, 0, op, e);
        files.index.write_at(0, &index::header()).map_err(|e| index_io("write", e))?;
        files.index.sync().map_err(|e| index_io("sync", e))?;
        // Chunk 0, synced with the directory entries of the files before the control names them.
        Layout::create_first(&files.dir)?;
        let state = ControlState {
            generation: 1,
            pack_end: PACK_HEADER_LEN,
            index_end: index::INDEX_HEADER_LEN,
            index_synced: index::INDEX_HEADER_LEN,
            ..ControlState::default()
        };
        let mut bytes = vec![0u8; crate::format::control::CONTROL_LEN as usize];
        let encoded = state.encode()?;
        bytes.get_mut(..encoded.len()).unwrap_or_default().copy_from_slice(&encoded);
        let confirm = crate::format::control::encode_confirm(1);
        bytes
            .get_mut(crate::format::control::CONFIRM_AT as usize..)
            .unwrap_or_default()
            .copy_from_slice(&confirm);
        files.control.write_at(0, &bytes).map_err(|e| StoreError::io(FileKind::Control, 0, "write", e))?;
        files.control.sync().map_err(|e| StoreError::io(FileKind::Control, 0, "sync", e))?;
        Ok(ControlFileState { slots: [Slot::Valid(state), Slot::Empty], confirmed: Some(1) })
    }

    /// Sees the commits published (and durable) since this handle opened or last reloaded. Returns
    /// whether anything changed. A writer's handle is always up to date.
    pub fn reload(&mut self) -> Result<bool> {
        self.reload_attempt(0)
    }

    fn reload_attempt(&mut self, attempt: u32) -> Result<bool> {
        if self.writable {
            return Ok(false);
        }
        let control = control_file::read_control(&*self.files.control)?;
        let slot = reader_slot(&control, &*self.files.dir, &*self.files.control);
        let Some(state) = slot.and_then(|slot| control.state(slot)).cloned() else {
            return Err(StoreError::NeedsRecovery {
                path: self.path.clone().unwrap_or_default(),
                reason: "the control file has no valid slot".into(),
                missing_file: false,
            });
        };
        // An older generation is a transient view (a slot read while being written): keep ours.
        if state.generation <= self.state.generation {
            return Ok(false);
        }
        // Another lineage: a recovery or a writer's fallback went back to an older state, and the
        // offsets this handle maps commits to may hold other records now, even once the pack has
        // grown past its old end again. Nothing is kept: the caller reopens.
        let rewound =
            |reason: String| StoreError::Rewound { path: self.path.clone().unwrap_or_default(), reason };
        if state.lineage != self.state.lineage {
            return Err(rewound(format!(
                "the control file's lineage is {}, this handle loaded lineage {}",
                state.lineage, self.state.lineage
            )));
        }
        // A store written by a build without lineages: the published state shrank.
        if state.pack_end < self.state.pack_end || state.index_end < self.state.index_end {
            return Err(rewound("the published pack or commit index is shorter than this handle's".into()));
        }
        let layout = self.source.reader.layout().clone();
        // (The layout may be newer than this handle's state: it followed a GC by itself,
        // `pack/layout/refresh.rs`; then it is opened again here.)
        if state.gc_generation != self.state.gc_generation
            || state.segments != self.state.segments
            || state.first_chunk != layout.first_seq()
        {
            // A GC switched since: open the new layout (its segment, the chunks from the new first
            // one). Files of the old one this handle holds stay readable (open descriptors); a file
            // the writer unlinked between our reading `control` and opening it is not an error:
            // `control` then names newer files, read it again.
            let fresh = match Layout::open_state(self.files.dir.clone(), &state, false, layout.pool().clone())
            {
                Ok(fresh) => fresh,
                Err(e) if attempt < 8 && is_missing_file(&e) => {
                    std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
                    return self.reload_attempt(attempt + 1);
                }
                Err(e) => return Err(e),
            };
            layout.replace_with(fresh);
            self.commits.retain(|_, offset| *offset >= state.keep_from);
            self.gc_after.oldest_kept =
                self.commits.iter().find(|(_, offset)| **offset == state.keep_from).map(|(hash, _)| *hash);
        } else {
            // Open the chunks the writer rolled to since (their files were durable before the slot).
            layout.follow((state.first_chunk, state.head_chunk), state.head_start, state.pack_end)?;
        }
        // New entries from where this handle stopped; after a GC that collected commits this
        // handle had not seen yet, from the oldest kept commit's entry (the ones before it name
        // collected commits: neither loaded nor checked).
        let (from, previous) = if state.index_keep_from > self.state.index_end {
            (state.index_keep_from, None)
        } else {
            (self.state.index_end, self.last_commit.filter(|offset| *offset >= state.keep_from))
        };
        let loaded = control_file::load_entries(
            (&*self.files.index, &layout),
            from,
            state.index_end,
            from,
            (previous, state.keep_from),
            state.pack_end,
        )?;
        if self.last_commit.is_some_and(|offset| offset < state.keep_from) {
            self.last_commit = None;
        }
        if let Some((_, offset)) = loaded.entries.last() {
            self.last_commit = Some(*offset);
        }
        self.commits.extend(loaded.entries);
        if self.gc_after.oldest_kept.is_none() && state.keep_from > 0 {
            self.gc_after.oldest_kept =
                self.commits.iter().find(|(_, offset)| **offset == state.keep_from).map(|(hash, _)| *hash);
        }
        self.source.reader.set_end(state.pack_end);
        self.state = state;
        if self.is_archived() {
            // Chunks moved to the lower directory since: release the upper copies this handle holds.
            self.source.reader.layout().release_moved()?;
        }
        Ok(true)
    }
}

/// A new budget for the memory maps of a handle opened with `options` (`None` without `mmap`).
fn map_budget(options: &RepoOptions) -> Option<Arc<crate::io::map_budget::MapBudget>> {
    options.mmap.then(|| crate::io::map_budget::MapBudget::new(options.mmap_budget))
}
