#!/bin/sh
# The regular blocks of a rung replayed from a trace onto its setup's store in a memory group
# (docs/benchmarks.md, "Mainnet rung under a 2 GiB cgroup"), so that they can be read ahead
# (`--read-ahead-ops`), which a streamed replay cannot. Make the two inputs once:
#
#   larch replay --scale mainnet --blocks 0 --store SETUP              # the setup alone
#   larch replay --scale mainnet --blocks 1000 --record-regular TRACE  # its regular blocks
#
# then each run copies SETUP to OUT/store, writes the page cache back and drops it (the copy's
# pages would otherwise be cached outside the group, and the replay would find them there), and
# runs `larch replay TRACE --store OUT/store --onto-store` in a cgroup v1 memory group limited to
# LIMIT, sampled as scripts/cgroup_run.sh does: OUT gets summary.json, stats.jsonl, log,
# samples.txt and monitor.txt. Needs root. The store copy is deleted at the end unless
# KEEP_STORE=1.
#
#   scripts/cgroup_onto.sh TRACE SETUP OUT [LIMIT] [LARCH] [-- extra replay args]
#   scripts/cgroup_onto.sh /tmp/reg.trace /tmp/setup /tmp/cg 2G target/release/larch -- --read-ahead-ops 4096
set -eu
trace=$1 setup=$2 out=$3 limit=${4:-2G} larch=${5:-target/release/larch}
shift 3
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
. "$(dirname "$0")/cgroup_lib.sh"
mkdir -p "$out"
rm -rf "$out/store"
cp -a "$setup" "$out/store"
sync
echo 3 >/proc/sys/vm/drop_caches
cgroup_start "$limit" "$larch" replay "$trace" --store "$out/store" --onto-store \
    --stats "$out/stats.jsonl" --json "$@" >"$out/summary.json" 2>"$out/log"
cgroup_monitor "$out" "$limit"
[ "${KEEP_STORE:-0}" = 1 ] || rm -rf "$out/store"
exit "$status"
