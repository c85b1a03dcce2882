#!/bin/sh
# A replay whose memory, page cache included, is limited by a cgroup (docs/benchmarks.md,
# "Mainnet rung under a 2 GiB cgroup"): issue 40's "node whose RAM is smaller than its context".
# Streams RUNG into a new store with `larch replay --scale RUNG --generate` inside a cgroup v1
# memory group limited to LIMIT (no swap on the machine, so the limit holds the page cache too),
# samples the process's RSS (VmRSS, RssAnon, RssFile: the store's pages a memory map holds count
# in RssFile), open descriptors and /proc/PID/io every second, and leaves in OUT:
# summary.json (the replay's: setup and regular blocks), stats.jsonl (the regular blocks, with
# their read calls and bytes), log (progress), monitor.txt (maxima, the cgroup's peak usage and
# failcnt, VmHWM, the replay's exit status). Needs root and cgroup v1 at /sys/fs/cgroup/memory.
# The store is deleted at the end unless KEEP_STORE=1.
#
#   scripts/cgroup_run.sh RUNG BLOCKS OUT [LIMIT] [LARCH] [-- extra replay args]
#   scripts/cgroup_run.sh mainnet 1000 /tmp/cg 2G target/release/larch
set -eu
rung=$1 blocks=$2 out=$3 limit=${4:-2G} larch=${5:-target/release/larch}
shift 3
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
group=/sys/fs/cgroup/memory/larch_cg_$$
mkdir -p "$out"
rm -rf "$out/store"
mkdir "$group"
echo "$limit" >"$group/memory.limit_in_bytes"
# Start the replay inside the group: a shell joins it, then becomes the replay.
sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' sh "$group" \
    "$larch" replay --scale "$rung" --generate --blocks "$blocks" --store "$out/store" \
    --stats "$out/stats.jsonl" --json "$@" >"$out/summary.json" 2>"$out/log" &
pid=$!
max_fd=0 max_rss=0 max_anon=0 max_file=0 hwm=0
: >"$out/samples.txt"
while kill -0 "$pid" 2>/dev/null; do
    fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    [ "${fds:-0}" -gt "$max_fd" ] && max_fd=$fds
    [ "${rss:-0}" -gt "$max_rss" ] && max_rss=$rss
    anon=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    file=$(awk '/RssFile/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    h=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
    [ "${anon:-0}" -gt "$max_anon" ] && max_anon=$anon
    [ "${file:-0}" -gt "$max_file" ] && max_file=$file
    [ "${h:-0}" -gt "$hwm" ] && hwm=$h
    io=$(tr '\n' ' ' </proc/$pid/io 2>/dev/null || true)
    echo "$(date +%s) rss_kib ${rss:-0} anon ${anon:-0} file ${file:-0} fds ${fds:-0} cg_usage $(cat "$group/memory.usage_in_bytes") $io" >>"$out/samples.txt"
    sleep 1
done
status=0
wait "$pid" || status=$?
{
    echo "exit_status $status"
    echo "limit $limit"
    echo "max_open_descriptors $max_fd"
    echo "max_sampled_rss_kib $max_rss"
    echo "max_sampled_rss_anon_kib $max_anon"
    echo "max_sampled_rss_file_kib $max_file"
    echo "vmhwm_kib $hwm"
    echo "cgroup_max_usage_bytes $(cat "$group/memory.max_usage_in_bytes")"
    echo "cgroup_failcnt $(cat "$group/memory.failcnt")"
    grep -E '^(total_cache|total_rss|total_pgmajfault) ' "$group/memory.stat" || true
    [ -d "$out/store" ] && echo "store_bytes $(du -sb "$out/store" | cut -f1)"
} >"$out/monitor.txt"
rmdir "$group"
[ "${KEEP_STORE:-0}" = 1 ] || rm -rf "$out/store"
exit "$status"
