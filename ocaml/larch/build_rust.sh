#!/usr/bin/env bash
# Builds the Rust static library of the bindings (ocaml/larch-ocaml) with cargo and copies it to
# the targets dune asks for: liblarch_ocaml.a and dlllarch_ocaml.so. Run by dune from its build
# directory (ocaml/_build/...): the sources are found above `_build`. The cargo target directory
# is the repository's target/ocaml (kept across dune builds; cargo rebuilds only what changed).
set -euo pipefail
here="$(pwd)"
case "$here" in
  */_build/*) ocaml_dir="${here%%/_build/*}" ;;
  *) echo "build_rust.sh: run by dune inside ocaml/_build (cwd: $here)" >&2; exit 1 ;;
esac
repo="$(cd "$ocaml_dir/.." && pwd)"
target="${LARCH_OCAML_TARGET:-$repo/target/ocaml}"
CARGO_TARGET_DIR="$target" cargo build --release --locked --quiet \
  --manifest-path "$ocaml_dir/larch-ocaml/Cargo.toml"
cp "$target/release/liblarch_ocaml.a" "$1"
cp "$target/release/liblarch_ocaml.so" "$2"
