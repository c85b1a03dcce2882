//! A structured mutation fuzzer for the decoders (issue 9, point 9; `docs/fuzzing.md`): seeded
//! mutations of a checked-in corpus (bit flips, random bytes, truncations, insertions, deletions,
//! splices between corpus items, duplicated ranges, and *length boosts*: a varint or a fixed-width
//! integer overwritten with a huge value, the classic way to make a decoder allocate from an
//! unchecked length), and an allocator wrapper that records the largest single allocation made
//! by the current thread, so a test can assert that no decoder allocates more than its input
//! justifies.

use crate::TestRng;
use rand::Rng;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Huge values written by length boosts.
const BOOSTS: [u64; 8] = [0x7f, 0x80, 0xffff, 1 << 30, (1 << 31) + 1, u32::MAX as u64, 1 << 62, u64::MAX];

fn leb128(value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    larch_varint::encode(&mut out, value);
    out
}

/// Applies one random mutation to `bytes`; `seeds` provides material for splices.
pub fn mutate_once(rng: &mut TestRng, bytes: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    if bytes.is_empty() {
        bytes.push(rng.random());
        return;
    }
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..10) {
        0 | 1 => bytes[at] ^= 1 << rng.random_range(0..8),
        2 => bytes[at] = rng.random(),
        3 => bytes.truncate(at),
        4 => bytes.insert(at, rng.random()),
        5 => {
            let end = (at + rng.random_range(1..16)).min(bytes.len());
            bytes.drain(at..end);
        }
        6 => {
            // Splice: a piece of another corpus item, inserted or overwriting.
            let Some(other) = seeds.get(rng.random_range(0..seeds.len().max(1))) else { return };
            if other.is_empty() {
                return;
            }
            let from = rng.random_range(0..other.len());
            let len = rng.random_range(1..=(other.len() - from).min(64));
            let piece = &other[from..from + len];
            if rng.random() {
                bytes.splice(at..at, piece.iter().copied());
            } else {
                let end = (at + len).min(bytes.len());
                bytes.splice(at..end, piece.iter().copied());
            }
        }
        7 => {
            // A duplicated range.
            let end = (at + rng.random_range(1..32)).min(bytes.len());
            let piece: Vec<u8> = bytes[at..end].to_vec();
            bytes.splice(at..at, piece);
        }
        8 => {
            // Length boost, varint: a huge LEB128 value over the bytes at `at`.
            let value = BOOSTS[rng.random_range(0..BOOSTS.len())];
            let encoded = leb128(value);
            let end = (at + rng.random_range(1..=2)).min(bytes.len());
            bytes.splice(at..end, encoded);
        }
        _ => {
            // Length boost, fixed width: a little-endian u32 or u64 of a huge value.
            let value = BOOSTS[rng.random_range(0..BOOSTS.len())];
            let width = if rng.random() { 4 } else { 8 };
            let encoded = value.to_le_bytes();
            for (slot, byte) in bytes.iter_mut().skip(at).zip(&encoded[..width]) {
                *slot = *byte;
            }
        }
    }
}

/// A copy of a random item of `seeds` with 1 to 4 mutations.
pub fn mutated(rng: &mut TestRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seeds.get(rng.random_range(0..seeds.len().max(1))).cloned().unwrap_or_default();
    for _ in 0..rng.random_range(1..=4) {
        mutate_once(rng, &mut bytes, seeds);
    }
    bytes
}

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest allocation of each thread. Install it in a test
/// binary with `#[global_allocator] static ALLOC: PeakAlloc = PeakAlloc;`.
pub struct PeakAlloc;

fn record(size: usize) {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the bookkeeping only touches a const-initialised thread-local `Cell` (no allocation, no panic).
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: as for `dealloc`, and `new_size` is the caller's, passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation it made on this thread (in
/// bytes; meaningful only where [`PeakAlloc`] is the global allocator).
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = LARGEST.with(|largest| largest.replace(0));
    let result = f();
    let peak = LARGEST.with(|largest| largest.replace(before.max(largest.get())));
    (result, peak)
}

/// What a fuzz run saw, for its report line.
#[derive(Clone, Copy, Debug, Default)]
pub struct FuzzTally {
    /// Inputs tried.
    pub inputs: u64,
    /// Inputs that decoded.
    pub accepted: u64,
    /// Inputs refused with an error.
    pub rejected: u64,
    /// Largest allocation seen for one input.
    pub largest_allocation: usize,
}
