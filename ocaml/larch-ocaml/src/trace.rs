//! Reading a trace (docs/trace-format.md, larch's or Irmin's format) from OCaml, so that an OCaml
//! program replays it through the context API (the bindings' tests and benchmark). Only the
//! decoding is here: every context operation of the replay goes through the OCaml API.

use crate::{Bytes, Outcome, guard};
use larch_trace::Op;
use larch_trace::format::BoxedSource;
use std::collections::LinkedList;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

/// An open trace: OCaml's `trace`.
pub struct OTrace(pub Mutex<BoxedSource>);

impl ocaml::Custom for OTrace {
    ocaml::custom! { name: "larch.trace" }
}

/// Opens a trace file.
#[ocaml::func]
#[ocaml::sig("string -> (trace, string) result")]
pub fn larch_trace_open(path: &[u8]) -> Outcome<ocaml::Pointer<OTrace>> {
    let path = Path::new(OsStr::from_bytes(path)).to_path_buf();
    let source = guard(|| {
        larch_trace::format::open_trace(&path)
            .map_err(|err| format!("larch: opening trace {}: {err}", path.display()))
    })?;
    Ok(OTrace(Mutex::new(source)).into())
}

/// One operation for OCaml: `(kind, input, output, forget_input, path, path2, value, found,
/// hash, date, message, parents)`. `kind`: 0 checkout, 1 add, 2 remove, 3 copy, 4 find, 5 mem,
/// 6 mem_tree, 7 commit. `input` / `output` are context ids; `forget_input`: the input context
/// is not used again. `hash`: the commit checked out, or the commit hash expected.
pub type OpOut = (
    ocaml::Int,
    ocaml::Int,
    ocaml::Int,
    bool,
    LinkedList<Bytes>,
    LinkedList<Bytes>,
    Bytes,
    bool,
    Bytes,
    i64,
    Bytes,
    LinkedList<Bytes>,
);

fn steps(path: &larch_trace::Path) -> LinkedList<Bytes> {
    path.iter().map(|step| Bytes(step.to_vec())).collect()
}

fn id(value: u64) -> ocaml::Int {
    // Context ids are small counters; the top bit would only be lost beyond 2^62 contexts.
    (value & (u64::MAX >> 2)) as ocaml::Int
}

/// An operation of `kind` on context `input` (forgotten after it when `forget`) giving `out`,
/// every other field empty.
fn base(kind: ocaml::Int, input: ocaml::Int, out: ocaml::Int, forget: bool) -> OpOut {
    let none = LinkedList::new;
    let empty = || Bytes(Vec::new());
    (kind, input, out, forget, none(), none(), empty(), false, empty(), 0, empty(), none())
}

/// A read of `kind` (find, mem, mem_tree) at `path`, whose result the trace recorded (`found`).
fn read(
    kind: ocaml::Int,
    path: &larch_trace::Path,
    found: bool,
    input: larch_trace::op::Scoped<u64>,
) -> OpOut {
    let mut op = base(kind, id(input.value()), 0, input.is_forget());
    (op.4, op.7) = (steps(path), found);
    op
}

fn op_out(op: Op) -> OpOut {
    match op {
        Op::Checkout { commit, out } => {
            let mut op = base(0, 0, id(out.value()), false);
            op.8 = Bytes(commit.value().0.to_vec());
            op
        }
        Op::Add { path, value, input, out } => {
            let mut op = base(1, id(input.value()), id(out.value()), input.is_forget());
            (op.4, op.6) = (steps(&path), Bytes(value));
            op
        }
        Op::Remove { path, input, out } => {
            let mut op = base(2, id(input.value()), id(out.value()), input.is_forget());
            op.4 = steps(&path);
            op
        }
        Op::Copy { from, to, input, out } => {
            let mut op = base(3, id(input.value()), id(out.value()), input.is_forget());
            (op.4, op.5) = (steps(&from), steps(&to));
            op
        }
        Op::Find { path, found, input } => read(4, &path, found, input),
        Op::Mem { path, found, input } => read(5, &path, found, input),
        Op::MemTree { path, found, input } => read(6, &path, found, input),
        Op::Commit { hash, date, message, parents, input } => {
            let mut op = base(7, id(input.value()), 0, input.is_forget());
            op.8 = Bytes(hash.value().0.to_vec());
            op.9 = date;
            op.10 = Bytes(message.into_bytes());
            op.11 = parents.iter().map(|parent| Bytes(parent.value().0.to_vec())).collect();
            op
        }
    }
}

/// The next operation of the trace, `None` at its end.
#[ocaml::func]
#[ocaml::sig(
    "trace -> ((int * int * int * bool * string list * string list * bytes * bool * bytes * int64 * bytes * bytes list) option, string) result"
)]
pub fn larch_trace_next(trace: &OTrace) -> Outcome<Option<OpOut>> {
    let next = guard(|| {
        let mut source = trace.0.lock().map_err(|_| "larch: the trace's lock is poisoned".to_string())?;
        match source.next() {
            None => Ok(None),
            Some(Ok(op)) => Ok(Some(op)),
            Some(Err(err)) => Err(format!("larch: reading the trace: {err}")),
        }
    })?;
    Ok(next.map(op_out))
}

/// Appends `bytes` with its length (u32, little-endian).
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends a list of byte strings: their count (u32), then each as [`put_bytes`].
fn put_list<'a>(out: &mut Vec<u8>, count: usize, items: impl Iterator<Item = &'a [u8]>) {
    out.extend_from_slice(&u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
    for item in items {
        put_bytes(out, item);
    }
}

/// Appends `op` as [`larch_trace_next_batch`] encodes it: `kind`, `forget`, `found` (a byte
/// each), `input`, `output`, `date` (i64 little-endian each), then `path`, `path2` (lists),
/// `value`, `hash`, `message` (byte strings), `parents` (a list): the fields of [`OpOut`], in
/// its order but for the three numbers and the two flags moved first.
fn put_op(out: &mut Vec<u8>, op: &Op) {
    let none: &[&[u8]] = &[];
    let (kind, input, output, forget, found) = match op {
        Op::Checkout { out: made, .. } => (0u8, 0, id(made.value()), false, false),
        Op::Add { input, out: made, .. } => {
            (1, id(input.value()), id(made.value()), input.is_forget(), false)
        }
        Op::Remove { input, out: made, .. } => {
            (2, id(input.value()), id(made.value()), input.is_forget(), false)
        }
        Op::Copy { input, out: made, .. } => {
            (3, id(input.value()), id(made.value()), input.is_forget(), false)
        }
        Op::Find { input, found, .. } => (4, id(input.value()), 0, input.is_forget(), *found),
        Op::Mem { input, found, .. } => (5, id(input.value()), 0, input.is_forget(), *found),
        Op::MemTree { input, found, .. } => (6, id(input.value()), 0, input.is_forget(), *found),
        Op::Commit { input, .. } => (7, id(input.value()), 0, input.is_forget(), false),
    };
    out.extend_from_slice(&[kind, u8::from(forget), u8::from(found)]);
    let date = if let Op::Commit { date, .. } = op { *date } else { 0 };
    for number in [input as i64, output as i64, date] {
        out.extend_from_slice(&number.to_le_bytes());
    }
    let path = |path: &larch_trace::Path, out: &mut Vec<u8>| put_list(out, path.len(), path.iter());
    match op {
        Op::Add { path: p, .. } | Op::Remove { path: p, .. } => {
            path(p, out);
            put_list(out, 0, none.iter().copied());
        }
        Op::Find { path: p, .. } | Op::Mem { path: p, .. } | Op::MemTree { path: p, .. } => {
            path(p, out);
            put_list(out, 0, none.iter().copied());
        }
        Op::Copy { from, to, .. } => {
            path(from, out);
            path(to, out);
        }
        Op::Checkout { .. } | Op::Commit { .. } => {
            put_list(out, 0, none.iter().copied());
            put_list(out, 0, none.iter().copied());
        }
    }
    put_bytes(out, if let Op::Add { value, .. } = op { value } else { &[] });
    match op {
        Op::Checkout { commit, .. } => put_bytes(out, &commit.value().0),
        Op::Commit { hash, .. } => put_bytes(out, &hash.value().0),
        _ => put_bytes(out, &[]),
    }
    match op {
        Op::Commit { message, parents, .. } => {
            put_bytes(out, message.as_bytes());
            let parents: Vec<[u8; 32]> = parents.iter().map(|parent| parent.value().0).collect();
            put_list(out, parents.len(), parents.iter().map(|parent| parent.as_slice()));
        }
        _ => {
            put_bytes(out, &[]);
            put_list(out, 0, none.iter().copied());
        }
    }
}

/// The next operations of the trace, at most `count`, encoded in one byte string (each as
/// `put_op` writes it; empty at the end of the trace). One OCaml value for many operations:
/// building each operation's fields as OCaml values from Rust (a 12-tuple of lists and strings,
/// each value registered as a root while it is built) took a quarter of the OCaml replay's time;
/// the OCaml side decodes this with plain reads (`ocaml/support/support.ml`).
#[ocaml::func]
#[ocaml::sig("trace -> int -> (bytes, string) result")]
pub fn larch_trace_next_batch(trace: &OTrace, count: ocaml::Int) -> Outcome<Bytes> {
    guard(|| {
        let mut source = trace.0.lock().map_err(|_| "larch: the trace's lock is poisoned".to_string())?;
        let mut out = Vec::with_capacity(64 << 10);
        for _ in 0..count.max(1) {
            match source.next() {
                None => break,
                Some(Ok(op)) => put_op(&mut out, &op),
                Some(Err(err)) => return Err(format!("larch: reading the trace: {err}")),
            }
        }
        Ok(Bytes(out))
    })
}
