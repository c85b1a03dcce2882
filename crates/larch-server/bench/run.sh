#!/usr/bin/env bash
# The context-server benchmark (docs/benchmarks.md, "Context server"): one replay of TRACE into a
# fresh store, with (`load`) or without (`base`) a server and a wrk load on the same store.
#   bench/run.sh load|base TRACE OUT_DIR [PORT]
# Loads are bounded: two wrk runs of 20 s each on 127.0.0.1.
# Environment: VALUES / DIRS (path files; sampled from the store after 300 blocks when absent),
# CONNS (wrk connections, 8), DELAY_MS (pause of each connection between requests, none),
# SERVE_OPTS (more `larch serve` options), NICE (niceness of the server and of wrk, 0),
# REPLAY_OPTS (more `larch replay` options, e.g. `--no-pipeline`), WRITER_CPUS / SERVER_CPUS
# (`taskset -c` lists pinning the writer, and the server with wrk; unpinned when empty).
set -euo pipefail
mode=$1 trace=$2 out=$3 port=${4:-18740}
here=$(cd "$(dirname "$0")" && pwd)
bin=${LARCH_BIN:-$here/../../../target/release}
rm -rf "$out" && mkdir -p "$out"
store=$out/store
# `taskset` runs the command in its own process (so `$!` is the command's pid).
writer_pin=() server_pin=()
if [ -n "${WRITER_CPUS:-}" ]; then writer_pin=(taskset -c "$WRITER_CPUS"); fi
if [ -n "${SERVER_CPUS:-}" ]; then server_pin=(taskset -c "$SERVER_CPUS"); fi
# shellcheck disable=SC2086
"${writer_pin[@]}" "$bin/larch" replay "$trace" --store "$store" --stats "$out/stats.jsonl" ${REPLAY_OPTS:-} >"$out/replay.txt" 2>&1 &
replay=$!
if [ "$mode" = base ]; then wait $replay; exit 0; fi
# Wait for 300 blocks: the context then has its full size (the setup block builds it).
until [ -f "$out/stats.jsonl" ] && [ "$(grep -c '"type":"block"' "$out/stats.jsonl")" -ge 300 ]; do sleep 0.2; done
if [ -n "${VALUES:-}" ]; then
  cp "$VALUES" "$out/values.txt" && cp "$DIRS" "$out/dirs.txt"
else
  "$bin/examples/sample_paths" "$store" 5000 1000 "$out/values.txt" "$out/dirs.txt" 7 2>"$out/sample.txt"
fi
# shellcheck disable=SC2086
"${server_pin[@]}" nice -n "${NICE:-0}" "$bin/larch" serve "$store" --listen "127.0.0.1:$port" ${SERVE_OPTS:-} >"$out/serve.out" 2>"$out/serve.log" &
server=$!
sleep 0.5
conns=${CONNS:-8}
echo "CONNS=$conns DELAY_MS=${DELAY_MS:-} SERVE_OPTS=${SERVE_OPTS:-} NICE=${NICE:-0} REPLAY_OPTS=${REPLAY_OPTS:-} WRITER_CPUS=${WRITER_CPUS:-} SERVER_CPUS=${SERVER_CPUS:-}" >"$out/config"
date +%s.%N >"$out/t0"
PATHS=$out/values.txt "${server_pin[@]}" nice -n "${NICE:-0}" wrk -t1 -c"$conns" -d20s --latency -s "$here/paths.lua" "http://127.0.0.1:$port" >"$out/wrk-values.txt" 2>&1
date +%s.%N >"$out/t1"
PATHS=$out/dirs.txt DEPTH=2 "${server_pin[@]}" nice -n "${NICE:-0}" wrk -t1 -c"$conns" -d20s --latency -s "$here/paths.lua" "http://127.0.0.1:$port" >"$out/wrk-dirs.txt" 2>&1
date +%s.%N >"$out/t2"
curl -s "http://127.0.0.1:$port/metrics" >"$out/metrics.txt"
# The server's CPU time (user, system; clock ticks) over its life.
awk '{print "server cpu ticks: user " $14 ", system " $15}' "/proc/$server/stat" >"$out/server-cpu.txt"
kill -TERM $server
wait $server || echo "server exit status $?" >>"$out/serve.log"
wait $replay
