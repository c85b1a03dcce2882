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
trace=$1 setup=$2 out=$3
shift 3
. "$(dirname "$0")/cgroup_lib.sh"
cgroup_prepare "$@"
shift "$shift"
cp -a "$setup" "$out/store"
sync
echo 3 >/proc/sys/vm/drop_caches
cgroup_start "$limit" "$out/summary.json" "$out/log" "$larch" replay "$trace" --store "$out/store" \
    --onto-store --stats "$out/stats.jsonl" --json "$@"
cgroup_monitor "$out" "$limit"
exit "$status"
