//! The larch side: each key is a Tezos context path, each batch one durable `Repo::commit` on top
//! of a checkout of the previous commit; the reads `find` keys in a checkout of the last commit.

use crate::measure::{Latency, RunResult, Usage, dir_size};
use crate::workload::Workload;
use anyhow::{Context, Result, bail};
use larch_core::ContextRepo;
use larch_core::{CommitInfo, Hash, Tree};
use larch_store::{PipelinedRepo, Repo, RepoOptions, SyncPolicy};
use std::path::Path;
use std::time::Instant;

/// How a 32-byte key becomes a context path (its 64 hex digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// `index/<2 hex>/<62 hex>`: 256 directories of ~n/256 entries (each an inode trie past 256).
    Fanout,
    /// `index/<64 hex>`: one directory of n entries, i.e. one large inode trie.
    Flat,
}

impl Shape {
    /// The name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Fanout => "fanout",
            Shape::Flat => "flat",
        }
    }
}

/// Whether each batch starts from a checkout of the previous commit or from the tree in hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TreeMode {
    /// `Repo::checkout` of the previous commit at each batch (as a Tezos node does per block):
    /// memory stays bounded by the cache.
    Checkout,
    /// Keep mutating the committed tree: its loaded and written nodes stay in memory.
    Keep,
    /// `PipelinedRepo`: each batch's commit is encoded, written and synced on a commit thread
    /// while the next batches are added to the committed tree (in memory); a commit is durable
    /// once `--larch-pipeline-depth` commits (itself included) have returned after it, and the
    /// insert time includes waiting for the last one.
    Pipeline,
}

/// Options of the larch run.
#[derive(Clone, Debug)]
pub struct LarchConfig {
    /// Path shape of the keys.
    pub shape: Shape,
    /// When commits sync.
    pub sync: SyncPolicy,
    /// Checkout per batch or keep the tree.
    pub tree_mode: TreeMode,
    /// With [`TreeMode::Pipeline`]: the most commits in flight.
    pub pipeline_depth: usize,
    /// Decoded-object cache budget in bytes.
    pub cache_bytes: u64,
    /// Read the pack through a memory map.
    pub mmap: bool,
}

/// The writer of a run: the repository itself, or wrapped in a commit thread.
enum Writer {
    Plain(Box<Repo>),
    Pipelined(Box<PipelinedRepo>),
}

impl Writer {
    fn empty_tree(&self) -> Tree {
        match self {
            Writer::Plain(repo) => repo.empty_tree(),
            Writer::Pipelined(repo) => ContextRepo::empty_tree(&**repo),
        }
    }

    fn checkout(&mut self, hash: &Hash) -> Result<Tree> {
        Ok(match self {
            Writer::Plain(repo) => repo.checkout(hash)?,
            Writer::Pipelined(repo) => repo.checkout(hash)?,
        })
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash> {
        Ok(match self {
            Writer::Plain(repo) => repo.commit(tree, parents, info)?,
            Writer::Pipelined(repo) => repo.commit(tree, parents, info)?,
        })
    }

    fn wait_durable(&mut self) -> Result<()> {
        match self {
            Writer::Plain(repo) => repo.wait_durable()?,
            Writer::Pipelined(repo) => repo.wait_durable()?,
        }
        Ok(())
    }
}

fn add(tree: &mut Tree, shape: Shape, key: &[u8; 32], value: &[u8; 32]) -> Result<()> {
    let hex = hex::encode(key);
    match shape {
        Shape::Fanout => tree.add(&["index", &hex[..2], &hex[2..]], value.to_vec())?,
        Shape::Flat => tree.add(&["index", hex.as_str()], value.to_vec())?,
    }
    Ok(())
}

fn find(tree: &Tree, shape: Shape, key: &[u8; 32]) -> Result<Option<Vec<u8>>> {
    let hex = hex::encode(key);
    let found = match shape {
        Shape::Fanout => tree.find(&["index", &hex[..2], &hex[2..]])?,
        Shape::Flat => tree.find(&["index", hex.as_str()])?,
    };
    Ok(found.map(|contents| contents.as_bytes().to_vec()))
}

/// Inserts the workload in batches of `batch` keys with a durable commit each, then reads the
/// probes from the last commit; verifies every read.
pub fn run(work: &Workload, batch: usize, dir: &Path, config: &LarchConfig, round: u32) -> Result<RunResult> {
    let base_rss = Usage::now().peak_rss;
    let options = RepoOptions {
        sync: config.sync,
        cache_bytes: config.cache_bytes,
        mmap: config.mmap,
        ..RepoOptions::default()
    };
    let repo = Repo::open_with(dir, options).with_context(|| format!("open {}", dir.display()))?;
    let mut repo = match config.tree_mode {
        TreeMode::Pipeline => {
            Writer::Pipelined(Box::new(PipelinedRepo::with_depth(repo, config.pipeline_depth)?))
        }
        _ => Writer::Plain(Box::new(repo)),
    };
    let mut tree = repo.empty_tree();
    let mut parent: Option<Hash> = None;
    let mut batch_times = Vec::new();
    let mut commit_times = Vec::new();
    let start_usage = Usage::now();
    let start = Instant::now();
    for (number, range) in work.batches(batch).enumerate() {
        let t0 = Instant::now();
        if let (TreeMode::Checkout | TreeMode::Pipeline, Some(parent)) = (config.tree_mode, parent) {
            tree = repo.checkout(&parent)?;
        }
        for i in range {
            add(&mut tree, config.shape, &work.keys[i], &work.values[i])?;
        }
        let t1 = Instant::now();
        let parents: Vec<Hash> = parent.into_iter().collect();
        let hash = repo.commit(&tree, &parents, CommitInfo::tezos(number as i64, "flatkeys"))?;
        let t2 = Instant::now();
        batch_times.push(t2 - t0);
        commit_times.push(t2 - t1);
        parent = Some(hash);
    }
    repo.wait_durable()?;
    let insert_wall = start.elapsed();
    let repo = match repo {
        Writer::Pipelined(pipelined) => pipelined.into_inner()?,
        Writer::Plain(repo) => *repo,
    };
    let insert_usage = Usage::now();
    let write_stats = repo.stats();
    let Some(last) = parent else { bail!("no keys, no commit") };
    let root = repo.commit_details(&last)?.tree_hash;

    let read_start_usage = Usage::now();
    let read_start = Instant::now();
    let tree = repo.checkout(&last)?;
    let mut found = 0;
    for (n, probe) in work.probes.iter().enumerate() {
        let got = find(&tree, config.shape, &probe.key)?;
        if got.as_deref() != probe.expected.as_ref().map(|v| &v[..]) {
            bail!(
                "larch read {n} of key {} returned {:?}, expected {:?}",
                hex::encode(probe.key),
                got.map(hex::encode),
                probe.expected.map(hex::encode)
            );
        }
        found += usize::from(got.is_some());
    }
    let read_wall = read_start.elapsed();
    let read_usage = Usage::now();
    let read_stats = repo.stats();
    drop(tree);
    repo.close()?;
    let (store_bytes, store_apparent_bytes) = dir_size(dir)?;
    let delta = |a: u64, b: u64| b.saturating_sub(a).to_string();
    let counters = vec![
        ("syncs".into(), write_stats.syncs.to_string()),
        ("bytes_written".into(), write_stats.bytes_written.to_string()),
        ("objects_written".into(), write_stats.objects_written.to_string()),
        ("insert_cache_hits".into(), write_stats.cache_hits.to_string()),
        ("insert_cache_misses".into(), write_stats.cache_misses.to_string()),
        ("insert_records_read".into(), write_stats.records_read.to_string()),
        ("insert_bytes_read".into(), write_stats.bytes_read.to_string()),
        ("read_cache_hits".into(), delta(write_stats.cache_hits, read_stats.cache_hits)),
        ("read_cache_misses".into(), delta(write_stats.cache_misses, read_stats.cache_misses)),
        ("read_records_read".into(), delta(write_stats.records_read, read_stats.records_read)),
        ("cache_bytes_end".into(), read_stats.cache_bytes.to_string()),
        ("pack_bytes".into(), read_stats.pack_bytes.to_string()),
    ];
    Ok(RunResult {
        engine: format!("larch/{}", config.shape.name()),
        round,
        keys: work.keys.len(),
        commits: batch_times.len(),
        insert_wall_s: insert_wall.as_secs_f64(),
        insert_cpu_s: (insert_usage.cpu - start_usage.cpu).as_secs_f64(),
        batch: Latency::of(&batch_times),
        commit: Latency::of(&commit_times),
        reads: work.probes.len(),
        reads_found: found,
        read_wall_s: read_wall.as_secs_f64(),
        read_cpu_s: (read_usage.cpu - read_start_usage.cpu).as_secs_f64(),
        store_bytes,
        store_apparent_bytes,
        peak_rss_bytes: Usage::now().peak_rss,
        base_rss_bytes: base_rss,
        root: root.to_string(),
        counters,
    })
}
