#!/usr/bin/env bash
# Alternated replays of one trace by several builds or settings (docs/benchmarks.md,
# "Method"): each round runs every variant once, in the order given, and prints one line per run:
# context ops/s (wall-clock), CPU seconds, regular-block p99 and largest block, the times of the
# large-burst blocks (BURSTS) and their page faults, peak RSS, store size and the last commit.
# Compare variants as ratios within a round; run a second set in the reverse order.
#
#   scripts/replay_ab.sh TRACE OUT_DIR ROUNDS "LABEL@BINARY|ENV=VALUE ...|EXTRA ARGS" ...
#
# e.g. scripts/replay_ab.sh /tmp/default.trace /tmp/ab 3 "base@/tmp/larch-base||" \
#        "new@target/release/larch||" "mmap@target/release/larch||--mmap"
# (`larch trace gen --out /tmp/default.trace` writes the default trace.) BURSTS lists the blocks whose
# times are printed (default: the default trace's large bursts and the blocks that wait for their
# commits).
set -euo pipefail
trace=$1 out=$2 rounds=$3
shift 3
bursts=${BURSTS:-1284,1288,2565,2569}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    label=${spec%%@*}
    rest=${spec#*@}
    IFS='|' read -r bin envs extra <<< "$rest"
    run=$out/$label.r$round
    # shellcheck disable=SC2086 # ENV and EXTRA are word lists on purpose
    env $envs "$bin" replay "$trace" --stats "$run.jsonl" --json $extra > "$run.json" 2> "$run.err"
    python3 - "$run" "$bursts" <<'PY'
import json, sys
run, bursts = sys.argv[1], [int(b) for b in sys.argv[2].split(",") if b]
summary = json.load(open(run + ".json"))
regular = summary["regular_block_time"]
times, faults = {}, {}
for line in open(run + ".jsonl"):
    record = json.loads(line)
    if record.get("type") == "block" and record["block"] in bursts:
        times[record["block"]] = record["wall_s"] * 1000
        faults[record["block"]] = record.get("page_faults")
print("%-24s ops/s %5.0fk cpu %5.2f s p99 %5.1f ms max %6.1f ms @%d bursts %s faults %s rss %5.1f MiB store %.1f MiB %s" % (
    run.split("/")[-1], summary["context_ops_per_wall_s"] / 1e3, summary["cpu_s"], regular["p99"] * 1e3,
    regular["max"] * 1e3, regular["max_block"], "/".join("%.0f" % times.get(b, 0) for b in bursts),
    "/".join("-" if faults.get(b) is None else str(faults[b]) for b in bursts),
    summary["max_rss_bytes"] / 2**20, summary["store_size_bytes"] / 2**20, summary["last_commit"][:12]))
PY
  done
done
