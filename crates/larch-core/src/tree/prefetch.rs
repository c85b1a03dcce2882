//! Hints that start loading memory lines before they are needed, so that the lines a loop will
//! touch one after the other arrive together instead of each in turn (docs/benchmarks.md at c117370, "Issue
//! 11, fifteenth round"). A hint changes no value: on targets without one, these do nothing.

use super::node::{ContentsRef, Entry, Name, Node, NodeBody, NodeRef};

/// A directory of at most this many entries has all its lines hinted before a search (40
/// entries: 50 lines of 64 bytes); a larger one, the probes of its search's first levels.
const SEARCH_ALL_ENTRIES: usize = 40;
/// The levels of a search of a larger directory whose probes are hinted: 15 entries.
const SEARCH_LEVELS: u32 = 4;

/// Hints the CPU to load the line holding `at` (a read hint, `PREFETCHT0`; nothing on targets
/// without it).
#[inline(always)]
fn hint_line<T>(at: *const T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: `_mm_prefetch` only hints the cache: it reads nothing the program sees and never
    // faults, whatever the address. It is `unsafe` only as a `target_feature` function, and its
    // feature (SSE) is enabled here (the `cfg` above). Stable Rust has no safe prefetch.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = at;
}

/// Hints the lines of the first 256 bytes of `value` (four or five lines), for a reader about to
/// touch memory another core wrote: a replay's operations, decoded on the trace reader's thread,
/// cost the replaying thread a transfer between the cores (~130 ns on this machine) at their first
/// byte. A hint changes nothing the program sees.
pub fn hint_memory<T: ?Sized>(value: &T) {
    let size = std::mem::size_of_val(value).min(256);
    hint_range(std::ptr::from_ref(value).cast::<u8>(), size);
}

/// Every line of `items`.
fn hint_lines<T>(items: &[T]) {
    hint_range(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items));
}

/// Every line holding one of the `size` bytes from `base`.
#[inline]
fn hint_range(base: *const u8, size: usize) {
    if size == 0 {
        return;
    }
    // From the line holding the first byte to the one holding the last.
    let first_line = base.wrapping_sub(base.addr() % 64);
    let last = base.wrapping_add(size - 1);
    for at in (0..=last.addr().saturating_sub(first_line.addr())).step_by(64) {
        hint_line(first_line.wrapping_add(at));
    }
}

/// Hints the lines a binary search of `entries` (std's `binary_search_by`) will read, all at
/// once rather than one after the other: a search of a directory just read then waits for memory
/// about once instead of at each probe. A small directory's lines all; a larger one's, the name
/// prefixes of the probes of the search's first [`SEARCH_LEVELS`] levels.
#[inline]
pub(crate) fn search_probes(entries: &[(Name, Entry)]) {
    let n = entries.len();
    if n <= 4 {
        return;
    }
    if n <= SEARCH_ALL_ENTRIES {
        hint_lines(entries);
        return;
    }
    probe_positions(0, n, SEARCH_LEVELS, &mut |position| {
        if let Some((name, _)) = entries.get(position) {
            hint_line(name.prefix_address());
        }
    });
}

/// Calls `visit` with each position std's `binary_search_by` may probe in its first `levels`
/// levels over the `size` items from `base` (no allocation: a search calls it): at a range of more
/// than one item it probes `base + size / 2`, then goes on with `(base, size - size / 2)` or
/// `(base + size / 2, size - size / 2)`; at one item, it probes it last.
pub(crate) fn probe_positions(base: usize, size: usize, levels: u32, visit: &mut impl FnMut(usize)) {
    if levels == 0 || size == 0 {
        return;
    }
    if size == 1 {
        visit(base);
        return;
    }
    let half = size / 2;
    visit(base + half);
    probe_positions(base, size - half, levels - 1, visit);
    probe_positions(base + half, size - half, levels - 1, visit);
}

/// Hints the reference counts a copy of `body` increments (each name's buffer, each in-memory
/// value's and child's `Arc`) and, when the copy `detaches` children
/// ([`Node::detached_copy`]), the children's caches it reads. A copy increments each count with a
/// locked instruction, which waits for its line before any later load can proceed; hinted first,
/// the lines of a node's entries arrive together.
#[inline]
pub(crate) fn copy_targets(body: &NodeBody, detaches: bool) {
    match body {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            for (name, entry) in entries {
                hint_line(name.buffer_address());
                match entry {
                    Entry::Contents(ContentsRef::Mem(contents)) => {
                        arc_counts(std::sync::Arc::as_ptr(contents))
                    }
                    Entry::Contents(ContentsRef::Inline(value)) => hint_line(value.buffer_address()),
                    Entry::Node(child) => child_targets(child, detaches),
                    Entry::Contents(ContentsRef::Stored { .. }) => {}
                }
            }
        }
        NodeBody::Tree(tree) => {
            for (_, child) in &tree.children {
                child_targets(child, detaches);
            }
        }
    }
}

/// Hints the hash and key caches of each in-memory child of `body`, which a store's writer reads
/// child after child to find those it has written: the children's lines then arrive together
/// (docs/benchmarks.md at c117370, "Issue 11, nineteenth round").
pub fn hint_child_caches(body: &NodeBody) {
    body.for_each_child(|child| {
        if let NodeRef::Mem(node) = child {
            let (hash, key) = Node::cache_addresses(node);
            hint_line(hash);
            hint_line(key);
        }
    });
}

/// An in-memory child's count and, if `detaches`, its caches.
#[inline(always)]
fn child_targets(child: &NodeRef, detaches: bool) {
    if let NodeRef::Mem(node) = child {
        arc_counts(std::sync::Arc::as_ptr(node));
        if detaches {
            let (hash, key) = Node::cache_addresses(node);
            hint_line(hash);
            hint_line(key);
        }
    }
}

/// The line of the counts of the `Arc` whose value is at `data`: std's `ArcInner` holds the
/// strong and weak counts, then the value at the next multiple of its alignment.
#[inline(always)]
fn arc_counts<T>(data: *const T) {
    let offset = (2 * std::mem::size_of::<usize>()).next_multiple_of(std::mem::align_of::<T>());
    hint_line(data.cast::<u8>().wrapping_sub(offset));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(n: usize) -> Vec<usize> {
        let mut positions = Vec::new();
        probe_positions(0, n, SEARCH_LEVELS, &mut |position| positions.push(position));
        positions
    }

    #[test]
    fn the_probes_hinted_are_those_of_std_s_binary_search() {
        for n in 5..=300usize {
            let hinted = positions(n);
            let items: Vec<usize> = (0..n).map(|i| 2 * i + 1).collect();
            // Every key, present or absent: the first levels' probes of each search are hinted.
            for key in 0..=2 * n + 1 {
                let mut probes = Vec::new();
                let _ = items.binary_search_by(|probe| {
                    probes.push(probe / 2);
                    probe.cmp(&key)
                });
                for probe in probes.iter().take(SEARCH_LEVELS as usize) {
                    assert!(hinted.contains(probe), "n {n}, key {key}: probe {probe} not in {hinted:?}");
                }
            }
            assert!(hinted.iter().all(|position| *position < n));
        }
        let mut sorted = positions(64);
        sorted.sort_unstable();
        assert_eq!(sorted, [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60]);
    }
}
