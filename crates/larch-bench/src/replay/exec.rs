//! Execution of one operation against the context table and the repository.

use super::{OpLocation, ReplayError, Replayer, display_path};
use larch_core::ContextRepo;
use larch_core::{CommitInfo, Hash, Tree};
use larch_trace::op::{ContextId, Op, OpKind, Path, Scoped};

/// Describes an operation for error messages: its kind and path.
fn describe(kind: OpKind, path: &Path) -> String {
    format!("{} {}", kind.name(), display_path(path))
}

impl<R: ContextRepo> Replayer<'_, R> {
    /// The tree of context `id`, dropped from the table when tagged `Forget`.
    fn take_context(
        &mut self,
        id: Scoped<ContextId>,
        at: impl FnOnce() -> Box<OpLocation>,
    ) -> Result<Tree, ReplayError> {
        let key = id.value();
        let tree = if id.is_forget() { self.contexts.remove(&key) } else { self.contexts.get(&key).cloned() };
        tree.ok_or_else(|| ReplayError::UndefinedContext { at: at(), id: key })
    }

    /// Binds `tree` to the output context, unless the trace never reads it again.
    fn bind_context(&mut self, id: Scoped<ContextId>, tree: Tree) {
        if !id.is_forget() {
            self.contexts.insert(id.value(), tree);
        }
    }

    /// The real hash of recorded commit `hash`, dropped from the table when tagged `Forget`. With
    /// [`super::ReplayOptions::store_commits`], a hash the trace has not committed is the
    /// repository's commit of that hash: checked out once to prove the repository holds it (so
    /// that no commit gets a missing parent), then kept in the table like the trace's own.
    fn map_commit(
        &mut self,
        hash: Scoped<Hash>,
        at: impl FnOnce() -> Box<OpLocation>,
    ) -> Result<Hash, ReplayError> {
        let key = hash.value();
        let real = if hash.is_forget() { self.commits.remove(&key) } else { self.commits.get(&key).copied() };
        match real {
            Some(real) => Ok(real),
            None if self.options.store_commits => {
                let commit_at = self.last_expected_commit;
                self.repo.checkout(&key).map_err(|source| {
                    super::store_error::<R>(commit_at, source, |source| ReplayError::NotInStore {
                        at: at(),
                        hash: key,
                        source,
                    })
                })?;
                if !hash.is_forget() {
                    self.commits.insert(key, key);
                }
                Ok(key)
            }
            None => Err(ReplayError::UnknownCommit { at: at(), hash: key }),
        }
    }

    fn check_read(
        &mut self,
        expected: bool,
        actual: bool,
        at: impl FnOnce() -> Box<OpLocation>,
    ) -> Result<(), ReplayError> {
        if !self.options.check_hashes {
            return Ok(());
        }
        self.reads_checked += 1;
        self.meter.reads_checked += 1;
        if expected == actual {
            Ok(())
        } else {
            Err(ReplayError::ReadMismatch { at: at(), expected, actual })
        }
    }

    /// Executes `op`; returns the real commit hash when `op` is a commit. Error locations are
    /// only formatted when an error occurs.
    pub(super) fn exec(&mut self, op: Op) -> Result<Option<Hash>, ReplayError> {
        let kind = op.kind();
        let (block, op_index) = (self.blocks, self.op_index);
        let location = move |description: String| Box::new(OpLocation { block, op_index, kind, description });
        match op {
            Op::Checkout { commit, out } => {
                let at = || location(format!("checkout {}", commit.value()));
                let real = self.map_commit(commit, at)?;
                let commit_at = self.last_expected_commit;
                let tree = self.repo.checkout(&real).map_err(|source| {
                    super::store_error::<R>(commit_at, source, |source| ReplayError::Store {
                        at: at(),
                        source,
                    })
                })?;
                self.bind_context(out, tree);
                Ok(None)
            }
            Op::Add { path, value, input, out } => {
                let at = || location(describe(kind, &path));
                let mut tree = self.take_context(input, at)?;
                tree.add(&path.steps(), value)
                    .map_err(|source| ReplayError::Tree { at: at(), source: Box::new(source) })?;
                self.bind_context(out, tree);
                Ok(None)
            }
            Op::Remove { path, input, out } => {
                let at = || location(describe(kind, &path));
                let mut tree = self.take_context(input, at)?;
                tree.remove(&path.steps())
                    .map_err(|source| ReplayError::Tree { at: at(), source: Box::new(source) })?;
                self.bind_context(out, tree);
                Ok(None)
            }
            Op::Copy { from, to, input, out } => {
                let at = || location(format!("copy {} -> {}", display_path(&from), display_path(&to)));
                let mut tree = self.take_context(input, at)?;
                let sub = tree
                    .find_tree(&from.steps())
                    .map_err(|source| ReplayError::Tree { at: at(), source: Box::new(source) })?
                    .ok_or_else(|| ReplayError::CopySourceMissing { at: at() })?;
                tree.add_tree(&to.steps(), &sub)
                    .map_err(|source| ReplayError::Tree { at: at(), source: Box::new(source) })?;
                self.bind_context(out, tree);
                Ok(None)
            }
            Op::Find { path, found, input }
            | Op::Mem { path, found, input }
            | Op::MemTree { path, found, input } => {
                let at = || location(describe(kind, &path));
                let tree = self.take_context(input, at)?;
                let actual = match kind {
                    OpKind::Find => tree.find(&path.steps()).map(|found| found.is_some()),
                    OpKind::Mem => tree.mem(&path.steps()),
                    _ => tree.mem_tree(&path.steps()),
                }
                .map_err(|source| ReplayError::Tree { at: at(), source: Box::new(source) })?;
                self.check_read(found, actual, at)?;
                Ok(None)
            }
            Op::Commit { hash, date, message, parents, input } => {
                let at = || location("commit".to_string());
                let tree = self.take_context(input, at)?;
                let mut real_parents = Vec::with_capacity(parents.len());
                for parent in parents {
                    real_parents.push(self.map_commit(parent, at)?);
                }
                let info = CommitInfo::tezos(date, message);
                // When hashes are checked, a store may check this one beside the replay (and fail a
                // later operation if it differs).
                let commit_at = self.last_expected_commit;
                let real = if self.options.check_hashes {
                    self.repo.commit_expected(&tree, &real_parents, info, &hash.value())
                } else {
                    self.repo.commit(&tree, &real_parents, info)
                }
                .map_err(|source| {
                    super::store_error::<R>(commit_at, source, |source| ReplayError::Store {
                        at: at(),
                        source,
                    })
                })?;
                if self.options.check_hashes {
                    self.last_expected_commit = Some((block, op_index));
                    self.commits_checked += 1;
                    if real != hash.value() {
                        return Err(ReplayError::HashMismatch {
                            at: at(),
                            expected: hash.value(),
                            actual: real,
                        });
                    }
                }
                // Insert, then forget at once if this is the hash's last occurrence (as Irmin).
                if hash.is_forget() {
                    self.commits.remove(&hash.value());
                } else {
                    self.commits.insert(hash.value(), real);
                }
                Ok(Some(real))
            }
        }
    }
}
