//! Reading a trace ahead on a thread of its own: [`prefetch`] wraps a reader so that reading and
//! decoding the file happen on another core while the caller applies the operations already read
//! (a replay spent ~9% of its thread decoding the trace).

use super::{BoxedSource, OpSource, TraceError, TraceFormat};
use crate::op::Op;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;

/// Operations sent to the reading side at once.
const BATCH: usize = 1024;
/// Batches read ahead at most (bounds the memory: a few thousand operations).
const BATCHES_AHEAD: usize = 4;
/// A batch ends early once its operations' paths and values hold this many bytes: operations of
/// large paths or values (a path may reach [`MAX_PATH_BYTES`](crate::op::MAX_PATH_BYTES) for a few
/// bytes of trace) are read ahead a few MiB at a time, not a thousand at a time.
const BATCH_BYTES: usize = 4 << 20;

/// Hints the memory of `op`'s paths and value, which the reading thread wrote on another core:
/// the caller touches them one operation later, when they have arrived (docs/benchmarks.md at c117370,
/// "Issue 11, eighteenth round").
fn hint_op(op: &Op) {
    for path in op.paths() {
        larch_core::hint_memory(path.encoded());
    }
    if let Op::Add { value, .. } = op {
        larch_core::hint_memory(&value[..]);
    }
}

/// The bytes `op` holds beyond its own size: its paths and its value.
fn held_bytes(op: &Op) -> usize {
    let value = match op {
        Op::Add { value, .. } => value.len(),
        _ => 0,
    };
    op.paths().map(|path| path.byte_len()).sum::<usize>() + value
}

/// One read item with the reader's operation count and byte offset after it.
type Item = (Result<Op, TraceError>, u64, u64);

/// A batch of items, in reverse order (the caller pops them off the end); the last one of the
/// trace carries the reader's truncated tail.
struct Batch {
    items: Vec<Item>,
    end: Option<Option<u64>>,
}

/// A reader running on a thread of its own, `BATCH` operations at a time (fewer once they hold
/// `BATCH_BYTES` of paths and values), at most `BATCHES_AHEAD` batches ahead of its caller.
/// It yields exactly the items of the reader it wraps, in order, and reports the same [`ops_read`](OpSource::ops_read) and
/// [`offset`](OpSource::offset) as that reader after the same items (not the reading thread's,
/// which is ahead). Dropping it stops the thread.
pub struct PrefetchSource {
    format: TraceFormat,
    metadata: Vec<(String, String)>,
    receiver: Option<Receiver<Batch>>,
    /// The batch being read, in reverse order.
    current: Vec<Item>,
    /// Where emptied batches go back to the reading thread, which fills them again: a batch is a
    /// large allocation (~100 KiB), and allocating one per 1,024 operations on one thread and
    /// freeing it on another made the allocator take fresh, zeroed pages all the time.
    recycle: SyncSender<Vec<Item>>,
    truncated_tail: Option<u64>,
    ops_read: u64,
    offset: u64,
    finished: bool,
    thread: Option<JoinHandle<()>>,
}

/// `source`, read ahead on a thread of its own (see [`PrefetchSource`]). Fails only if the thread
/// cannot be started.
pub fn prefetch(source: BoxedSource) -> Result<PrefetchSource, TraceError> {
    let format = source.format();
    let metadata = source.metadata().to_vec();
    let (ops_read, offset) = (source.ops_read(), source.offset());
    let (sender, receiver) = sync_channel(BATCHES_AHEAD);
    let (recycle, recycled) = sync_channel(BATCHES_AHEAD + 2);
    let thread = std::thread::Builder::new()
        .name("larch-trace".into())
        .spawn(move || read_ahead(source, &sender, &recycled))
        .map_err(|source| TraceError::Io { offset, source })?;
    Ok(PrefetchSource {
        format,
        metadata,
        receiver: Some(receiver),
        current: Vec::new(),
        recycle,
        truncated_tail: None,
        ops_read,
        offset,
        finished: false,
        thread: Some(thread),
    })
}

/// The reading thread: sends batches (filling the emptied ones the caller sends back) until the
/// trace ends or the caller hangs up.
fn read_ahead(mut source: BoxedSource, sender: &SyncSender<Batch>, recycled: &Receiver<Vec<Item>>) {
    // Woken each time the caller takes a batch, on the caller's core: it must not take that core
    // from it (docs/benchmarks.md at c117370, "Issue 11, nineteenth round").
    larch_core::mark_helper_thread();
    loop {
        let mut items = match recycled.try_recv() {
            Ok(mut items) => {
                items.clear();
                items
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::with_capacity(BATCH),
        };
        let mut ended = false;
        let mut bytes = 0;
        while items.len() < BATCH && bytes < BATCH_BYTES {
            match source.next() {
                Some(item) => {
                    bytes += item.as_ref().map_or(0, held_bytes);
                    items.push((item, source.ops_read(), source.offset()));
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        let end = ended.then(|| source.truncated_tail());
        items.reverse();
        if sender.send(Batch { items, end }).is_err() || ended {
            return;
        }
    }
}

impl Iterator for PrefetchSource {
    type Item = Result<Op, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((item, ops_read, offset)) = self.current.pop() {
                self.ops_read = ops_read;
                self.offset = offset;
                // The next operation's paths and value (its item arrived with the last one), and
                // the item after it (in the batch, which the reading thread filled on its core).
                if let Some((Ok(next), ..)) = self.current.last() {
                    hint_op(next);
                }
                if let Some(after) = self.current.len().checked_sub(2).and_then(|at| self.current.get(at)) {
                    larch_core::hint_memory(after);
                }
                return Some(item);
            }
            if self.finished {
                return None;
            }
            let batch = self.receiver.as_ref().and_then(|receiver| receiver.recv().ok());
            let Some(batch) = batch else {
                // The thread is gone without sending the end of the trace: it panicked.
                self.finished = true;
                let source = std::io::Error::other("the trace reading thread stopped before the end");
                return Some(Err(TraceError::Io { offset: self.offset, source }));
            };
            if let Some(tail) = batch.end {
                self.finished = true;
                self.truncated_tail = tail;
            }
            let emptied = std::mem::replace(&mut self.current, batch.items);
            // A full or closed channel: the batch is dropped instead.
            let _ = self.recycle.try_send(emptied);
        }
    }
}

impl OpSource for PrefetchSource {
    fn format(&self) -> TraceFormat {
        self.format
    }

    fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    fn truncated_tail(&self) -> Option<u64> {
        self.truncated_tail
    }

    fn ops_read(&self) -> u64 {
        self.ops_read
    }

    fn offset(&self) -> u64 {
        self.offset
    }
}

impl Drop for PrefetchSource {
    fn drop(&mut self) {
        // Hanging up first: a thread blocked on a full channel then returns.
        self.receiver = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for PrefetchSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefetchSource")
            .field("format", &self.format)
            .field("ops_read", &self.ops_read)
            .field("offset", &self.offset)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::larch::LarchWriter;
    use crate::format::{OpSink, open_reader};
    use crate::op::{Path, Scoped};

    /// A larch trace of `count` finds, each of a path of `steps` steps of `step_len` bytes.
    fn trace_of_paths(count: u64, steps: usize, step_len: usize) -> Vec<u8> {
        let mut writer = LarchWriter::new(Vec::new(), &[]).unwrap();
        for i in 0..count {
            let step = vec![b'a' + (i % 26) as u8; step_len];
            let op = Op::Find {
                path: Path::from_steps(std::iter::repeat_n(&step, steps)),
                found: false,
                input: Scoped::Keep(0),
            };
            writer.write_op(&op).unwrap();
        }
        writer.finish().unwrap();
        writer.into_inner().unwrap()
    }

    /// The sizes of the batches `read_ahead` sends for `trace`.
    fn batch_sizes(trace: Vec<u8>) -> Vec<usize> {
        let source = open_reader(std::io::Cursor::new(trace)).unwrap();
        let (sender, receiver) = sync_channel(1024);
        let (_recycle, recycled) = sync_channel(1);
        read_ahead(source, &sender, &recycled);
        drop(sender);
        receiver.iter().map(|batch| batch.items.len()).collect()
    }

    #[test]
    fn batches_of_large_paths_end_at_their_byte_budget() {
        // Paths of 1,002,000 bytes (1,000 steps of 1,000 bytes and 2 of length): the fifth
        // operation passes a batch's 4 MiB (the last batch, empty, carries the end).
        assert_eq!(batch_sizes(trace_of_paths(10, 1000, 1000)), vec![5, 5, 0]);
        // Small paths: a batch is 1,024 operations.
        assert_eq!(batch_sizes(trace_of_paths(2500, 3, 10)), vec![1024, 1024, 452]);
    }

    /// A source of no operations that records whether it is read on a helper thread.
    struct ThreadProbe(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);

    impl Iterator for ThreadProbe {
        type Item = Result<Op, TraceError>;
        fn next(&mut self) -> Option<Self::Item> {
            self.0.lock().unwrap().push(larch_core::is_helper_thread());
            None
        }
    }

    impl crate::format::OpSource for ThreadProbe {
        fn format(&self) -> TraceFormat {
            TraceFormat::Larch
        }
        fn metadata(&self) -> &[(String, String)] {
            &[]
        }
        fn truncated_tail(&self) -> Option<u64> {
            None
        }
        fn ops_read(&self) -> u64 {
            0
        }
        fn offset(&self) -> u64 {
            0
        }
    }

    #[test]
    fn the_reading_thread_is_a_helper() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reader = prefetch(Box::new(ThreadProbe(seen.clone()))).unwrap();
        assert!(reader.next().is_none());
        drop(reader);
        // Read once, on a thread that does not preempt the caller when woken (on Linux).
        assert_eq!(*seen.lock().unwrap(), vec![cfg!(target_os = "linux")]);
    }
}
