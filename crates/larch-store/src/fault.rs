//! A fault-injecting storage for crash and full-disk tests: each file keeps a "written" image (what
//! the process wrote) and a "durable" image (what survives a power loss). A controller counts every
//! write, sync and replace across the files of a store, and can cut (crash) at the N-th one —
//! tearing that write in half — or refuse writes that exceed a space limit with `StorageFull`.

use crate::storage::{Storage, StoreFiles, read_image, write_image};
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Clone, Debug, Default)]
struct Image {
    written: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct FaultState {
    images: [Image; 3],
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    space_limit: Option<u64>,
}

/// What survives a simulated crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Survival {
    /// Only what was synced (a power loss that drops every unsynced write).
    Durable,
    /// Everything written (a process crash: the page cache survives).
    Written,
}

/// Controls the faults of the three files of one simulated store.
#[derive(Debug, Default)]
pub struct FaultController {
    state: Mutex<FaultState>,
}

fn crashed() -> io::Error {
    io::Error::other("simulated crash: the process is dead")
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
        let file = |index| Arc::new(FaultyStorage { controller: self.clone(), index }) as Arc<dyn Storage>;
        StoreFiles { control: file(0), pack: file(1), index: file(2) }
    }

    /// Cuts at operation number `n` (0-based count of writes, syncs and replaces), or never.
    pub fn crash_at(&self, n: Option<u64>) {
        self.state().crash_at = n;
    }

    /// Number of writes, syncs and replaces so far.
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// Whether the cut happened.
    pub fn has_crashed(&self) -> bool {
        self.state().crashed
    }

    /// Limits the total bytes of all files (writes past it fail with `StorageFull`), or lifts it.
    pub fn set_space_limit(&self, limit: Option<u64>) {
        self.state().space_limit = limit;
    }

    /// Total written bytes of the three files.
    pub fn used_bytes(&self) -> u64 {
        self.state().images.iter().map(|image| image.written.len() as u64).sum()
    }

    /// A new controller holding what survives a crash now, without faults (the "reboot").
    pub fn restart(&self, survival: Survival) -> Arc<FaultController> {
        let state = self.state();
        let mut images = state.images.clone();
        for image in &mut images {
            match survival {
                Survival::Durable => image.written = image.durable.clone(),
                Survival::Written => image.durable = image.written.clone(),
            }
        }
        Arc::new(FaultController { state: Mutex::new(FaultState { images, ..FaultState::default() }) })
    }
}

/// One file of a [`FaultController`].
#[derive(Debug)]
pub struct FaultyStorage {
    controller: Arc<FaultController>,
    index: usize,
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
}

impl Storage for FaultyStorage {
    fn len(&self) -> io::Result<u64> {
        let state = self.controller.state();
        state.images.get(self.index).map(|image| image.written.len() as u64).ok_or_else(crashed)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let state = self.controller.state();
        if state.crashed {
            return Err(crashed());
        }
        let image = state.images.get(self.index).ok_or_else(crashed)?;
        read_image(&image.written, offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.controller.state();
        let total: u64 = state.images.iter().map(|image| image.written.len() as u64).sum();
        let cut = Self::step(&mut state)?;
        let current = state.images.get(self.index).map_or(0, |image| image.written.len() as u64);
        let growth = (offset + data.len() as u64).saturating_sub(current);
        if let Some(limit) = state.space_limit
            && total + growth > limit
        {
            return Err(io::Error::new(ErrorKind::StorageFull, "simulated full disk (ENOSPC)"));
        }
        let image = state.images.get_mut(self.index).ok_or_else(crashed)?;
        if cut {
            // A torn write: only its first half lands.
            let half = data.get(..data.len() / 2).unwrap_or_default();
            write_image(&mut image.written, offset, half)?;
            return Err(crashed());
        }
        write_image(&mut image.written, offset, data)
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.controller.state();
        if Self::step(&mut state)? {
            return Err(crashed());
        }
        let image = state.images.get_mut(self.index).ok_or_else(crashed)?;
        image.durable = image.written.clone();
        Ok(())
    }

    fn replace(&self, data: &[u8], durable: bool) -> io::Result<()> {
        let mut state = self.controller.state();
        if Self::step(&mut state)? {
            return Err(crashed());
        }
        let image = state.images.get_mut(self.index).ok_or_else(crashed)?;
        image.written = data.to_vec();
        if durable {
            image.durable = data.to_vec();
        }
        Ok(())
    }
}
