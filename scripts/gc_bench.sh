#!/usr/bin/env bash
# The garbage-collection benchmark of issue 10 (docs/benchmarks.md, "Garbage collection"): the same
# trace replayed with and without `--gc-every EVERY --gc-keep KEEP`, alternated ROUNDS times, each
# with a reader process walking random paths of the head throughout (its errors must be 0); then
# scripts/gc_bench.py compares the runs against the issue's targets.
#
#   scripts/gc_bench.sh TRACE OUT_DIR [ROUNDS] [EVERY] [KEEP]
#
# GC_REPLAY_OPTS adds options to the GC runs' replays (e.g. `--gc-when-busy wait`), REPLAY_OPTS to
# every replay (e.g. `--no-pipeline`).
#
# Needs `cargo build --release -p larch-cli && cargo build --release -p larch-store --example reader_loop`.
set -euo pipefail
trace=$1 out=$2 rounds=${3:-2} every=${4:-256} keep=${5:-1280}
root=$(cd "$(dirname "$0")/.." && pwd)
larch=$root/target/release/larch
reader=$root/target/release/examples/reader_loop
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for variant in nogc gc; do
    # Alternate the order between rounds.
    if (( round % 2 == 0 )); then variant=$([ "$variant" = gc ] && echo nogc || echo gc); fi
    run=$out/$variant-$round
    rm -rf "$run" && mkdir -p "$run"
    gc_args=()
    [ "$variant" = gc ] && gc_args=(--gc-every "$every" --gc-keep "$keep" ${GC_REPLAY_OPTS:-})
    "$reader" "$run/store" 100000 "$round" "$run/stop" > "$run/reader.json" &
    reader_pid=$!
    /usr/bin/time -v "$larch" replay "$trace" --store "$run/store" --sync commit --json \
      --stats "$run/stats.jsonl" "${gc_args[@]}" ${REPLAY_OPTS:-} > "$run/summary.json" 2> "$run/time.txt"
    touch "$run/stop"
    wait "$reader_pid" || echo "$run: the reader failed" >&2
    du -sb "$run/store" | cut -f1 > "$run/final_bytes"
    echo "$run: $(python3 -c "import json,sys; s=json.load(open('$run/summary.json')); print(round(s['context_ops_per_wall_s']), 'ctx ops/s wall')")"
  done
done
python3 "$root/scripts/gc_bench.py" "$out"
