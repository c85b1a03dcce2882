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
rung=$1 blocks=$2 out=$3
shift 3
. "$(dirname "$0")/cgroup_lib.sh"
cgroup_prepare "$@"
shift "$shift"
cgroup_start "$limit" "$out/summary.json" "$out/log" "$larch" replay --scale "$rung" --generate \
    --blocks "$blocks" --store "$out/store" --stats "$out/stats.jsonl" --json "$@"
cgroup_monitor "$out" "$limit"
exit "$status"
