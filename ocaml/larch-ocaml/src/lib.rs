//! OCaml bindings of larch (docs/ocaml.md), shaped like the externals of Octez's TezEdge context
//! backend (`src/rust_deps/rust_tezos_context/ocaml-api`) so that an Octez context module can be
//! pointed at larch: an index on a store directory, immutable contexts (a tree and the commit it
//! was checked out from), trees, a fold walker, commits, GC, snapshots and Merkle proofs.
//!
//! Rules every external here follows:
//! - **No exception is raised from Rust.** A fallible external returns an OCaml
//!   `('a, string) result` whose error is larch's typed error text; the OCaml library
//!   (`ocaml/larch/larch_context.ml`) raises `Larch_context.Error` from it. So no OCaml exception
//!   ever unwinds through Rust frames.
//! - **No panic crosses into OCaml**: each body runs under [`guard`], which catches a panic and
//!   returns it as an `Error`.
//! - **Values are owned by OCaml**: indexes, contexts, trees and walkers are custom blocks whose
//!   finalizers drop the Rust value. A tree or context holds its own reference to what it reads
//!   (an `Arc` of the store's object source), so it stays valid after a commit, a checkout of
//!   another context, or the index's close.
//! - **Long operations release the runtime lock** (commit, GC, snapshot export, sync): their
//!   inputs are copied out of the OCaml heap first ([`blocking`]).

mod context;
mod index;
mod proof;
mod trace;
mod tree;
mod version;

use ocaml::{FromValue, Runtime, ToValue, Value};

/// The Rust side's allocator: mimalloc, as in the `larch` binary (OCaml's heap is OCaml's own).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (a member of its `mi_option_e` that `libmimalloc-sys` names
/// no constant for; `crates/larch-cli/src/allocator.rs` tests it by its default value).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's purge delay to 60 s, as the `larch` binary does (its
/// `allocator.rs` says why), unless the environment chose one (`MIMALLOC_PURGE_DELAY`): freed
/// pages are not given back to the OS one second after, to be faulted in and zeroed again at
/// the next block. On the OCaml replay benchmark: 1.1–1.2x the context ops/s of the default
/// delay (docs/ocaml.md). Once per process, at the first index opened.
pub fn tune_allocator() {
    static TUNED: std::sync::Once = std::sync::Once::new();
    TUNED.call_once(|| {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: `mi_option_set` stores an integer into mimalloc's option table (any thread,
            // any time: the allocator reads it each time it schedules a purge); the index is a
            // member of `mi_option_e`.
            unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 60_000) }
        }
    });
}
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What an external returns when it can fail: OCaml's `('a, string) result`.
pub type Outcome<T> = Result<T, String>;

/// Runs `body`, turning a panic into an `Error` (a panic never unwinds into OCaml).
pub fn guard<T>(body: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(outcome) => outcome,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(format!("larch: internal error (Rust panic): {text}"))
        }
    }
}

/// Runs `body` with OCaml's runtime lock released, so that other OCaml threads run meanwhile.
/// `body` must not touch the OCaml heap: everything it needs is moved in (owned Rust values).
/// A panic is caught before the lock is taken back.
pub fn blocking<T: Send>(gc: &Runtime, body: impl FnOnce() -> Outcome<T> + Send) -> Outcome<T> {
    gc.enter_blocking_section();
    let outcome = guard(body);
    gc.leave_blocking_section();
    outcome
}

/// OCaml bytes (or a string) made from Rust bytes: `ToValue` allocates a fresh `bytes`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

// SAFETY: `Value::bytes` allocates a new OCaml string of the slice's length and copies it; the
// returned value is rooted by ocaml-rs until it is stored.
unsafe impl ToValue for Bytes {
    fn to_value(&self, _rt: &Runtime) -> Value {
        // SAFETY: called with the runtime lock held (ToValue runs in an external's epilogue).
        unsafe { Value::bytes(&self.0) }
    }
}

/// The steps of an OCaml `string list` path, borrowed from the OCaml heap: valid until the next
/// OCaml allocation or blocking section of the external that read it (externals copy what they
/// keep before returning).
pub struct PathArg<'a>(pub Vec<&'a [u8]>);

// SAFETY: reads an OCaml list of strings: each cell is a block (head, tail), `[]` is the
// immediate 0; the slices point into the strings, which do not move while the external runs
// without allocating.
unsafe impl FromValue for PathArg<'_> {
    fn from_value(list: Value) -> Self {
        let mut steps = Vec::new();
        let mut cell = list;
        // SAFETY: `cell` is a list cell or `[]`, as the external's OCaml type says.
        unsafe {
            while cell.is_block() {
                let head = cell.field(0);
                steps.push(<&[u8]>::from_value(head));
                cell = cell.field(1);
            }
        }
        PathArg(steps)
    }
}

/// A hash argument: 32 raw bytes (Octez's `Context_hash.to_bytes`), else an error.
pub fn hash_arg(bytes: &[u8]) -> Outcome<larch_core::Hash> {
    let array: [u8; 32] =
        bytes.try_into().map_err(|_| format!("larch: a hash is 32 bytes, got {} bytes", bytes.len()))?;
    Ok(larch_core::Hash(array))
}

/// The external that lets the OCaml side check that it is linked with this library.
#[ocaml::func]
#[ocaml::sig("unit -> string")]
pub fn larch_version() -> Bytes {
    Bytes(env!("CARGO_PKG_VERSION").as_bytes().to_vec())
}

/// For the tests: a panic inside an external, which must come back as an `Error`.
#[ocaml::func]
#[ocaml::sig("unit -> (unit, string) result")]
pub fn larch_test_panic() -> Outcome<()> {
    guard(|| -> Outcome<()> { panic!("a deliberate panic (larch_test_panic)") })
}

/// A hash (32 raw bytes) in base58check, as Octez prints a context hash (`Co…`).
#[ocaml::func]
#[ocaml::sig("string -> (string, string) result")]
pub fn larch_hash_to_b58(hash: &[u8]) -> Outcome<Bytes> {
    let hash = hash_arg(hash)?;
    Ok(Bytes(hash.to_base58().into_bytes()))
}

/// A hash from its base58check (`Co…`) or hex text: 32 raw bytes.
#[ocaml::func]
#[ocaml::sig("string -> (string, string) result")]
pub fn larch_hash_of_text(text: &[u8]) -> Outcome<Bytes> {
    let text = String::from_utf8_lossy(text);
    let hash: larch_core::Hash = text.parse().map_err(|err| format!("larch: hash {text:?}: {err}"))?;
    Ok(Bytes(hash.0.to_vec()))
}
