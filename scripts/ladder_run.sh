#!/bin/sh
# One rung of the scale ladder (docs/benchmarks.md, "Scale ladder"): streams the rung into a new
# store with `larch replay --scale`, samples the process's open descriptors and RSS every second,
# then times a read-only open of the store and measures its size. Leaves in OUT: summary.json (the
# replay's), stats.jsonl (the regular blocks), monitor.txt (the samples' maxima), open.txt, log.
# The store is deleted at the end unless KEEP_STORE=1.
#
#   scripts/ladder_run.sh RUNG BLOCKS OUT [LARCH]
set -eu
rung=$1 blocks=$2 out=$3 larch=${4:-target/release/larch}
mkdir -p "$out"
rm -rf "$out/store"
"$larch" replay --scale "$rung" --generate --blocks "$blocks" --store "$out/store" \
    --stats "$out/stats.jsonl" --json >"$out/summary.json" 2>"$out/log" &
pid=$!
max_fd=0 max_rss=0
while kill -0 "$pid" 2>/dev/null; do
    fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    [ "${fds:-0}" -gt "$max_fd" ] && max_fd=$fds
    [ "${rss:-0}" -gt "$max_rss" ] && max_rss=$rss
    sleep 1
done
wait "$pid"
echo "max_open_descriptors $max_fd" >"$out/monitor.txt"
echo "max_sampled_rss_kib $max_rss" >>"$out/monitor.txt"
echo "store_bytes $(du -sb "$out/store" | cut -f1)" >>"$out/monitor.txt"
start=$(date +%s.%N)
"$larch" log "$out/store" -n 1 >/dev/null
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "open_and_log_s %.3f\n", e - s }' >"$out/open.txt"
[ "${KEEP_STORE:-0}" = 1 ] || rm -rf "$out/store"
