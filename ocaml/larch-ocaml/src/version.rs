//! The tree of a context, as one version in a chain: a change moves the tree into the new
//! context and changes it in place, and the input context keeps "the new one's tree with this
//! change undone" ([`larch_core::UndoPoint`]), rebuilt only if the input is used again.
//!
//! Why: OCaml contexts are values, so the input of a change stays reachable (Octez drops most of
//! them at once, but only OCaml's collector knows it, much later). Cloning the tree for each
//! change, as a persistent value, made every change copy each directory on its path, because the
//! input still shared them: the replay through OCaml ran at 0.35x `larch replay`'s speed, against
//! 0.75x when the input is given up (`~consume:true`, docs/ocaml.md). Here a change costs a read
//! of its path more than a consuming one, and using an older context again costs the changes
//! made since, undone once (it then holds its own tree again).
//!
//! Each version is locked on its own; a walk from an old version to the one holding the tree
//! locks them one after the other, older first (so no two walks wait on each other in a cycle).

use crate::Outcome;
use larch_core::{Tree, UndoPoint};
use std::sync::{Arc, Mutex, MutexGuard};

/// One context's tree: held, or known as a newer version's with one change undone.
pub struct Version {
    state: Mutex<State>,
}

enum State {
    /// The tree itself.
    Own(Tree),
    /// `next`'s tree with the change at `path` undone; `consumed`: a change asked to consume this
    /// version (`~consume:true`), which refuses later uses (older versions still go through it).
    Before { next: Arc<Version>, path: StoredPath, point: UndoPoint, consumed: bool },
    /// Given up: consumed by a change that no older version goes through, or lost by a change that
    /// failed and could not be undone (the text says which).
    Gone(String),
}

fn consumed() -> String {
    "larch: the context was consumed by an earlier change (~consume:true)".to_string()
}

impl Version {
    /// A version holding `tree`.
    pub fn new(tree: Tree) -> Arc<Version> {
        Arc::new(Version { state: Mutex::new(State::Own(tree)) })
    }

    fn lock(&self) -> Outcome<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| "larch: the context's lock is poisoned".to_string())
    }

    /// `f` of the tree (rebuilt first if this version was changed into a newer one).
    pub fn read<R>(&self, f: impl FnOnce(&Tree) -> Outcome<R>) -> Outcome<R> {
        let mut state = self.lock()?;
        match own(&mut state)? {
            Some(tree) => f(tree),
            None => Err(consumed()),
        }
    }

    /// Changes the tree by `change` at `path` (what it returns: whether it changed anything) and
    /// returns the version holding the result, `None` if nothing changed. The tree moves into the
    /// new version; this one keeps the change's undo point, unless `consume` and no older version
    /// goes through this one (then it is given up). On an error, this version keeps its tree.
    pub fn change(
        self: &Arc<Version>,
        consume: bool,
        path: &[&[u8]],
        change: impl FnOnce(&mut Tree) -> Outcome<bool>,
    ) -> Outcome<Option<Arc<Version>>> {
        let mut state = self.lock()?;
        let Some(tree) = own(&mut state)? else {
            return Err(consumed());
        };
        // Only changes through this version make older ones refer to it, under its lock.
        let keep = !consume || Arc::strong_count(self) > 1;
        let point =
            if keep { Some(tree.undo_point(path).map_err(|err| path_error(path, err))?) } else { None };
        let State::Own(mut tree) = std::mem::replace(&mut *state, State::Gone(in_change())) else {
            return Err(in_change());
        };
        let outcome = crate::guard(|| change(&mut tree));
        let restore = |tree: &mut Tree| match &point {
            Some(point) => tree.undo(path, point).map_err(|err| path_error(path, err)),
            None => Err("larch: a change consuming the context failed".to_string()),
        };
        match outcome {
            Ok(true) => {
                let next = Version::new(tree);
                *state = match point {
                    Some(point) => State::Before {
                        next: next.clone(),
                        path: StoredPath::new(path),
                        point,
                        consumed: consume,
                    },
                    None => State::Gone(consumed()),
                };
                Ok(Some(next))
            }
            Ok(false) => {
                *state = State::Own(tree);
                Ok(None)
            }
            Err(err) => {
                *state = match crate::guard(|| restore(&mut tree)) {
                    Ok(()) => State::Own(tree),
                    Err(lost) => {
                        State::Gone(format!("larch: the context was lost by a failed change ({lost})"))
                    }
                };
                Err(err)
            }
        }
    }
}

/// A path kept with an undo point: its steps in one allocation, each as its length (u32,
/// little-endian) and its bytes: every change keeps one, so one allocation rather than one per
/// step.
#[derive(Clone)]
struct StoredPath(Box<[u8]>);

impl StoredPath {
    fn new(path: &[&[u8]]) -> StoredPath {
        let mut bytes = Vec::with_capacity(path.iter().map(|step| 4 + step.len()).sum());
        for step in path {
            bytes.extend_from_slice(&u32::try_from(step.len()).unwrap_or(u32::MAX).to_le_bytes());
            bytes.extend_from_slice(step);
        }
        StoredPath(bytes.into_boxed_slice())
    }

    fn steps(&self) -> Vec<&[u8]> {
        let mut steps = Vec::new();
        let mut rest = &self.0[..];
        while let Some((len, tail)) = rest.split_first_chunk::<4>() {
            let len = (u32::from_le_bytes(*len) as usize).min(tail.len());
            let (step, tail) = tail.split_at(len);
            steps.push(step);
            rest = tail;
        }
        steps
    }
}

fn in_change() -> String {
    "larch: the context was lost by a change that did not finish".to_string()
}

fn path_error(path: &[&[u8]], err: larch_core::TreeError) -> String {
    let steps: Vec<String> = path.iter().map(|step| String::from_utf8_lossy(step).into_owned()).collect();
    format!("larch: keeping the context before a change at /{}: {err}", steps.join("/"))
}

/// The tree `state` holds, rebuilt from the newer versions first if need be; `None` if the
/// version was consumed.
fn own(state: &mut State) -> Outcome<Option<&mut Tree>> {
    if let State::Before { next, path, point, consumed: false } = &*state {
        let tree = rebuild(next, path, point)?;
        *state = State::Own(tree);
    }
    match state {
        State::Own(tree) => Ok(Some(tree)),
        State::Before { .. } => Ok(None),
        State::Gone(text) => Err(text.clone()),
    }
}

/// `next`'s tree with the change at `path` undone: the newest version's tree with every change
/// since undone, newest first.
fn rebuild(next: &Arc<Version>, path: &StoredPath, point: &UndoPoint) -> Outcome<Tree> {
    let mut undos = vec![(path.clone(), point.clone())];
    let mut version = next.clone();
    let mut tree = loop {
        let state = version.lock()?;
        let newer = match &*state {
            State::Own(tree) => break tree.clone(),
            State::Before { next, path, point, .. } => {
                undos.push((path.clone(), point.clone()));
                next.clone()
            }
            State::Gone(text) => return Err(text.clone()),
        };
        drop(state);
        version = newer;
    };
    for (path, point) in undos.iter().rev() {
        let path = path.steps();
        crate::guard(|| {
            tree.undo(&path, point).map_err(|err| format!("larch: rebuilding a context: {err}"))
        })?;
    }
    Ok(tree)
}

impl Drop for Version {
    /// Drops the chain of newer versions that only this one refers to one after the other, not
    /// recursively: a block's contexts make a chain as long as its changes.
    fn drop(&mut self) {
        let mut state = take_state(&mut self.state);
        while let State::Before { next, .. } = state {
            match Arc::try_unwrap(next) {
                Ok(mut version) => state = take_state(&mut version.state),
                Err(_) => break,
            }
        }
    }
}

fn take_state(state: &mut Mutex<State>) -> State {
    let state = state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
    std::mem::replace(state, State::Gone(String::new()))
}
