#!/usr/bin/env bash
# The OCaml bindings' replay benchmark (docs/benchmarks.md): the same generated trace replayed
# through the OCaml API (ocaml/bench/replay_bench.ml) and by `larch replay`, alternated ROUNDS
# times in one run, all with `--sync never`; prints each run's context ops per CPU second and the
# ratio of the medians. Usage: scripts/bench-ocaml.sh [BLOCKS] [ROUNDS]   (default 300, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
blocks="${1:-300}"
rounds="${2:-3}"
cargo build --release --locked -p larch-cli >/dev/null
dune build --root ocaml bench/replay_bench.exe 2>&1
work="$(pwd)/target/ocaml-bench"
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
target/release/larch trace gen --out "$work/t.trace" --blocks "$blocks" --seed 1 >/dev/null
rate() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["context_ops_per_s"]))'; }
declare -A runs
for round in $(seq "$rounds"); do
  for variant in rust ocaml-consume ocaml; do
    rm -rf "$work/store"
    case "$variant" in
      rust) r=$(target/release/larch replay "$work/t.trace" --store "$work/store" --sync never --json | rate) ;;
      ocaml-consume) r=$(ocaml/_build/default/bench/replay_bench.exe "$work/t.trace" "$work/store" never consume | rate) ;;
      ocaml) r=$(ocaml/_build/default/bench/replay_bench.exe "$work/t.trace" "$work/store" never | rate) ;;
    esac
    echo "round $round  $variant  $r context ops/s (CPU)"
    runs[$variant]="${runs[$variant]:-} $r"
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rust=$(echo "${runs[rust]}" | median)
for variant in ocaml-consume ocaml; do
  m=$(echo "${runs[$variant]}" | median)
  echo "median $variant: $m context ops/s = $(python3 -c "print(f'{$m/$rust:.2f}')")x larch replay's $rust"
done
