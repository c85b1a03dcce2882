//! Trees: OCaml's `tree`, and the operations shared by trees and contexts (`find`, `mem`,
//! `mem_tree`, `find_tree`, `list`, `length`, `add`, `add_tree`, `remove`), the fold walker.

use crate::{Bytes, Outcome, PathArg, guard};
use larch_core::{Depth, Order, Tree, TreeError, Walker};
use ocaml::Pointer;

/// A tree: a custom block holding a persistent [`Tree`] (an O(1) clone; it keeps what it reads
/// alive, so it never dangles).
pub struct OTree(pub Tree);

impl ocaml::Custom for OTree {
    ocaml::custom! { name: "larch.tree" }
    const USED: usize = 1;
    const MAX: usize = 10_000;
}

pub(crate) fn tree_error(what: &str, path: &PathArg, err: TreeError) -> String {
    let steps: Vec<String> = path.0.iter().map(|step| String::from_utf8_lossy(step).into_owned()).collect();
    format!("larch: {what} /{}: {err}", steps.join("/"))
}

pub(crate) fn find(tree: &Tree, path: &PathArg) -> Outcome<Option<Bytes>> {
    guard(|| {
        let found = tree.find(&path.0).map_err(|err| tree_error("find", path, err))?;
        Ok(found.map(|contents| Bytes(contents.as_bytes().to_vec())))
    })
}

pub(crate) fn mem(tree: &Tree, path: &PathArg) -> Outcome<bool> {
    guard(|| tree.mem(&path.0).map_err(|err| tree_error("mem", path, err)))
}

pub(crate) fn mem_tree(tree: &Tree, path: &PathArg) -> Outcome<bool> {
    guard(|| tree.mem_tree(&path.0).map_err(|err| tree_error("mem_tree", path, err)))
}

pub(crate) fn find_tree(tree: &Tree, path: &PathArg) -> Outcome<Option<Tree>> {
    guard(|| tree.find_tree(&path.0).map_err(|err| tree_error("find_tree", path, err)))
}

/// `length` on the OCaml side is an `int` (63 bits): a directory never comes near that.
pub(crate) fn length(tree: &Tree, path: &PathArg) -> Outcome<ocaml::Int> {
    guard(|| {
        let length = tree.length(&path.0).map_err(|err| tree_error("length", path, err))?;
        ocaml::Int::try_from(length).map_err(|_| format!("larch: length {length} overflows an OCaml int"))
    })
}

fn count(what: &str, value: Option<ocaml::Int>) -> Outcome<Option<usize>> {
    match value {
        None => Ok(None),
        Some(value) => {
            usize::try_from(value).map(Some).map_err(|_| format!("larch: list: negative {what} {value}"))
        }
    }
}

/// The page `[offset, offset + length)` of the directory at `path`, in Irmin's order.
pub(crate) fn list(
    tree: &Tree,
    offset: Option<ocaml::Int>,
    length: Option<ocaml::Int>,
    path: &PathArg,
) -> Outcome<Vec<(Bytes, Pointer<OTree>)>> {
    let entries = guard(|| {
        let offset = count("offset", offset)?.unwrap_or(0);
        let length = count("length", length)?;
        tree.list(&path.0, offset, length).map_err(|err| tree_error("list", path, err))
    })?;
    Ok(entries
        .into_iter()
        .map(|(name, tree)| (Bytes(name.as_bytes().to_vec()), OTree(tree).into()))
        .collect())
}

pub(crate) fn add(tree: &mut Tree, path: &PathArg, value: &[u8]) -> Outcome<()> {
    guard(|| tree.add(&path.0, value.to_vec()).map_err(|err| tree_error("add", path, err)))
}

pub(crate) fn add_tree(tree: &mut Tree, path: &PathArg, sub: &Tree) -> Outcome<()> {
    guard(|| tree.add_tree(&path.0, sub).map_err(|err| tree_error("add_tree", path, err)))
}

pub(crate) fn remove(tree: &mut Tree, path: &PathArg) -> Outcome<()> {
    guard(|| tree.remove(&path.0).map_err(|err| tree_error("remove", path, err)))
}

/// `Tree.find`.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (bytes option, string) result")]
pub fn larch_tree_find(tree: &OTree, path: PathArg) -> Outcome<Option<Bytes>> {
    find(&tree.0, &path)
}

/// `Tree.mem`: whether a value is at `path`.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (bool, string) result")]
pub fn larch_tree_mem(tree: &OTree, path: PathArg) -> Outcome<bool> {
    mem(&tree.0, &path)
}

/// `Tree.mem_tree`: whether anything is at `path`.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (bool, string) result")]
pub fn larch_tree_mem_tree(tree: &OTree, path: PathArg) -> Outcome<bool> {
    mem_tree(&tree.0, &path)
}

/// `Tree.find_tree`.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (tree option, string) result")]
pub fn larch_tree_find_tree(tree: &OTree, path: PathArg) -> Outcome<Option<Pointer<OTree>>> {
    Ok(find_tree(&tree.0, &path)?.map(|tree| OTree(tree).into()))
}

/// `Tree.list ?offset ?length`: Irmin's order (docs/list-order.md).
#[ocaml::func]
#[ocaml::sig("tree -> int option -> int option -> string list -> ((string * tree) array, string) result")]
pub fn larch_tree_list(
    tree: &OTree,
    offset: Option<ocaml::Int>,
    length: Option<ocaml::Int>,
    path: PathArg,
) -> Outcome<Vec<(Bytes, Pointer<OTree>)>> {
    list(&tree.0, offset, length, &path)
}

/// `Tree.length`.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (int, string) result")]
pub fn larch_tree_length(tree: &OTree, path: PathArg) -> Outcome<ocaml::Int> {
    length(&tree.0, &path)
}

/// `Tree.add`: a new tree.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> bytes -> (tree, string) result")]
pub fn larch_tree_add(tree: &OTree, path: PathArg, value: &[u8]) -> Outcome<Pointer<OTree>> {
    let mut new = tree.0.clone();
    add(&mut new, &path, value)?;
    Ok(OTree(new).into())
}

/// `Tree.add_tree`: a new tree.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> tree -> (tree, string) result")]
pub fn larch_tree_add_tree(tree: &OTree, path: PathArg, sub: &OTree) -> Outcome<Pointer<OTree>> {
    let mut new = tree.0.clone();
    add_tree(&mut new, &path, &sub.0)?;
    Ok(OTree(new).into())
}

/// `Tree.remove`: a new tree.
#[ocaml::func]
#[ocaml::sig("tree -> string list -> (tree, string) result")]
pub fn larch_tree_remove(tree: &OTree, path: PathArg) -> Outcome<Pointer<OTree>> {
    let mut new = tree.0.clone();
    remove(&mut new, &path)?;
    Ok(OTree(new).into())
}

/// `Tree.empty`.
#[ocaml::func]
#[ocaml::sig("unit -> tree")]
pub fn larch_tree_empty() -> Pointer<OTree> {
    OTree(Tree::empty()).into()
}

/// `Tree.is_empty`.
#[ocaml::func]
#[ocaml::sig("tree -> (bool, string) result")]
pub fn larch_tree_is_empty(tree: &OTree) -> Outcome<bool> {
    guard(|| tree.0.is_empty().map_err(|err| format!("larch: is_empty: {err}")))
}

/// `Tree.kind`: `true` for a value, `false` for a directory.
#[ocaml::func]
#[ocaml::sig("tree -> bool")]
pub fn larch_tree_is_value(tree: &OTree) -> bool {
    tree.0.kind() == larch_core::Kind::Contents
}

/// `Tree.to_value`: the value of a contents tree, `None` for a directory.
#[ocaml::func]
#[ocaml::sig("tree -> (bytes option, string) result")]
pub fn larch_tree_to_value(tree: &OTree) -> Outcome<Option<Bytes>> {
    let none: PathArg = PathArg(Vec::new());
    find(&tree.0, &none)
}

/// `Tree.of_value`.
#[ocaml::func]
#[ocaml::sig("bytes -> tree")]
pub fn larch_tree_of_value(value: &[u8]) -> Pointer<OTree> {
    OTree(Tree::of_contents(value.to_vec())).into()
}

/// `Tree.hash`: 32 raw bytes (a directory's node hash or a value's contents hash).
#[ocaml::func]
#[ocaml::sig("tree -> (bytes, string) result")]
pub fn larch_tree_hash(tree: &OTree) -> Outcome<Bytes> {
    let tree = tree.0.clone();
    guard(|| Ok(Bytes(tree.hash().0.to_vec())))
}

/// `Tree.equal`: same hash.
#[ocaml::func]
#[ocaml::sig("tree -> tree -> (bool, string) result")]
pub fn larch_tree_equal(a: &OTree, b: &OTree) -> Outcome<bool> {
    let (a, b) = (a.0.clone(), b.0.clone());
    guard(|| Ok(a.hash() == b.hash()))
}

/// A fold in progress: OCaml's `walker`.
pub struct OWalker(pub Walker);

impl ocaml::Custom for OWalker {
    ocaml::custom! { name: "larch.walker" }
}

/// The depth constraint: `kind` 0..4 = `Eq`, `Le`, `Lt`, `Ge`, `Gt`.
fn depth_of(depth: Option<(ocaml::Int, ocaml::Int)>) -> Outcome<Option<Depth>> {
    let Some((kind, n)) = depth else {
        return Ok(None);
    };
    let n = u32::try_from(n).map_err(|_| format!("larch: fold: depth {n} out of range"))?;
    Ok(Some(match kind {
        0 => Depth::Eq(n),
        1 => Depth::Le(n),
        2 => Depth::Lt(n),
        3 => Depth::Ge(n),
        4 => Depth::Gt(n),
        _ => return Err(format!("larch: fold: unknown depth constraint {kind}")),
    }))
}

/// Starts `fold ?depth tree path ~order` (`sorted`: by name; else Irmin's order).
#[ocaml::func]
#[ocaml::sig("tree -> (int * int) option -> string list -> bool -> (walker, string) result")]
pub fn larch_walker_make(
    tree: &OTree,
    depth: Option<(ocaml::Int, ocaml::Int)>,
    path: PathArg,
    sorted: bool,
) -> Outcome<Pointer<OWalker>> {
    let walker = guard(|| {
        let depth = depth_of(depth)?;
        let order = if sorted { Order::Sorted } else { Order::Undefined };
        tree.0.walk(&path.0, depth, order).map_err(|err| tree_error("fold", &path, err))
    })?;
    Ok(OWalker(walker).into())
}

/// The next `(path, tree)` of a fold, `None` at the end.
#[ocaml::func]
#[ocaml::sig("walker -> ((string array * tree) option, string) result")]
pub fn larch_walker_next(walker: &mut OWalker) -> Outcome<Option<(Vec<Bytes>, Pointer<OTree>)>> {
    let next = guard(|| match walker.0.next() {
        None => Ok(None),
        Some(Ok(item)) => Ok(Some(item)),
        Some(Err(err)) => Err(format!("larch: fold: {err}")),
    })?;
    Ok(next.map(|(path, tree)| {
        (path.into_iter().map(|name| Bytes(name.as_bytes().to_vec())).collect(), OTree(tree).into())
    }))
}
