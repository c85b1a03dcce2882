//! The commit switch's durable half (step 5 of the commit protocol, `docs/store.md`): sync the
//! pack, write the new state into a control slot, sync the control file, confirm. Run on the
//! committing thread, or, under [`crate::SyncPolicy::Pipelined`], on a publisher thread while the
//! writer goes on with the next block; at most one publish is in flight, and the next one (or
//! anything else that needs the published state) waits for it first.

use crate::error::{FileKind, Result, StoreError};
use crate::io::storage::Storage;
use crate::pack::layout::Layout;
use crate::switch::control_file;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One switch to a new state: everything it needs, owned, so that it can run on another thread.
#[derive(Debug)]
pub(crate) struct SwitchJob {
    /// The pack's chunks.
    pub layout: Arc<Layout>,
    /// The control file.
    pub control: Arc<dyn Storage>,
    /// The encoded state (its generation included).
    pub bytes: Vec<u8>,
    /// The slot written: the one the current state is not in.
    pub slot: usize,
    /// The new generation.
    pub generation: u64,
    /// The pack end the new state names.
    pub pack_end: u64,
    /// Whether the pack must be synced first (it grew, or a chunk was created), and from where
    /// (for the error's offset).
    pub sync_pack_from: Option<u64>,
}

impl SwitchJob {
    /// Runs the switch: sync 1 (the pack), identity checks, the slot, sync 2 (the control file),
    /// the confirmation. Returns the number of sync calls made.
    pub(crate) fn run(&self) -> Result<u64> {
        let mut syncs = 0;
        if let Some(from) = self.sync_pack_from {
            self.layout.sync().map_err(|e| StoreError::io(FileKind::Pack, from, "sync", e))?;
            syncs += 1;
        }
        // A file replaced under the writer (deleted, renamed over) would take this publish with it.
        let pack: &dyn Storage = &*self.layout;
        for (storage, kind) in [(&*self.control, FileKind::Control), (pack, FileKind::Pack)] {
            storage.check_identity().map_err(|e| StoreError::io(kind, 0, "check identity", e))?;
        }
        control_file::write_slot(&*self.control, self.slot, &self.bytes)?;
        self.control.sync().map_err(|e| StoreError::io(FileKind::Control, 0, "sync", e))?;
        syncs += 1;
        control_file::write_confirm(&*self.control, self.generation)?;
        Ok(syncs)
    }
}

/// What a finished switch reports back: the job (to adopt its slot and generation) and its result.
type Finished = (SwitchJob, Result<u64>);

/// A thread that runs switch jobs one at a time, in the order given.
#[derive(Debug)]
pub(crate) struct Publisher {
    jobs: Option<SyncSender<SwitchJob>>,
    /// In a mutex only so that a `Repo` stays `Sync` (a receiver is not); one thread uses it.
    done: Mutex<Receiver<Finished>>,
    thread: Option<JoinHandle<()>>,
    /// Whether a job was sent whose result has not been taken.
    in_flight: bool,
}

impl Publisher {
    /// Starts the publisher thread.
    pub(crate) fn start() -> Result<Publisher> {
        let (jobs, receive_jobs) = sync_channel::<SwitchJob>(1);
        let (send_done, done) = sync_channel::<Finished>(1);
        let thread = std::thread::Builder::new()
            .name("larch-publish".into())
            .spawn(move || {
                while let Ok(job) = receive_jobs.recv() {
                    let result = job.run();
                    if send_done.send((job, result)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| StoreError::io(FileKind::Control, 0, "start the publisher thread", e))?;
        Ok(Publisher { jobs: Some(jobs), done: Mutex::new(done), thread: Some(thread), in_flight: false })
    }

    /// Hands `job` to the thread. The caller has taken the previous job's result first.
    pub(crate) fn send(&mut self, job: SwitchJob) -> Result<()> {
        debug_assert!(!self.in_flight, "one switch in flight at a time");
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job));
        match sent {
            Some(Ok(())) => {
                self.in_flight = true;
                Ok(())
            }
            _ => Err(StoreError::io(
                FileKind::Control,
                0,
                "publish",
                std::io::Error::other("the publisher thread has stopped"),
            )),
        }
    }

    /// Waits for the switch in flight, if any: the job done and its sync calls, or its error
    /// (also when the thread vanished without an answer: nothing is known of that switch).
    pub(crate) fn wait(&mut self) -> Option<Result<(SwitchJob, u64)>> {
        if !self.in_flight {
            return None;
        }
        self.in_flight = false;
        let done = self.done.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(match done.recv() {
            Ok((job, result)) => result.map(|syncs| (job, syncs)),
            Err(_) => Err(lost_switch()),
        })
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The error of a switch whose thread vanished (it panicked) before answering.
fn lost_switch() -> StoreError {
    StoreError::io(FileKind::Control, 0, "publish", std::io::Error::other("the publisher thread panicked"))
}
