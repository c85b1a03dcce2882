//! The operations of a context, on its tree (TezEdge's `find`, `mem`, `mem_tree`, `find_tree`,
//! `list`, `length`, `add`, `add_tree`, `remove`): a change returns a new context with the same
//! index and parents.

use crate::index::Context;
use crate::tree::{self, OTree};
use crate::{Bytes, Outcome, PathArg};
use larch_core::Tree;
use ocaml::Pointer;

fn with_tree(ctx: &Context, tree: Tree) -> Pointer<Context> {
    Context { tree, ..ctx.clone() }.into()
}

/// `find`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bytes option, string) result")]
pub fn larch_find(ctx: &Context, path: PathArg) -> Outcome<Option<Bytes>> {
    tree::find(&ctx.tree, &path)
}

/// `mem`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bool, string) result")]
pub fn larch_mem(ctx: &Context, path: PathArg) -> Outcome<bool> {
    tree::mem(&ctx.tree, &path)
}

/// `mem_tree`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (bool, string) result")]
pub fn larch_mem_tree(ctx: &Context, path: PathArg) -> Outcome<bool> {
    tree::mem_tree(&ctx.tree, &path)
}

/// `find_tree`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (tree option, string) result")]
pub fn larch_find_tree(ctx: &Context, path: PathArg) -> Outcome<Option<Pointer<OTree>>> {
    Ok(tree::find_tree(&ctx.tree, &path)?.map(|tree| OTree(tree).into()))
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
    tree::list(&ctx.tree, offset, length, &path)
}

/// `length`.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (int, string) result")]
pub fn larch_length(ctx: &Context, path: PathArg) -> Outcome<ocaml::Int> {
    tree::length(&ctx.tree, &path)
}

/// `add`: a new context.
#[ocaml::func]
#[ocaml::sig("context -> string list -> bytes -> (context, string) result")]
pub fn larch_add(ctx: &Context, path: PathArg, value: &[u8]) -> Outcome<Pointer<Context>> {
    let tree = tree::add(&ctx.tree, &path, value)?;
    Ok(with_tree(ctx, tree))
}

/// `add_tree`: a new context.
#[ocaml::func]
#[ocaml::sig("context -> string list -> tree -> (context, string) result")]
pub fn larch_add_tree(ctx: &Context, path: PathArg, sub: &OTree) -> Outcome<Pointer<Context>> {
    let tree = tree::add_tree(&ctx.tree, &path, &sub.0)?;
    Ok(with_tree(ctx, tree))
}

/// `remove`: a new context.
#[ocaml::func]
#[ocaml::sig("context -> string list -> (context, string) result")]
pub fn larch_remove(ctx: &Context, path: PathArg) -> Outcome<Pointer<Context>> {
    let tree = tree::remove(&ctx.tree, &path)?;
    Ok(with_tree(ctx, tree))
}

/// `copy ~from ~to_` (Octez's `Context.copy`): `None` when `from` is absent.
#[ocaml::func]
#[ocaml::sig("context -> string list -> string list -> (context option, string) result")]
pub fn larch_copy(ctx: &Context, from: PathArg, to: PathArg) -> Outcome<Option<Pointer<Context>>> {
    let copied = crate::guard(|| {
        let mut tree = ctx.tree.clone();
        let done = tree.copy(&from.0, &to.0).map_err(|err| tree::tree_error("copy from", &from, err))?;
        Ok(done.then_some(tree))
    })?;
    Ok(copied.map(|tree| with_tree(ctx, tree)))
}
