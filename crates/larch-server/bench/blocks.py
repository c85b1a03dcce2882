#!/usr/bin/env python3
"""Compares the writer's block times of a loaded run with a baseline over the same blocks.

    blocks.py LOAD_DIR BASE_DIR [BASE_DIR...]

The loaded run's blocks are those that ended between t0 and t2 (the wrk runs), located by the stat
file's header start time plus each block's elapsed wall time; the baselines' same blocks are
compared. Also prints the regular-block p50/p99 of each whole run.
"""
import json
import sys


def load(path):
    header, blocks = None, {}
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if obj.get("type") == "header":
                header = obj
            elif obj.get("type") == "block":
                blocks[obj["block"]] = obj
    return header, blocks


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def describe(name, times):
    ms = [t * 1000 for t in times]
    return f"{name}: {len(ms)} blocks, mean {sum(ms)/len(ms):.2f} ms, p50 {pct(ms, 50):.2f} ms, p90 {pct(ms, 90):.2f} ms, p99 {pct(ms, 99):.2f} ms, max {max(ms):.2f} ms"


def main():
    load_dir, bases = sys.argv[1], sys.argv[2:]
    header, blocks = load(f"{load_dir}/stats.jsonl")
    start = header["start_unix_s"]
    t0 = float(open(f"{load_dir}/t0").read())
    t2 = float(open(f"{load_dir}/t2").read())
    window = [b for b, obj in blocks.items() if b >= 2 and t0 <= start + obj["elapsed_wall_s"] <= t2]
    print(f"load window {t2 - t0:.1f} s: blocks {min(window)}..{max(window)}")
    print(describe("  with load", [blocks[b]["wall_s"] for b in window]))
    for base in bases:
        _, base_blocks = load(f"{base}/stats.jsonl")
        same = [b for b in window if b in base_blocks]
        print(describe(f"  {base} (same blocks)", [base_blocks[b]["wall_s"] for b in same]))
    for run in [load_dir] + bases:
        _, run_blocks = load(f"{run}/stats.jsonl")
        print(describe(f"  {run} whole run, regular", [o["wall_s"] for b, o in run_blocks.items() if b >= 2]))


main()
