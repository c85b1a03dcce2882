//! The frontier of [`fsck`](super::fsck)'s sweep: the records reached from a record above them
//! and not checked yet. It lives in memory up to a bound ([`crate::FsckOptions::max_pending`]);
//! past it, its lower half (the records the sweep reaches last) goes to a temporary file as a
//! sorted run, read back in order as the sweep comes down to it (an external priority queue).
//! So the check's memory is bounded by its options, not by the store.

use larch_core::Hash;

const HASH_LEN: usize = 32;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A record reached from a record above it (or from a commit) and not checked yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reached {
    /// The hash the reference names.
    pub hash: Hash,
    /// The offset of the record that refers to it.
    pub parent: u64,
    /// The deepest directory nesting it was reached at (the root is depth 1).
    pub depth: u32,
    /// The kind of object expected: 0 contents, 1 a directory, 2 + d an inode of depth d.
    pub role: u8,
    /// Whether its children are followed: false for a patch base below the oldest kept commit
    /// of a collected store, checked as a base only (its children may have been collected).
    pub full: bool,
}

/// Bytes of one spilled entry: offset, hash, parent, depth, role, full.
const SPILLED_LEN: usize = 8 + HASH_LEN + 8 + 4 + 1 + 1;

/// Bytes of a run read at a time.
const RUN_BUFFER: usize = 64 << 10;

fn encode(out: &mut Vec<u8>, offset: u64, reached: &Reached) {
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(reached.hash.as_bytes());
    out.extend_from_slice(&reached.parent.to_le_bytes());
    out.extend_from_slice(&reached.depth.to_le_bytes());
    out.push(reached.role);
    out.push(u8::from(reached.full));
}

fn decode(bytes: &[u8]) -> Option<(u64, Reached)> {
    let u64_at = |at: usize| bytes.get(at..at + 8)?.try_into().ok().map(u64::from_le_bytes);
    let offset = u64_at(0)?;
    let hash = Hash(bytes.get(8..8 + HASH_LEN)?.try_into().ok()?);
    let parent = u64_at(8 + HASH_LEN)?;
    let rest = bytes.get(16 + HASH_LEN..SPILLED_LEN)?;
    let depth = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
    let role = *rest.get(4)?;
    let full = *rest.get(5)? != 0;
    Some((offset, Reached { hash, parent, depth, role, full }))
}

/// One sorted run in the spill file, highest offset first, read `RUN_BUFFER` bytes at a time.
struct Run {
    /// The next unread byte of the run in the file, and its end.
    at: u64,
    end: u64,
    buffer: Vec<u8>,
    used: usize,
    head: Option<(u64, Reached)>,
}

impl Run {
    /// Moves `head` to the next entry of the run.
    fn advance(&mut self, file: &File) -> io::Result<()> {
        if self.used + SPILLED_LEN > self.buffer.len() {
            let take = (self.end - self.at).min(RUN_BUFFER as u64) as usize;
            if take < SPILLED_LEN {
                self.head = None;
                return Ok(());
            }
            self.buffer.resize(take - take % SPILLED_LEN, 0);
            file.read_exact_at(&mut self.buffer, self.at)?;
            self.at += self.buffer.len() as u64;
            self.used = 0;
        }
        let bytes = self.buffer.get(self.used..self.used + SPILLED_LEN).unwrap_or_default();
        self.head = Some(decode(bytes).ok_or_else(|| io::Error::other("a spilled entry does not decode"))?);
        self.used += SPILLED_LEN;
        Ok(())
    }
}

/// The records reached and not checked yet, highest offset first.
pub(crate) struct Frontier {
    memory: BTreeMap<u64, Reached>,
    max_memory: usize,
    spill_dir: PathBuf,
    /// The spill file (created at the first spill, deleted when closed) and its length.
    file: Option<(File, u64)>,
    runs: Vec<Run>,
    /// Entries waiting in runs.
    spilled: u64,
    /// The most entries waiting at one time, in memory and spilled.
    pub peak: u64,
    /// The most entries in memory at one time.
    pub peak_memory: u64,
    /// Entries written to the spill file so far.
    pub spilled_total: u64,
}

impl Frontier {
    /// An empty frontier keeping at most `max_memory` entries in memory (at least 2), spilling
    /// the rest into a file of `spill_dir`.
    pub fn new(max_memory: usize, spill_dir: PathBuf) -> Frontier {
        Frontier {
            memory: BTreeMap::new(),
            max_memory: max_memory.max(2),
            spill_dir,
            file: None,
            runs: Vec::new(),
            spilled: 0,
            peak: 0,
            peak_memory: 0,
            spilled_total: 0,
        }
    }

    /// The entry in memory for `offset`, to meet another reference to it. A reference to a
    /// spilled record is added as an entry of its own: they meet when the sweep reaches it.
    pub fn get_mut(&mut self, offset: u64) -> Option<&mut Reached> {
        self.memory.get_mut(&offset)
    }

    /// Adds a record reached (not in memory yet), spilling half the memory when it is full.
    pub fn push(&mut self, offset: u64, reached: Reached) -> io::Result<()> {
        self.memory.insert(offset, reached);
        let waiting = self.memory.len() as u64 + self.spilled;
        self.peak = self.peak.max(waiting);
        self.peak_memory = self.peak_memory.max(self.memory.len() as u64);
        if self.memory.len() > self.max_memory {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the lower half of the memory (the entries the sweep reaches last) as a run.
    fn spill(&mut self) -> io::Result<()> {
        let Some(middle) = self.memory.keys().nth(self.memory.len() / 2).copied() else { return Ok(()) };
        let high = self.memory.split_off(&middle);
        let low = std::mem::replace(&mut self.memory, high);
        if self.file.is_none() {
            self.file = Some((tempfile::tempfile_in(&self.spill_dir)?, 0));
        }
        let Some((file, len)) = self.file.as_mut() else { return Ok(()) };
        let start = *len;
        let mut bytes = Vec::with_capacity(RUN_BUFFER + SPILLED_LEN);
        let mut writer = std::io::BufWriter::with_capacity(RUN_BUFFER, &*file);
        for (offset, reached) in low.iter().rev() {
            bytes.clear();
            encode(&mut bytes, *offset, reached);
            writer.write_all(&bytes)?;
        }
        writer.flush()?;
        drop(writer);
        let count = low.len() as u64;
        *len += count * SPILLED_LEN as u64;
        self.spilled += count;
        self.spilled_total += count;
        let mut run = Run { at: start, end: *len, buffer: Vec::new(), used: 0, head: None };
        run.advance(file)?;
        self.runs.push(run);
        Ok(())
    }

    /// The highest offset waiting, if any.
    pub fn next_offset(&self) -> Option<u64> {
        let memory = self.memory.last_key_value().map(|(offset, _)| *offset);
        let spilled = self.runs.iter().filter_map(|run| run.head.map(|(offset, _)| offset)).max();
        memory.max(spilled)
    }

    /// Takes every entry of the highest offset waiting: the first reference to it (in memory if
    /// there is one), then the others, spilled apart.
    pub fn pop(&mut self) -> io::Result<Option<(u64, Reached, Vec<Reached>)>> {
        let Some(offset) = self.next_offset() else { return Ok(None) };
        let mut found: Vec<Reached> = Vec::new();
        if let Some(entry) = self.memory.last_entry().filter(|entry| *entry.key() == offset) {
            found.push(entry.remove());
        }
        for run in &mut self.runs {
            while let Some((at, reached)) = run.head.filter(|(at, _)| *at == offset) {
                debug_assert_eq!(at, offset);
                found.push(reached);
                self.spilled -= 1;
                match &self.file {
                    Some((file, _)) => run.advance(file)?,
                    None => run.head = None,
                }
            }
        }
        self.runs.retain(|run| run.head.is_some());
        if self.runs.is_empty() && self.spilled == 0 {
            // Every run read: the file's space is given back.
            self.file = None;
        }
        let mut found = found.into_iter();
        Ok(found.next().map(|first| (offset, first, found.collect())))
    }
}

#[cfg(test)]
mod tests {
    use super::{Frontier, Reached};
    use larch_core::Hash;

    fn reached(offset: u64) -> Reached {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&offset.to_le_bytes());
        Reached { hash: Hash(bytes), parent: offset + 1, depth: 3, role: 1, full: offset.is_multiple_of(2) }
    }

    #[test]
    fn entries_come_back_highest_first_through_spills() {
        let dir = tempfile::tempdir().unwrap();
        let mut frontier = Frontier::new(4, dir.path().to_path_buf());
        // Offsets pushed out of order, some twice (a second reference spilled apart).
        let offsets = [50u64, 10, 90, 30, 70, 20, 80, 60, 40, 30, 10, 100];
        let mut pushed = 0;
        for offset in offsets {
            match frontier.get_mut(offset) {
                Some(seen) => assert_eq!(*seen, reached(offset)),
                None => {
                    frontier.push(offset, reached(offset)).unwrap();
                    pushed += 1;
                }
            }
        }
        assert!(frontier.spilled_total > 0, "a frontier of 4 in memory spilled");
        assert!(frontier.peak_memory <= 5);
        let mut popped = Vec::new();
        while let Some((offset, first, others)) = frontier.pop().unwrap() {
            assert_eq!(first, reached(offset));
            assert!(others.iter().all(|other| *other == reached(offset)));
            popped.push((offset, others.len()));
        }
        let offsets: Vec<u64> = popped.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(offsets, [100, 90, 80, 70, 60, 50, 40, 30, 20, 10]);
        // Every entry pushed came back once (30 and 10 twice when their first entry was spilled).
        assert_eq!(popped.iter().map(|(_, others)| 1 + others).sum::<usize>(), pushed);
        assert!(pushed > 10, "a second reference to a spilled record is an entry of its own");
    }
}
