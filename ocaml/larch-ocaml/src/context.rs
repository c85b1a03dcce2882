//! The operations of a context, on its tree (TezEdge's `find`, `mem`, `mem_tree`, `find_tree`,
//! `list`, `length`, `add`, `add_tree`, `remove`): a change returns a new context with the same
//! index and parents.

use crate::index::Context;
use crate::tree::{self, OTree};
use crate::{Bytes, Outcome, PathArg};
use ocaml::Pointer;

/// `find`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bytes option, string) result")]
pub fn larch_find(ctx: &Context, path: PathArg) -> Outcome<Option<Bytes>> {
    ctx.read(|tree| tree::find(tree, &path))
}

/// `mem`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bool, string) result")]
pub fn larch_mem(ctx: &Context, path: PathArg) -> Outcome<bool> {
    ctx.read(|tree| tree::mem(tree, &path))
}

/// `mem_tree`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bool, string) result")]
pub fn larch_mem_tree(ctx: &Context, path: PathArg) -> Outcome<bool> {
    ctx.read(|tree| tree::mem_tree(tree, &path))
}

/// `find_tree`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (tree option, string) result")]
pub fn larch_find_tree(ctx: &Context, path: PathArg) -> Outcome<Option<Pointer<OTree>>> {
    Ok(ctx.read(|tree| tree::find_tree(tree, &path))?.map(|tree| OTree(tree).into()))
}

/// `list ?offset ?length`: Irmin's order.
#[ocaml::func]
#[ocaml::sig("context -> int option -> int option -> string list -> ((string * tree) array, string) result")]
pub fn larch_list(
    ctx: &Context,
    offset: Option<ocaml::Int>,
    length: Option<ocaml::Int>,
    path: PathArg,
) -> Outcome<Vec<(Bytes, Pointer<OTree>)>> {
    let tree = ctx.tree()?;
    tree::list(&tree, offset, length, &path)
}

/// `length`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (int, string) result")]
pub fn larch_length(ctx: &Context, path: PathArg) -> Outcome<ocaml::Int> {
    ctx.read(|tree| tree::length(tree, &path))
}

/// `add`: a new context. The tree moves into it and is changed in place; the input keeps what
/// rebuilds its tree if it is used again. With `consume`, the input refuses later uses.
#[ocaml::func]
#[ocaml::sig("context -> string list -> bytes -> bool -> (context, string) result")]
pub fn larch_add(ctx: &Context, path: PathArg, value: &[u8], consume: bool) -> Outcome<Pointer<Context>> {
    changed(ctx.change(consume, &path.0, |tree| tree::add(tree, &path, value).map(|()| true))?)
}

/// `add_tree`: a new context (`consume` as for `add`).
#[ocaml::func]
#[ocaml::sig("context -> string list -> tree -> bool -> (context, string) result")]
pub fn larch_add_tree(ctx: &Context, path: PathArg, sub: &OTree, consume: bool) -> Outcome<Pointer<Context>> {
    changed(ctx.change(consume, &path.0, |tree| tree::add_tree(tree, &path, &sub.0).map(|()| true))?)
}

/// `remove`: a new context (`consume` as for `add`).
#[ocaml::func]
#[ocaml::sig("context -> string list -> bool -> (context, string) result")]
pub fn larch_remove(ctx: &Context, path: PathArg, consume: bool) -> Outcome<Pointer<Context>> {
    changed(ctx.change(consume, &path.0, |tree| tree::remove(tree, &path).map(|()| true))?)
}

/// The context a change made (every change but `copy` from a missing path makes one).
fn changed(made: Option<Context>) -> Outcome<Pointer<Context>> {
    made.map(Pointer::from).ok_or_else(|| "larch: a change made no context".to_string())
}

/// `copy ~from ~to_` (Octez's `Context.copy`): `None` when `from` is absent (`consume` as for
/// `add`; an absent `from` consumes nothing).
#[ocaml::func]
#[ocaml::sig("context -> string list -> string list -> bool -> (context option, string) result")]
pub fn larch_copy(
    ctx: &Context,
    from: PathArg,
    to: PathArg,
    consume: bool,
) -> Outcome<Option<Pointer<Context>>> {
    let made = ctx.change(consume, &to.0, |tree| {
        tree.copy(&from.0, &to.0).map_err(|err| tree::tree_error("copy from", &from, err))
    })?;
    Ok(made.map(Pointer::from))
}
