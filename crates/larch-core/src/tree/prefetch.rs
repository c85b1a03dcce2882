//! Hints that start loading memory lines before they are needed, so that lines a loop will touch
//! one after the other arrive together instead of each in turn (docs/benchmarks.md, "Issue 11,
//! fifteenth round").

use super::node::{ContentsRef, Entry, Name, NodeRef};

/// Hints the CPU to load the line holding `at` for reading (nothing on targets without the hint).
#[inline(always)]
pub(crate) fn read(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache: it reads nothing the program sees and never
    // faults, whatever the address. It is `unsafe` only as a `target_feature` function, and its
    // feature (SSE) is part of every x86-64 target. Stable Rust has no safe prefetch.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Hints the CPU to load the line holding `at` for writing (nothing on targets without the hint).
#[inline(always)]
fn write(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `read`; a CPU without the write hint (`PREFETCHW`) treats it as a no-op.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Every line of `items`.
#[inline]
pub(crate) fn slice<T>(items: &[T]) {
    let base = items.as_ptr().cast::<u8>();
    let size = std::mem::size_of_val(items);
    if size == 0 {
        return;
    }
    for at in (0..size).step_by(64).chain([size - 1]) {
        read(base.wrapping_add(at));
    }
}

/// The reference counts a clone of `entries` increments: each name's buffer, each in-memory
/// value's and child's `Arc` (and the child's caches, which a detached copy reads). A clone
/// increments each count with a locked instruction, which waits for its line before the next one
/// can start; hinted together first, the lines of a node's entries arrive together.
#[inline]
pub(crate) fn clone_targets(entries: &[(Name, Entry)]) {
    for (name, entry) in entries {
        write(name.buffer_address());
        match entry {
            Entry::Contents(ContentsRef::Mem(contents)) => arc_counts(std::sync::Arc::as_ptr(contents)),
            Entry::Contents(ContentsRef::Inline(value)) => write(value.buffer_address()),
            Entry::Node(child) => node_ref(child),
            Entry::Contents(ContentsRef::Stored { .. }) => {}
        }
    }
}

/// The children's counts and caches of an inode `Tree`, as [`clone_targets`].
#[inline]
pub(crate) fn children_targets(children: &[(u8, NodeRef)]) {
    for (_, child) in children {
        node_ref(child);
    }
}

#[inline(always)]
fn node_ref(child: &NodeRef) {
    if let NodeRef::Mem(node) = child {
        let data = std::sync::Arc::as_ptr(node).cast::<u8>();
        arc_counts(data);
        // A node's caches (hash, key) lie past the first line of its allocation.
        read(data.wrapping_add(64));
    }
}

/// The line of the counts of the `Arc` whose value is at `data` (the counts precede it).
#[inline(always)]
fn arc_counts<T>(data: *const T) {
    write(data.cast::<u8>().wrapping_sub(2 * std::mem::size_of::<usize>()));
}
