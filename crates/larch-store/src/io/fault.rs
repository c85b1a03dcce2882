//! A fault-injecting storage for crash, power-loss and full-disk tests (cargo feature
//! `fault-injection`, enabled by the store's own tests only). Each file keeps a "written" image (what
//! the process wrote, as the page cache holds it), a "durable" image (what the last sync made
//! durable) and the writes since that sync. A controller counts every write and sync across the
//! files of a store and can cut (crash) at the N-th one, tearing that write in half or after any
//! number of 512-byte sectors ([`FaultController::tear_sectors`]), fail a sync with `EIO` or
//! `ENOSPC` while the process goes on ([`FaultController::fail_sync_at`]), or refuse writes past a
//! space limit with `StorageFull`.
//!
//! What survives a crash ([`Survival`]): a process crash keeps every write (the page cache
//! survives); a power loss keeps the durable image and, of each unsynced write, any subset of its
//! 4 KiB pages (each page kept or lost independently, seeded), in any order across files; the file
//! keeps the length the kept pages give it. Renames (archive mode only) move a file's image to
//! its new name; until a directory sync, a power loss keeps either name independently.

use crate::io::storage::{Directory, Storage, StoreFiles, read_image, write_image};
use std::collections::BTreeMap;
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex, MutexGuard};

/// Granularity at which a power loss keeps or loses unsynced bytes.
pub const FAULT_PAGE: u64 = 4096;
/// The unit of a torn write ([`FaultController::tear_sectors`]): a disk sector.
pub const SECTOR: u64 = 512;

/// The names of the two files that exist from the start (the pack's chunks are created).
const FIXED_FILES: [&str; 2] = ["control", "commits"];

#[derive(Clone, Debug, Default)]
struct Image {
    written: Vec<u8>,
    durable: Vec<u8>,
    /// Writes since the last sync, in order: offset and bytes.
    pending: Vec<(u64, Vec<u8>)>,
    /// Whether the directory names the file (as the process sees it).
    exists: bool,
    /// Whether its directory entry is durable (the last directory sync saw it).
    durable_exists: bool,
}

#[derive(Debug)]
struct FaultState {
    files: BTreeMap<String, Image>,
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    space_limit: Option<u64>,
    /// How much of the write at the cut lands: `None` its first half, `Some(n)` its first `n`
    /// sectors of [`SECTOR`] bytes (at most the whole write).
    tear_sectors: Option<u64>,
    /// The first sync at or after this operation fails with this error (and makes nothing
    /// durable); the process goes on.
    fail_sync: Option<(u64, ErrorKind)>,
    /// What the directory answers to a reader's live-writer probe
    /// ([`Directory::writer_absent`]): `None` (the default) cannot tell.
    writer_absent: Option<bool>,
}

impl Default for FaultState {
    fn default() -> FaultState {
        let fixed = Image { exists: true, durable_exists: true, ..Image::default() };
        FaultState {
            files: FIXED_FILES.iter().map(|name| (name.to_string(), fixed.clone())).collect(),
            ops: 0,
            crash_at: None,
            crashed: false,
            space_limit: None,
            tear_sectors: None,
            fail_sync: None,
            writer_absent: None,
        }
    }
}

impl FaultState {
    fn used(&self) -> u64 {
        self.files.values().filter(|image| image.exists).map(|image| image.written.len() as u64).sum()
    }
}

/// What survives a simulated crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Survival {
    /// Only what was synced (a power loss that drops every unsynced write).
    Durable,
    /// Everything written (a process crash: the page cache survives).
    Written,
    /// A power loss that keeps each unsynced 4 KiB page of each write with probability 1/2, chosen
    /// by a generator seeded with this value (independently per file: writes are reordered across
    /// files, and within a file a later write may survive an earlier one).
    Pages(u64),
    /// [`Survival::Pages`] on a file system that made the new lengths and block allocations
    /// durable but not the data: every lost page reads as zeros, and files keep their written
    /// length.
    PagesZeroed(u64),
    /// A process crash that keeps the page cache *as a page cache*: the next run sees every
    /// written byte and directory operation, but only what was synced is durable, so a power loss
    /// during the next run (a cut, then [`FaultController::restart`] with another survival) can
    /// still lose the rest. [`Survival::Written`] instead makes everything written durable.
    ProcessCrash,
}

/// Controls the faults of the files of one simulated store: `control`, `commits` and the chunk
/// files its directory creates and removes ([`Directory`]). Creations and removals count as
/// operations (cut points) like writes and syncs; a power loss keeps those not followed by a
/// directory sync or not, independently per file (seeded).
#[derive(Debug, Default)]
pub struct FaultController {
    state: Mutex<FaultState>,
}

fn crashed() -> io::Error {
    io::Error::other("simulated crash: the process is dead")
}

/// A small deterministic generator (SplitMix64) for the pages a power loss keeps.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl FaultController {
    /// A controller of three empty files, without faults.
    pub fn new() -> Arc<FaultController> {
        Arc::new(FaultController::default())
    }

    fn state(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The store files backed by this controller.
    pub fn files(self: &Arc<Self>) -> StoreFiles {
        let file = |name: &str| {
            Arc::new(FaultyStorage { controller: self.clone(), name: name.to_string() }) as Arc<dyn Storage>
        };
        StoreFiles {
            control: file("control"),
            index: file("commits"),
            dir: Arc::new(FaultDirectory { controller: self.clone() }),
        }
    }

    /// Cuts at operation number `n` (0-based count of writes and syncs), or never.
    pub fn crash_at(&self, n: Option<u64>) {
        self.state().crash_at = n;
    }

    /// Number of writes and syncs so far.
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// Whether the cut happened.
    pub fn has_crashed(&self) -> bool {
        self.state().crashed
    }

    /// How the write at the cut is torn: `None` (the default) lands its first half, `Some(n)` its
    /// first `n` sectors of [`SECTOR`] bytes (0: nothing; at most the whole write), so that a record
    /// smaller than a page (a control slot) can be torn at any sector.
    pub fn tear_sectors(&self, sectors: Option<u64>) {
        self.state().tear_sectors = sectors;
    }

    /// Makes the first sync (of a file or of the directory) at or after operation `n` fail with
    /// an error of `kind` (`EIO`: `ErrorKind::Other`; `ENOSPC`: `ErrorKind::StorageFull`), as a
    /// disk does: nothing becomes durable, and the process goes on (no cut). `None`: never.
    pub fn fail_sync_at(&self, n: Option<u64>, kind: ErrorKind) {
        self.state().fail_sync = n.map(|n| (n, kind));
    }

    /// What a reader's live-writer probe finds ([`Directory::writer_absent`]): `Some(true)` no
    /// writer holds the store (it died), `Some(false)` one does, `None` the probe cannot tell (the
    /// default).
    pub fn set_writer_absent(&self, absent: Option<bool>) {
        self.state().writer_absent = absent;
    }

    /// Limits the total bytes of all files (writes past it fail with `StorageFull`), or lifts it.
    pub fn set_space_limit(&self, limit: Option<u64>) {
        self.state().space_limit = limit;
    }

    /// Total written bytes of the files.
    pub fn used_bytes(&self) -> u64 {
        self.state().used()
    }

    /// The written image of file `name` (empty when absent).
    pub fn written(&self, name: &str) -> Vec<u8> {
        self.state()
            .files
            .get(name)
            .filter(|image| image.exists)
            .map(|image| image.written.clone())
            .unwrap_or_default()
    }

    /// The names of the files the directory holds, as the process sees them.
    pub fn names(&self) -> Vec<String> {
        self.state().files.iter().filter(|(_, image)| image.exists).map(|(name, _)| name.clone()).collect()
    }

    /// A new controller holding what survives a crash now, without faults (the "reboot").
    pub fn restart(&self, survival: Survival) -> Arc<FaultController> {
        let state = self.state();
        if survival == Survival::ProcessCrash {
            let files = state.files.clone();
            return Arc::new(FaultController {
                state: Mutex::new(FaultState { files, ..FaultState::default() }),
            });
        }
        let mut files = BTreeMap::new();
        for (name, image) in &state.files {
            let name_seed =
                name.bytes().fold(0u64, |acc, byte| (acc ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
            let survived = match survival {
                Survival::Durable if image.durable_exists => image.durable.clone(),
                Survival::Written if image.exists => image.written.clone(),
                Survival::Pages(seed) | Survival::PagesZeroed(seed) => {
                    let zeroed = matches!(survival, Survival::PagesZeroed(_));
                    let mut rng = SplitMix(seed ^ name_seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
                    // A creation or removal not followed by a directory sync may be lost.
                    let exists =
                        if image.exists == image.durable_exists { image.exists } else { rng.next() & 1 == 1 };
                    if !exists {
                        continue;
                    }
                    let mut out = image.durable.clone();
                    for (offset, data) in &image.pending {
                        let mut at = *offset;
                        let end = offset + data.len() as u64;
                        while at < end {
                            let page_end = ((at / FAULT_PAGE) + 1) * FAULT_PAGE;
                            let piece_end = page_end.min(end);
                            let piece = data.get((at - offset) as usize..(piece_end - offset) as usize);
                            if let Some(piece) = piece {
                                // Cannot fail: offsets of an in-memory image.
                                if rng.next() & 1 == 1 {
                                    let _ = write_image(&mut out, at, piece);
                                } else if zeroed {
                                    let _ = write_image(&mut out, at, &vec![0; piece.len()]);
                                }
                            }
                            at = piece_end;
                        }
                    }
                    if zeroed && out.len() < image.written.len() {
                        out.resize(image.written.len(), 0);
                    }
                    out
                }
                _ => continue,
            };
            let image = Image {
                written: survived.clone(),
                durable: survived,
                pending: Vec::new(),
                exists: true,
                durable_exists: true,
            };
            files.insert(name.clone(), image);
        }
        for name in FIXED_FILES {
            files.entry(name.to_string()).or_insert(Image {
                exists: true,
                durable_exists: true,
                ..Image::default()
            });
        }
        Arc::new(FaultController { state: Mutex::new(FaultState { files, ..FaultState::default() }) })
    }
}

/// The directory of a [`FaultController`]'s store.
#[derive(Debug)]
pub struct FaultDirectory {
    controller: Arc<FaultController>,
}

impl Directory for FaultDirectory {
    fn writer_absent(&self) -> Option<bool> {
        self.controller.state().writer_absent
    }

    fn create(&self, name: &str) -> io::Result<Arc<dyn Storage>> {
        let mut state = self.controller.state();
        if FaultyStorage::step(&mut state)? {
            return Err(crashed());
        }
        let image = state.files.entry(name.to_string()).or_default();
        image.exists = true;
        image.written.clear();
        image.pending.clear();
        Ok(Arc::new(FaultyStorage { controller: self.controller.clone(), name: name.to_string() }))
    }

    fn open(&self, name: &str, _writable: bool) -> io::Result<Arc<dyn Storage>> {
        let state = self.controller.state();
        if state.crashed {
            return Err(crashed());
        }
        match state.files.get(name) {
            Some(image) if image.exists => {
                Ok(Arc::new(FaultyStorage { controller: self.controller.clone(), name: name.to_string() }))
            }
            _ => Err(io::Error::new(ErrorKind::NotFound, format!("no file {name}"))),
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let state = self.controller.state();
        if state.crashed {
            return Err(crashed());
        }
        Ok(state.files.iter().filter(|(_, image)| image.exists).map(|(name, _)| name.clone()).collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut state = self.controller.state();
        if FaultyStorage::step(&mut state)? {
            return Err(crashed());
        }
        match state.files.get_mut(name) {
            Some(image) if image.exists => {
                image.exists = false;
                Ok(())
            }
            _ => Err(io::Error::new(ErrorKind::NotFound, format!("no file {name}"))),
        }
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.controller.state();
        if FaultyStorage::step(&mut state)? {
            return Err(crashed());
        }
        FaultyStorage::sync_fault(&mut state)?;
        for image in state.files.values_mut() {
            image.durable_exists = image.exists;
        }
        Ok(())
    }

    /// Moves the image of `from` (written and durable bytes) to `to`. Until a directory sync, a
    /// power loss may keep the old name, the new one, both or neither (each independently).
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut state = self.controller.state();
        if FaultyStorage::step(&mut state)? {
            return Err(crashed());
        }
        let moved = match state.files.get_mut(from) {
            Some(image) if image.exists => {
                image.exists = false;
                Image { exists: true, durable_exists: false, ..image.clone() }
            }
            _ => return Err(io::Error::new(ErrorKind::NotFound, format!("no file {from}"))),
        };
        state.files.insert(to.to_string(), moved);
        Ok(())
    }
}

/// One file of a [`FaultController`].
#[derive(Debug)]
pub struct FaultyStorage {
    controller: Arc<FaultController>,
    name: String,
}

impl FaultyStorage {
    /// Counts an operation; `Ok(true)` when this one is the cut.
    fn step(state: &mut FaultState) -> io::Result<bool> {
        if state.crashed {
            return Err(crashed());
        }
        let cut = state.crash_at == Some(state.ops);
        state.ops += 1;
        if cut {
            state.crashed = true;
        }
        Ok(cut)
    }

    /// The injected sync failure, once, at the first sync counted at or after its operation.
    fn sync_fault(state: &mut FaultState) -> io::Result<()> {
        match state.fail_sync {
            Some((from, kind)) if state.ops > from => {
                state.fail_sync = None;
                Err(io::Error::new(kind, "simulated sync failure"))
            }
            _ => Ok(()),
        }
    }
}

impl Storage for FaultyStorage {
    fn len(&self) -> io::Result<u64> {
        let state = self.controller.state();
        state.files.get(&self.name).map(|image| image.written.len() as u64).ok_or_else(crashed)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let state = self.controller.state();
        if state.crashed {
            return Err(crashed());
        }
        let image = state.files.get(&self.name).ok_or_else(crashed)?;
        read_image(&image.written, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.controller.state();
        let total = state.used();
        let cut = Self::step(&mut state)?;
        let current = state.files.get(&self.name).map_or(0, |image| image.written.len() as u64);
        let growth = (offset + data.len() as u64).saturating_sub(current);
        if let Some(limit) = state.space_limit
            && total + growth > limit
        {
            return Err(io::Error::new(ErrorKind::StorageFull, "simulated full disk (ENOSPC)"));
        }
        // A torn write at the cut: only its first half, or its first sectors, land.
        let torn = match state.tear_sectors {
            None => data.len() / 2,
            Some(sectors) => {
                usize::try_from(sectors.saturating_mul(SECTOR)).unwrap_or(usize::MAX).min(data.len())
            }
        };
        let image = state.files.get_mut(&self.name).ok_or_else(crashed)?;
        let landed = if cut { data.get(..torn).unwrap_or_default() } else { data };
        write_image(&mut image.written, offset, landed)?;
        image.pending.push((offset, landed.to_vec()));
        if cut { Err(crashed()) } else { Ok(()) }
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.controller.state();
        if Self::step(&mut state)? {
            return Err(crashed());
        }
        Self::sync_fault(&mut state)?;
        let image = state.files.get_mut(&self.name).ok_or_else(crashed)?;
        image.durable = image.written.clone();
        image.pending.clear();
        Ok(())
    }
}
