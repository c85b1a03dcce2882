#!/usr/bin/env bash
# The OCaml bindings' tests (docs/ocaml.md): builds the `larch` binary and the bindings (dune
# builds the Rust static library through cargo), prepares what the tests read (Irmin's hash
# vectors as lines, a small generated trace), then runs the alcotest suite in ocaml/test.
# Needs OCaml, dune and alcotest (Debian: ocaml dune libalcotest-ocaml-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

cargo build --release --locked -p larch-cli
scratch="$repo/target/ocaml-tests"
rm -rf "$scratch"
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT

python3 ocaml/test/vectors_to_lines.py crates/larch-core/tests/data/irmin-3.7.2-vectors.json \
  "$scratch/vectors.txt"
# A small trace (about 40 blocks, a few thousand operations): the replay test compares the OCaml
# replay's commits with `larch replay`'s.
target/release/larch trace gen --out "$scratch/small.trace" --blocks 40 --accounts 2000 \
  --ops-per-block 200 --seed 42 >/dev/null

export LARCH_BIN="$repo/target/release/larch"
export LARCH_VECTORS="$scratch/vectors.txt"
export LARCH_TRACE="$scratch/small.trace"
export LARCH_SCRATCH="$scratch"
dune build --root ocaml @runtest --force --display short 2>&1
