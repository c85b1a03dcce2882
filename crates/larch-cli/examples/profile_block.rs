//! Profiles one block of a replay: replays a trace (into a temporary pack store, or in memory with
//! `--in-memory`) and, around block `BLOCK`, writes `enable` / `disable` to the `perf record
//! --control fifo:` file named by `LARCH_PERF_CTL`, so that only that block is sampled:
//!
//! ```text
//! mkfifo /tmp/ctl && LARCH_PERF_CTL=/tmp/ctl perf record -D -1 --control fifo:/tmp/ctl -g -- \
//!     target/release/examples/profile_block TRACE 1284 [--in-memory]
//! ```
//!
//! Prints the block's op times. Stops after that block.

use larch_bench::stats::BlockStats;
use larch_bench::{ReplayOptions, RunMeta};
use larch_core::ContextRepo;
use larch_core::MemoryRepo;
use larch_store::{Repo, RepoOptions, SyncPolicy};
use larch_trace::open_trace;
use std::io::Write;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn control(command: &str) {
    if let Ok(path) = std::env::var("LARCH_PERF_CTL")
        && let Ok(mut fifo) = std::fs::OpenOptions::new().write(true).open(path)
    {
        let _ = fifo.write_all(command.as_bytes());
    }
}

fn run<R: ContextRepo>(repo: &mut R, trace: &str, block: u64) -> anyhow::Result<()> {
    let mut source = open_trace(std::path::Path::new(trace))?;
    let options = ReplayOptions { max_blocks: Some(block + 1), ..ReplayOptions::default() };
    let meta = RunMeta::default();
    let mut report = |stats: &BlockStats| {
        if stats.block + 1 == block {
            control("enable\n");
        } else if stats.block == block {
            control("disable\n");
            let table = &stats.op_times;
            let ops: Vec<String> = [("find", table.find), ("add", table.add), ("mem", table.mem)]
                .iter()
                .map(|(kind, time)| format!("{kind} {} {:.1} ms", time.count, time.seconds * 1e3))
                .collect();
            println!(
                "block {} wall {:.1} ms commit {:.1} ms | {}",
                stats.block,
                stats.wall_s * 1e3,
                stats.commit_s * 1e3,
                ops.join(", ")
            );
        }
    };
    larch_bench::replay(repo, &mut source, &options, &meta, None, &mut report)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(trace), Some(block)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: profile_block TRACE BLOCK [--in-memory]");
    };
    let block: u64 = block.parse()?;
    if args.iter().any(|arg| arg == "--in-memory") {
        run(&mut MemoryRepo::new(), trace, block)
    } else {
        let dir = tempfile::tempdir()?;
        let options = RepoOptions { sync: SyncPolicy::Never, create: true, ..RepoOptions::default() };
        let mut repo = Repo::open_with(dir.path(), options)?;
        run(&mut repo, trace, block)?;
        repo.close()?;
        Ok(())
    }
}
