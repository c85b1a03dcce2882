//! The index (a store opened on a directory) and what goes through it: contexts from it,
//! `exists`, `checkout`, `commit`, `gc`, `sync`, `export_snapshot`.

use crate::tree::OTree;
use crate::version::Version;
use crate::{Bytes, Outcome, blocking, guard, hash_arg};
use larch_core::{CommitInfo, Hash, Tree};
use larch_store::{Repo, RepoOptions, SyncPolicy};
use ocaml::Pointer;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// The shared state of an index: the store, `None` once closed.
pub struct IndexInner {
    repo: Mutex<Option<Repo>>,
    /// The store's directory.
    pub path: PathBuf,
}

impl IndexInner {
    /// The store, locked; an error once the index is closed.
    pub fn repo(&self) -> Outcome<MutexGuard<'_, Option<Repo>>> {
        let guard = self.repo.lock().map_err(|_| "larch: the index's lock is poisoned".to_string())?;
        if guard.is_none() {
            return Err(format!("larch: the index of {} is closed", self.path.display()));
        }
        Ok(guard)
    }

    /// Runs `f` on the open store.
    pub fn with_repo<T>(&self, f: impl FnOnce(&mut Repo) -> Outcome<T>) -> Outcome<T> {
        let mut guard = self.repo()?;
        match guard.as_mut() {
            Some(repo) => f(repo),
            None => Err(format!("larch: the index of {} is closed", self.path.display())),
        }
    }
}

/// An index: OCaml's `index`, a custom block holding a reference to the shared state (contexts
/// hold one too).
pub struct Index(pub Arc<IndexInner>);

impl ocaml::Custom for Index {
    ocaml::custom! { name: "larch.index" }
}

/// A context: a tree and the commits it descends from, in an index. Immutable: every change
/// returns a new context (as Octez's contexts are values); the tree moves into it, and the input
/// keeps what rebuilds its own tree if it is used again ([`Version`]). A change asked to consume
/// its input gives it up (the input then refuses every use).
pub struct Context {
    /// The index it belongs to.
    pub index: Arc<IndexInner>,
    /// Its tree.
    version: Arc<Version>,
    /// The parents its commit will have: the commit it was checked out from, if any.
    pub parents: Arc<[Hash]>,
}

impl Context {
    /// A context of `index` holding `tree`.
    pub fn new(index: Arc<IndexInner>, tree: Tree, parents: Arc<[Hash]>) -> Context {
        Context { index, version: Version::new(tree), parents }
    }

    /// A context of the same index and parents holding `tree`.
    pub fn with_tree(&self, tree: Tree) -> Context {
        Context::new(self.index.clone(), tree, self.parents.clone())
    }

    /// `f` of its tree.
    pub fn read<R>(&self, f: impl FnOnce(&Tree) -> Outcome<R>) -> Outcome<R> {
        self.version.read(f)
    }

    /// Its tree (an O(1) clone).
    pub fn tree(&self) -> Outcome<Tree> {
        self.read(|tree| Ok(tree.clone()))
    }

    /// The context of the same index and parents whose tree is this one's changed by `change`
    /// at `path` (`None` if `change` returns that it changed nothing), `consume` as for `add`.
    pub fn change(
        &self,
        consume: bool,
        path: &[&[u8]],
        change: impl FnOnce(&mut Tree) -> Outcome<bool>,
    ) -> Outcome<Option<Context>> {
        let next = self.version.change(consume, path, change)?;
        Ok(next.map(|version| Context { index: self.index.clone(), version, parents: self.parents.clone() }))
    }
}

impl ocaml::Custom for Context {
    ocaml::custom! { name: "larch.context" }
    // A context may hold a large modified tree: let the collector hurry after many of them.
    const USED: usize = 1;
    const MAX: usize = 10_000;
}

fn store_error(what: &str, err: impl std::fmt::Display) -> String {
    format!("larch: {what}: {err}")
}

/// Opens the store at `path` (created when absent, unless `readonly`), with `sync` one of
/// `commit`, `pipelined`, `every N`, `never` (writers only; `""` is the default, `commit`).
#[ocaml::func]
#[ocaml::sig("string -> bool -> string -> (index, string) result")]
pub fn larch_index_open(path: &[u8], readonly: bool, sync: &[u8]) -> Outcome<Pointer<Index>> {
    let path = PathBuf::from(OsStr::from_bytes(path));
    let sync = String::from_utf8_lossy(sync).into_owned();
    crate::tune_allocator();
    let opened = blocking(gc, move || {
        let repo = if readonly {
            let options = RepoOptions { create: false, ..RepoOptions::default() };
            Repo::open_read_only_options(&path, options)
        } else {
            let sync = if sync.is_empty() {
                SyncPolicy::Commit
            } else {
                sync.parse::<SyncPolicy>().map_err(|err| store_error("opening an index", err))?
            };
            Repo::open_with(&path, RepoOptions { sync, ..RepoOptions::default() })
        };
        let repo = repo.map_err(|err| store_error(&format!("opening {}", path.display()), err))?;
        Ok(IndexInner { repo: Mutex::new(Some(repo)), path })
    })?;
    Ok(Index(Arc::new(opened)).into())
}

/// Closes the index: publishes and syncs what a writer staged, releases its lock. Contexts and
/// trees from it stay valid values; operations needing the store then fail.
#[ocaml::func]
#[ocaml::sig("index -> (unit, string) result")]
pub fn larch_index_close(index: &Index) -> Outcome<()> {
    let inner = index.0.clone();
    blocking(gc, move || {
        let repo = inner.repo.lock().map_err(|_| "larch: the index's lock is poisoned".to_string())?.take();
        match repo {
            Some(repo) => repo.close().map_err(|err| store_error("closing the index", err)),
            None => Ok(()),
        }
    })
}

/// The index of a context.
#[ocaml::func]
#[ocaml::sig("context -> index")]
pub fn larch_context_index(ctx: &Context) -> Pointer<Index> {
    Index(ctx.index.clone()).into()
}

/// A new empty context of the index (no parent).
#[ocaml::func]
#[ocaml::sig("index -> (context, string) result")]
pub fn larch_context_init(index: &Index) -> Outcome<Pointer<Context>> {
    let tree = guard(|| index.0.with_repo(|repo| Ok(repo.empty_tree())))?;
    Ok(Context::new(index.0.clone(), tree, Arc::from(Vec::new())).into())
}

/// Whether the store holds commit `hash`.
#[ocaml::func]
#[ocaml::sig("index -> string -> (bool, string) result")]
pub fn larch_exists(index: &Index, hash: &[u8]) -> Outcome<bool> {
    guard(|| {
        let hash = hash_arg(hash)?;
        index.0.with_repo(|repo| Ok(repo.contains(&hash)))
    })
}

/// The context of commit `hash`, `None` if the store does not hold it.
#[ocaml::func]
#[ocaml::sig("index -> string -> (context option, string) result")]
pub fn larch_checkout(index: &Index, hash: &[u8]) -> Outcome<Option<Pointer<Context>>> {
    let found = guard(|| {
        let hash = hash_arg(hash)?;
        index.0.with_repo(|repo| {
            if !repo.contains(&hash) {
                return Ok(None);
            }
            let tree = repo.checkout(&hash).map_err(|err| store_error(&format!("checkout {hash}"), err))?;
            Ok(Some((tree, hash)))
        })
    })?;
    Ok(found.map(|(tree, hash)| Context::new(index.0.clone(), tree, Arc::from(vec![hash])).into()))
}

/// The head of the store (branch `main`), if any.
#[ocaml::func]
#[ocaml::sig("index -> (string option, string) result")]
pub fn larch_head(index: &Index) -> Outcome<Option<Bytes>> {
    guard(|| index.0.with_repo(|repo| Ok(repo.head().map(|hash| Bytes(hash.0.to_vec())))))
}

/// The commit info of Octez's `commit ~time ?message` (author `"Tezos"` unless given).
fn info(time: i64, author: &[u8], message: &[u8]) -> CommitInfo {
    CommitInfo {
        date: time,
        author: String::from_utf8_lossy(author).into_owned(),
        message: String::from_utf8_lossy(message).into_owned(),
    }
}

/// The parents of a commit: `parents` when given (raw 32-byte hashes), else the context's.
fn parents_of(ctx: &Context, parents: Option<Vec<&[u8]>>) -> Outcome<Vec<Hash>> {
    match parents {
        Some(list) => list.into_iter().map(hash_arg).collect(),
        None => Ok(ctx.parents.to_vec()),
    }
}

/// The hash `commit` would give, without writing anything.
#[ocaml::func]
#[ocaml::sig("context -> int64 -> string -> string -> string list option -> (bytes, string) result")]
pub fn larch_hash(
    ctx: &Context,
    time: i64,
    author: &[u8],
    message: &[u8],
    parents: Option<crate::PathArg>,
) -> Outcome<Bytes> {
    guard(|| {
        let parents = parents_of(ctx, parents.map(|list| list.0))?;
        let info = info(time, author, message);
        let tree = ctx.tree()?.hash();
        Ok(Bytes(larch_core::schema::commit_hash(&tree, &parents, &info).0.to_vec()))
    })
}

/// Commits the context's tree (parents: the context's, or `parents` when given); moves the
/// branch `main`; returns the commit hash. Releases the runtime lock while it hashes and writes.
#[ocaml::func]
#[ocaml::sig("context -> int64 -> string -> string -> string list option -> (bytes, string) result")]
pub fn larch_commit(
    ctx: &Context,
    time: i64,
    author: &[u8],
    message: &[u8],
    parents: Option<crate::PathArg>,
) -> Outcome<Bytes> {
    let parents = guard(|| parents_of(ctx, parents.map(|list| list.0)))?;
    let info = info(time, author, message);
    let tree = ctx.tree()?;
    let index = ctx.index.clone();
    blocking(gc, move || {
        let hash = index
            .with_repo(|repo| repo.commit(&tree, &parents, info).map_err(|err| store_error("commit", err)))?;
        Ok(Bytes(hash.0.to_vec()))
    })
}

/// Collects garbage: keeps commit `hash` and the commits after it (`Repo::gc`). Releases the
/// runtime lock until the GC has switched.
#[ocaml::func]
#[ocaml::sig("index -> string -> (unit, string) result")]
pub fn larch_gc(index: &Index, hash: &[u8]) -> Outcome<()> {
    let hash = hash_arg(hash)?;
    let inner = index.0.clone();
    blocking(gc, move || {
        inner.with_repo(|repo| {
            repo.gc(&hash).map(drop).map_err(|err| store_error(&format!("gc to {hash}"), err))
        })
    })
}

/// Makes every commit durable and visible to readers (`Repo::flush`); a reader re-reads the
/// store's state (`Repo::reload`).
#[ocaml::func]
#[ocaml::sig("index -> (unit, string) result")]
pub fn larch_sync(index: &Index) -> Outcome<()> {
    let inner = index.0.clone();
    blocking(gc, move || {
        inner.with_repo(|repo| {
            if repo.is_writable() {
                repo.flush().map_err(|err| store_error("sync", err))
            } else {
                repo.reload().map(drop).map_err(|err| store_error("reload", err))
            }
        })
    })
}

/// Exports commit `hash` as a snapshot file at `path` (docs/snapshot-format.md). Releases the
/// runtime lock meanwhile.
#[ocaml::func]
#[ocaml::sig("index -> string -> string -> (unit, string) result")]
pub fn larch_export_snapshot(index: &Index, hash: &[u8], path: &[u8]) -> Outcome<()> {
    let hash = hash_arg(hash)?;
    let path = PathBuf::from(OsStr::from_bytes(path));
    let inner = index.0.clone();
    blocking(gc, move || {
        inner.with_repo(|repo| {
            let file = std::fs::File::create(&path)
                .map_err(|err| store_error(&format!("creating {}", path.display()), err))?;
            let out = std::io::BufWriter::with_capacity(1 << 20, file);
            let options = larch_snapshot::ExportOptions::default();
            larch_snapshot::export(repo, Some(hash), out, options, &mut |_| {})
                .map(drop)
                .map_err(|err| store_error(&format!("exporting {hash} to {}", path.display()), err))
        })
    })
}

/// The tree of a context.
#[ocaml::func]
#[ocaml::sig("context -> (tree, string) result")]
pub fn larch_get_tree(ctx: &Context) -> Outcome<Pointer<OTree>> {
    Ok(OTree(ctx.tree()?).into())
}

/// The context with its tree replaced by `tree` (Octez's `add_tree ctx [] tree`).
#[ocaml::func]
#[ocaml::sig("context -> tree -> context")]
pub fn larch_set_tree(ctx: &Context, tree: &OTree) -> Pointer<Context> {
    ctx.with_tree(tree.0.clone()).into()
}
