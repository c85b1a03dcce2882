//! Closing and flushing a writer, and publishing its commits through the commit switch (the
//! protocol and its crash argument are in `docs/store.md`).

use crate::error::{FileKind, Result, StoreError};
use crate::format::control::ControlState;
use crate::options::SyncPolicy;
use crate::repo::Repo;
use crate::switch::publisher::{Publisher, SwitchJob};

impl Repo {
    /// Closes the handle, first making every commit durable and published (under
    /// `SyncPolicy::Every` or `Never`, a final sync and publish), and the commit index durable.
    pub fn close(mut self) -> Result<()> {
        // A running GC is waited for and switched (its error, if it had to be abandoned, is
        // returned after the store is closed cleanly).
        // Retired files are unlinked on this thread before it returns (a background unlink would
        // not outlive the process).
        self.gc_delete_synchronously();
        let gc = self.gc_wait();
        self.flush()?;
        self.gc_delete_retired_now()?;
        self.sync_confirmation()?;
        gc.map(|_| ())
    }

    /// Makes every commit of this writer durable and publishes it (the commit index included):
    /// under `SyncPolicy::Every` and `Never`, commits since the last sync are visible to this
    /// handle only until this, the `N`-th commit, or [`Repo::close`]. Nothing to do on a reader.
    pub fn flush(&mut self) -> Result<()> {
        if !self.writable || self.poisoned {
            return Ok(());
        }
        self.settle_publish()?;
        if self.gc_ready() {
            // A finished GC switches here (the switch forces a publish).
            let state = self.state.clone();
            self.publish(state, 0, 0)?;
        }
        if self.unsynced_commits == 0 && self.state.index_synced == self.state.index_end {
            return Ok(());
        }
        let mut state = self.state.clone();
        let outcome = (|| {
            self.files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
            self.stats.syncs += 1;
            state.index_synced = state.index_end;
            self.write_switch(&mut state)
        })();
        if outcome.is_err() {
            self.poisoned = true;
        }
        outcome?;
        self.state = state;
        Ok(())
    }

    /// Best effort of [`Repo::drop`]: publish what a `never`/`every N` writer staged.
    fn flush_on_drop(&mut self) {
        // A running GC is waited for (its worker must not outlive the handle: a later writer
        // could reuse its segment's name) and switches with the flush; the files GCs retired are
        // unlinked before the handle goes (else the next writer's open removes them).
        self.gc_delete_synchronously();
        let _ = self.settle_publish();
        self.gc_join();
        if self.gc_ready() && !self.poisoned {
            let state = self.state.clone();
            let _ = self.publish(state, 0, 0);
        }
        if self.unsynced_commits > 0 {
            let _ = self.flush();
        }
        let _ = self.gc_delete_retired_now();
        let _ = self.sync_confirmation();
    }

    /// Makes the last confirmation durable (one more sync of the control file, at close or drop),
    /// so that readers opening after a power loss see the last publish without a writer's help.
    fn sync_confirmation(&mut self) -> Result<()> {
        if self.writable && !self.poisoned && !self.confirm_synced {
            self.files.control.sync().map_err(|e| StoreError::io(FileKind::Control, 0, "sync", e))?;
            self.stats.syncs += 1;
            self.confirm_synced = true;
        }
        Ok(())
    }

    /// Makes the pack durable up to `state.pack_end`, then writes `state` with a new generation
    /// into the slot the current state is not in, syncs the control file, and confirms (after the
    /// switch in flight, if any, is done).
    pub(crate) fn write_switch(&mut self, state: &mut ControlState) -> Result<()> {
        self.settle_publish()?;
        let job = self.switch_job(state)?;
        let syncs = job.run()?;
        self.adopt_switch(&job, syncs);
        Ok(())
    }

    /// [`Repo::write_switch`] on the publisher thread ([`SyncPolicy::Pipelined`]): returns once
    /// the switch is handed over; [`Repo::settle_publish`] adopts it.
    fn send_switch(&mut self, state: &mut ControlState) -> Result<()> {
        self.settle_publish()?;
        let job = self.switch_job(state)?;
        let publisher = match self.publisher.as_mut() {
            Some(publisher) => publisher,
            None => self.publisher.insert(Publisher::start()?),
        };
        publisher.send(job)
    }

    /// The switch to `state`, given the next generation.
    fn switch_job(&self, state: &mut ControlState) -> Result<SwitchJob> {
        let generation = self.max_generation + 1;
        state.generation = generation;
        let bytes = state.encode()?;
        let layout = self.source.reader.layout().clone();
        // Sync 1: every chunk written since the last publish (one; two at a roll, with the
        // directory, so that the new chunk file exists durably before a slot names it).
        let sync_pack_from =
            (state.pack_end > self.synced_pack_end || layout.needs_sync()).then_some(self.synced_pack_end);
        Ok(SwitchJob {
            layout,
            control: self.files.control.clone(),
            bytes,
            slot: 1 - self.slot,
            generation,
            pack_end: state.pack_end,
            sync_pack_from,
        })
    }

    /// After a switch reached the disk: the slot and generation it wrote are the current ones.
    fn adopt_switch(&mut self, job: &SwitchJob, syncs: u64) {
        self.stats.syncs += syncs;
        self.confirm_synced = false;
        self.slot = job.slot;
        self.max_generation = job.generation;
        self.synced_pack_end = job.pack_end;
        self.unsynced_commits = 0;
        self.gc_delete_retired(job.generation);
    }

    /// Waits for the switch in flight on the publisher thread ([`SyncPolicy::Pipelined`]), if
    /// any, and adopts it. Its failure poisons the handle (whether the state reached the disk is
    /// unknown) and is returned here, once.
    pub(crate) fn settle_publish(&mut self) -> Result<()> {
        match self.publisher.as_mut().and_then(Publisher::wait) {
            None => Ok(()),
            Some(Ok((job, syncs))) => {
                self.adopt_switch(&job, syncs);
                Ok(())
            }
            Some(Err(e)) => {
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Waits until every commit this handle returned is durable and published. Under
    /// [`SyncPolicy::Pipelined`] this is the last commit's publish, running beside the caller;
    /// under `commit` there is nothing to wait for; under `every N` and `never` staged commits
    /// stay staged ([`Repo::flush`] publishes them). Returns the error of a publish that failed
    /// (the handle is then poisoned), or [`StoreError::Poisoned`] on a poisoned handle.
    pub fn wait_durable(&mut self) -> Result<()> {
        self.settle_publish()?;
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }

    /// Adopts `state` advanced by the appended lengths; publishes it through the switch when the
    /// sync policy says this commit is durable. A failure while publishing poisons the handle:
    /// whether the new state reached the disk is unknown until the store is reopened.
    pub(crate) fn publish(&mut self, mut state: ControlState, pack_len: u64, index_len: u64) -> Result<()> {
        state.pack_end += pack_len;
        state.index_end += index_len;
        // The publish in flight first (`SyncPolicy::Pipelined`): a GC's switch taken below must
        // not be dropped by its failure.
        self.settle_publish()?;
        let layout = self.source.reader.layout();
        (state.head_chunk, state.head_start) = layout.head();
        state.first_chunk = layout.first_seq();
        // A finished GC switches with this publish (docs/gc-design.md §5).
        let mut switch = self.gc_take_switch();
        if let Some(switch) = switch.as_mut() {
            let before = state.clone();
            self.gc_apply(switch, &mut state);
            if state.encode().is_err() {
                // No room in the slot for the new segment: the GC cannot switch.
                state = before;
                self.gc_abandon(switch, "the control slot has no room for the segment list");
            }
        }
        let switch = switch.filter(|_| state.gc_generation > self.state.gc_generation);
        // Refused before anything is synced: too many branches for a slot.
        state.encode()?;
        let durable = switch.is_some()
            || match self.options.sync {
                SyncPolicy::Never => false,
                SyncPolicy::Commit | SyncPolicy::Pipelined => true,
                SyncPolicy::Every(n) => self.unsynced_commits + 1 >= n.max(1),
            };
        // A GC's switch is published on this thread (its files change with it).
        let pipelined = switch.is_none() && self.options.sync == SyncPolicy::Pipelined;
        if durable {
            let outcome = (|| {
                if switch.is_some() {
                    // The slot names the GC commit's index entry: the index is durable up to it.
                    self.files.index.sync().map_err(|e| StoreError::io(FileKind::Index, 0, "sync", e))?;
                    state.index_synced = state.index_end;
                }
                if pipelined { self.send_switch(&mut state) } else { self.write_switch(&mut state) }
            })();
            if let Err(e) = outcome {
                self.poisoned = true;
                return Err(e);
            }
        } else {
            self.unsynced_commits += 1;
        }
        if let Some(switch) = switch {
            self.gc_switched(switch, state.generation);
        }
        self.source.reader.set_end(state.pack_end);
        self.state = state;
        Ok(())
    }
}

impl Drop for Repo {
    /// A writer dropped without [`Repo::close`] still publishes its staged commits (errors are
    /// ignored: call `close` to see them).
    fn drop(&mut self) {
        self.flush_on_drop();
    }
}
