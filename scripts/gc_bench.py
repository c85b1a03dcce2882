#!/usr/bin/env python3
"""Compares the runs of scripts/gc_bench.sh against issue 10's targets.

Usage: scripts/gc_bench.py OUT_DIR [KEEP]

For each run directory (`gc-N`, `nogc-N`): wall-clock context ops/s, regular-block p99 and max,
peak RSS, the store's size after block KEEP (default 1280) and at the end, the largest size
seen, the GCs' largest peak/start ratio, the reader's walks and errors. Then the GC runs against
the runs without GC (medians), as the issue states its targets.
"""
import json
import statistics
import sys
from pathlib import Path

MIB = 1 << 20


def load(run: Path, keep: int) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    sizes = {}
    for line in (run / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("type") == "block":
            size = (row.get("backend") or {}).get("store_size_bytes")
            if size is not None:
                sizes[row["block"]] = size
    reader = {}
    reader_file = run / "reader.json"
    if reader_file.exists() and reader_file.read_text().strip():
        reader = json.loads(reader_file.read_text())
    regular = summary.get("regular_block_time") or {}
    gc = summary.get("gc") or {}
    return {
        "run": run.name,
        "ops_wall": summary.get("context_ops_per_wall_s"),
        "ops_cpu": summary.get("context_ops_per_s"),
        "p99_ms": regular.get("p99", 0) * 1e3,
        "max_ms": regular.get("max", 0) * 1e3,
        "rss_mib": (summary.get("max_rss_bytes") or 0) / MIB,
        "after_keep_mib": sizes.get(keep, 0) / MIB,
        "final_mib": int((run / "final_bytes").read_text()) / MIB if (run / "final_bytes").exists() else 0,
        "largest_mib": max(sizes.values(), default=0) / MIB,
        "gc_peak_ratio": gc.get("max_peak_over_start"),
        "gcs": gc.get("finished"),
        "max_pause_ms": (gc.get("max_switch_pause_s") or 0) * 1e3,
        "waited_s": gc.get("waited_s"),
        "deferred": gc.get("deferred"),
        "never_started": gc.get("skipped"),
        "reader_walks": reader.get("walks"),
        "reader_errors": reader.get("errors"),
    }


def main() -> None:
    out = Path(sys.argv[1])
    keep = int(sys.argv[2]) if len(sys.argv) > 2 else 1280
    runs = [load(run, keep) for run in sorted(out.iterdir()) if (run / "summary.json").exists()]
    columns = list(runs[0].keys()) if runs else []
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for run in runs:
        cells = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in run.values()]
        print("| " + " | ".join(cells) + " |")
    gc = [r for r in runs if r["run"].startswith("gc-")]
    base = [r for r in runs if r["run"].startswith("nogc-")]
    if not gc or not base:
        return

    def med(rows, key):
        return statistics.median(r[key] for r in rows if r[key] is not None)

    print()
    print("target | measured (medians, GC / no GC) | verdict")
    print("---|---|---")
    final, after = med(gc, "final_mib"), med(base, "after_keep_mib")
    checks = [
        ("final store <= size after block %d + 10%%" % keep, f"{final:.1f} / {after:.1f} MiB = {final / after:.3f}x", final <= after * 1.10),
        ("regular p99 within 1.2x", f"{med(gc, 'p99_ms'):.1f} / {med(base, 'p99_ms'):.1f} ms = {med(gc, 'p99_ms') / med(base, 'p99_ms'):.2f}x", med(gc, "p99_ms") <= 1.2 * med(base, "p99_ms")),
        ("regular max within 1.5x", f"{med(gc, 'max_ms'):.0f} / {med(base, 'max_ms'):.0f} ms = {med(gc, 'max_ms') / med(base, 'max_ms'):.2f}x", med(gc, "max_ms") <= 1.5 * med(base, "max_ms")),
        ("ops/s (wall) within 10%", f"{med(gc, 'ops_wall'):.0f} / {med(base, 'ops_wall'):.0f} = {med(gc, 'ops_wall') / med(base, 'ops_wall'):.2f}x", med(gc, "ops_wall") >= 0.9 * med(base, "ops_wall")),
        ("peak RSS < 300 MB", f"{med(gc, 'rss_mib'):.0f} MiB", med(gc, "rss_mib") * MIB < 300e6),
        ("GC disk peak <= +25% (aim 10%)", f"{med(gc, 'gc_peak_ratio'):.3f}x", med(gc, "gc_peak_ratio") <= 1.25),
        ("reader errors = 0", str(sum(r["reader_errors"] or 0 for r in runs)), all((r["reader_errors"] or 0) == 0 for r in runs)),
    ]
    for name, measured, ok in checks:
        print(f"{name} | {measured} | {'met' if ok else 'missed'}")


if __name__ == "__main__":
    main()
