//! Recursion that input controls, made safe: a tree's depth is chosen by its user (a path of
//! 100,000 steps is legal in Irmin) or by the bytes of a store, so every walk that recurses once
//! per level calls [`guarded`], which continues the recursion on a fresh heap-allocated stack
//! segment when the current one runs low (the `stacker` crate). A deep walk then costs memory in
//! proportion to its depth, as the tree itself does, and never overflows the thread's stack.

/// Stack left (bytes) below which a guarded call moves to a new segment: room for the deepest
/// frames a level of recursion uses between two guarded calls (hashing, encoding a record).
const RED_ZONE: usize = 256 * 1024;

/// Size of each new stack segment.
const SEGMENT: usize = 4 * 1024 * 1024;

/// Runs `f`, on a new stack segment if less than `RED_ZONE` bytes of stack are left. Costs a
/// thread-local read and a comparison when there is room.
#[inline]
pub fn guarded<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}
