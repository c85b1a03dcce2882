//! Dropping what the cache evicts on a thread of its own. A miss evicts one or more decoded nodes,
//! and dropping one walks its entries and frees its allocations: ~4% of a replay's reading thread,
//! part of it under the cache shard's lock. The cache hands its evictions to a [`Graveyard`]
//! instead, which drops them in batches on another thread.

use std::sync::Mutex;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// Items collected before a batch goes to the dropping thread.
const BATCH: usize = 256;
/// Batches waiting for the dropping thread at most; past it the caller drops its batch itself (the
/// memory they hold stays bounded).
const BATCHES_WAITING: usize = 16;

/// Collects values to drop and drops them on a thread of its own, a batch at a time. Values are
/// dropped at the latest when the graveyard is.
pub(crate) struct Graveyard<T: Send + 'static> {
    pending: Mutex<Vec<T>>,
    sender: Option<SyncSender<Vec<T>>>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Graveyard<T> {
    /// A graveyard with its dropping thread (or, if the thread cannot be started, one that drops
    /// on the caller's thread).
    pub fn new() -> Graveyard<T> {
        let (sender, receiver) = sync_channel::<Vec<T>>(BATCHES_WAITING);
        let thread = std::thread::Builder::new()
            .name("larch-drop".into())
            .spawn(move || {
                // Woken by the thread whose cache evicts, on its core: it must not take that
                // core from it (docs/benchmarks.md at c117370, "Issue 11, nineteenth round").
                larch_core::mark_helper_thread();
                for batch in receiver {
                    drop(batch);
                }
            })
            .ok();
        let sender = thread.as_ref().map(|_| sender);
        Graveyard { pending: Mutex::new(Vec::with_capacity(BATCH)), sender, thread }
    }

    /// Takes `values` to drop later, elsewhere.
    pub fn bury(&self, values: impl IntoIterator<Item = T>) {
        let Some(sender) = &self.sender else { return };
        let full = {
            let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            pending.extend(values);
            if pending.len() < BATCH {
                return;
            }
            std::mem::replace(&mut *pending, Vec::with_capacity(BATCH))
        };
        // Sent outside the lock; a batch the thread has no room for is dropped here.
        match sender.try_send(full) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl<T: Send + 'static> Drop for Graveyard<T> {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_buried_value_is_dropped_at_the_latest_with_the_graveyard() {
        let value = Arc::new(());
        let graveyard = Graveyard::new();
        for _ in 0..(BATCH * 3 + 7) {
            graveyard.bury([value.clone()]);
        }
        // Batches sent so far are dropped by the thread, the rest is pending.
        assert!(Arc::strong_count(&value) > 1);
        drop(graveyard);
        assert_eq!(Arc::strong_count(&value), 1, "every buried clone was dropped");
    }

    #[test]
    fn full_batches_leave_the_caller() {
        let value = Arc::new(());
        let graveyard = Graveyard::new();
        graveyard.bury(std::iter::repeat_n(value.clone(), BATCH));
        // The batch went to the dropping thread: it drops it soon, the graveyard still lives.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while Arc::strong_count(&value) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(Arc::strong_count(&value), 1);
        drop(graveyard);
    }

    /// Records, when dropped, whether it was dropped on a helper thread.
    struct Probe(Arc<std::sync::Mutex<Vec<bool>>>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(larch_core::is_helper_thread());
        }
    }

    #[test]
    fn batches_are_dropped_on_a_helper_thread() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let graveyard = Graveyard::new();
        graveyard.bury((0..BATCH).map(|_| Probe(seen.clone())));
        drop(graveyard);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), BATCH);
        // The dropping thread does not preempt the thread that woke it (on Linux).
        assert!(seen.iter().all(|helper| *helper == cfg!(target_os = "linux")), "{seen:?}");
    }
}
