#!/usr/bin/env bash
# The test command of the README: every test of the workspace, in release mode (the property, crash
# and replay tests do real work; the larch binary's own tests replay generated traces end to end),
# then the OCaml bindings' tests (scripts/test-ocaml.sh) when OCaml, dune and alcotest are present.
# Without them the OCaml tests are skipped, and this says so; LARCH_REQUIRE_OCAML=1 (set by CI)
# makes their absence an error instead.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --release --locked

if command -v dune >/dev/null 2>&1 && command -v ocamlfind >/dev/null 2>&1 \
  && ocamlfind query alcotest >/dev/null 2>&1; then
  echo "== OCaml bindings' tests (scripts/test-ocaml.sh)"
  ./scripts/test-ocaml.sh
elif [ "${LARCH_REQUIRE_OCAML:-0}" = 1 ]; then
  echo "OCaml tests: OCaml, dune or alcotest is missing, and LARCH_REQUIRE_OCAML=1" >&2
  exit 1
else
  echo "== OCaml bindings' tests SKIPPED: OCaml, dune or alcotest not found" \
    "(Debian: apt-get install ocaml dune libalcotest-ocaml-dev; see docs/ocaml.md)"
fi
