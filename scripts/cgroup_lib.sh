# Shared by scripts/cgroup_run.sh and scripts/cgroup_onto.sh (sourced, not run): a cgroup v1
# memory group for a replay, and the monitor that samples it. Needs root and cgroup v1 at
# /sys/fs/cgroup/memory.

# cgroup_start LIMIT STDOUT STDERR CMD...: creates a memory group limited to LIMIT (no swap on the
# machine, so the limit holds the page cache too) and starts CMD in it in the background, its
# output into the files STDOUT and STDERR; sets $group and $pid. A failure to set the group up
# stops the script (set -e); the group is removed on exit (cgroup_cleanup).
cgroup_start() {
    group=/sys/fs/cgroup/memory/larch_cg_$$
    mkdir "$group"
    echo "$1" >"$group/memory.limit_in_bytes"
    stdout=$2 stderr=$3
    shift 3
    # A shell joins the group, then becomes the replay (never outside the group).
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$group" "$@" >"$stdout" 2>"$stderr" &
    pid=$!
}

# On exit: removes the memory group, and the store $out/store unless KEEP_STORE=1.
cgroup_cleanup() {
    [ -n "${group:-}" ] && rmdir "$group" 2>/dev/null
    [ "${KEEP_STORE:-0}" = 1 ] || rm -rf "$out/store"
}
trap cgroup_cleanup EXIT

# cgroup_prepare "$@": creates $out with no store in it, and reads the optional LIMIT and LARCH
# after a script's fixed arguments (already shifted off), then `--` and the replay's own arguments:
# sets $limit (default 2G) and $larch (default target/release/larch), and $shift, how many
# arguments to shift to reach the replay's.
cgroup_prepare() {
    mkdir -p "$out"
    rm -rf "$out/store"
    limit=2G larch=target/release/larch shift=0
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then limit=$1 shift=1; shift; fi
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then larch=$1 shift=$((shift + 1)); shift; fi
    if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift=$((shift + 1)); fi
}

# cgroup_monitor OUT LIMIT: samples $pid every second (VmRSS, RssAnon, RssFile: the store's pages a
# memory map holds count in RssFile; open descriptors; /proc/PID/io) into OUT/samples.txt until it
# ends, writes the maxima, the group's peak usage and failcnt, VmHWM, the store's size and the exit
# status into OUT/monitor.txt, and returns the replay's status in $status.
cgroup_monitor() {
    out=$1 limit=$2
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
}
