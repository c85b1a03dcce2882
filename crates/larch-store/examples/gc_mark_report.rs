//! The mark phase of garbage collection on a real store (docs/gc-design.md §4, "Measured"): opens
//! a store read-only, takes a commit of the first-parent chain of `main`, and reports what a GC
//! keeping it would find live below the region end (the commit's offset rounded down to 16 MiB,
//! the chunk size of the design), with the time and the peak heap of the mark.
//!
//! ```text
//! cargo run --release -p larch-store --example gc_mark_report -- STORE (--block B | --behind N) [--exact] [--keep M] [--dump FILE]
//! ```
//!
//! `--block B`: the B-th commit of the chain (genesis = 0); `--behind N`: N commits behind the head.
//! `--exact`: the region ends at the commit's own offset instead (with the floor: the smallest store
//! a GC keeping the commit can leave). `--keep M`: the roots end at the commit M blocks after it (the store as it was when a GC every
//! so often keeping M blocks would have started); without it, at the head. `--dump FILE`: write the
//! live offsets (little-endian `u64`s).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: failing loudly is right

use larch_store::Repo;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are only
// statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = IN_USE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: f64 = (1u64 << 20) as f64;
const CHUNK: u64 = 16 << 20;

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store = args.first().expect("usage: gc_mark_report STORE (--block B | --behind N) [--keep M]");
    let value = |flag: &str| -> Option<usize> {
        args.iter().position(|arg| arg == flag).map(|i| args[i + 1].parse().expect("a number"))
    };
    let repo = Repo::open_read_only(std::path::Path::new(store)).unwrap();
    let head = repo.head().expect("a `main` branch");
    // The first-parent chain, from the head back to the root.
    let mut chain = vec![head];
    while let Some(parent) = repo.commit_details(chain.last().unwrap()).unwrap().parents.first().copied() {
        chain.push(parent);
    }
    chain.reverse();
    let index = match (value("--block"), value("--behind")) {
        (Some(block), _) => block,
        (None, Some(behind)) => chain.len() - 1 - behind,
        _ => panic!("give --block B or --behind N"),
    };
    let commit = chain[index];
    let until = value("--keep").map(|keep| chain[(index + keep).min(chain.len() - 1)]);
    let offsets: std::collections::HashMap<_, _> = repo.commit_offsets().map(|(h, o)| (*h, *o)).collect();
    let keep_from = offsets[&commit];
    // `--exact`: the region ends at the commit itself, so the live bytes are everything a GC could
    // keep below it (with the window, the floor of the store's size under the GC rule).
    let exact = args.iter().any(|arg| arg == "--exact");
    let region_end = if exact { keep_from } else { (keep_from / CHUNK * CHUNK).max(16) };
    let pack_end = repo.stats().pack_bytes;
    let hwm_before = vm_hwm_kib();
    let heap_before = IN_USE.load(Ordering::Relaxed);
    PEAK.store(heap_before, Ordering::Relaxed);
    let start = Instant::now();
    let mark = repo.gc_mark(&commit, region_end, until.as_ref()).unwrap();
    let elapsed = start.elapsed();
    if let Some(i) = args.iter().position(|arg| arg == "--dump") {
        // The live offsets as little-endian u64s (to measure other set representations).
        let bytes: Vec<u8> = mark.live.iter().flat_map(|(offset, _)| offset.to_le_bytes()).collect();
        std::fs::write(&args[i + 1], bytes).unwrap();
    }
    let peak_heap = PEAK.load(Ordering::Relaxed) - heap_before;
    let region = region_end - 16;
    println!(
        "store {store}: pack {:.1} MiB, {} commits on the first-parent chain",
        pack_end as f64 / MIB,
        chain.len()
    );
    println!(
        "GC commit: block {index} at offset {keep_from} ({:.1} MiB); region end {region_end} ({:.0} MiB); roots until {}",
        keep_from as f64 / MIB,
        region_end as f64 / MIB,
        match until {
            Some(until) => format!(
                "block {} (offset {:.1} MiB)",
                (index + value("--keep").unwrap_or(0)).min(chain.len() - 1),
                offsets[&until] as f64 / MIB
            ),
            None => "the head".to_string(),
        }
    );
    println!(
        "live: {} records, {:.2} MiB = {:.1}% of the region's {:.1} MiB; base-only {} records, {:.3} MiB",
        mark.live.len(),
        mark.live_bytes as f64 / MIB,
        100.0 * mark.live_bytes as f64 / region.max(1) as f64,
        region as f64 / MIB,
        mark.base_only.len(),
        mark.base_only_bytes as f64 / MIB
    );
    // Live bytes per 16 MiB chunk of the region: what a GC copying only newly old chunks copies.
    let mut per_chunk = vec![0u64; usize::try_from(region_end.div_ceil(CHUNK)).unwrap()];
    for (offset, len) in &mark.live {
        per_chunk[usize::try_from(offset / CHUNK).unwrap()] += u64::from(*len);
    }
    let percents: Vec<String> =
        per_chunk.iter().map(|live| format!("{:.0}", 100.0 * *live as f64 / CHUNK as f64)).collect();
    println!("live % per 16 MiB chunk: {}", percents.join(" "));
    // The smallest store a GC keeping this commit can leave: the live records below the region, the
    // region end to the pack end, and the other files (commit index, control).
    let other_files: u64 = std::fs::read_dir(store)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            !name.starts_with("chunk.") && !name.starts_with("seg.") && name != "pack"
        })
        .filter_map(|entry| entry.metadata().ok().map(|meta| meta.len()))
        .sum();
    let floor = mark.live_bytes + (pack_end - region_end) + other_files;
    println!(
        "floor: {:.2} MiB = live below the region {:.2} MiB + region end to pack end {:.2} MiB + other files {:.2} MiB",
        floor as f64 / MIB,
        mark.live_bytes as f64 / MIB,
        (pack_end - region_end) as f64 / MIB,
        other_files as f64 / MIB
    );
    println!(
        "window: {} records, {:.1} MiB; roots {}; boundary records traversed {}; patches decoded {}",
        mark.window_records,
        mark.window_bytes as f64 / MIB,
        mark.roots,
        mark.boundary_records,
        mark.patches_decoded
    );
    println!(
        "read: {:.1} MiB ({} records besides the window); max pending {}",
        mark.bytes_read as f64 / MIB,
        mark.records_read,
        mark.max_pending
    );
    println!(
        "time: {:.2} s (scan {:.2} s, traverse {:.2} s); peak heap of the mark {:.1} MiB (live set {:.1} MiB); \
         process VmHWM {:.0} MiB before, {:.0} MiB after",
        elapsed.as_secs_f64(),
        mark.scan_time.as_secs_f64(),
        mark.traverse_time.as_secs_f64(),
        peak_heap as f64 / MIB,
        mark.heap_bytes() as f64 / MIB,
        hwm_before as f64 / 1024.0,
        vm_hwm_kib() as f64 / 1024.0
    );
}
