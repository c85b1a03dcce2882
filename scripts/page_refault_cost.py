#!/usr/bin/env python3
"""First-touch cost of fresh anonymous memory, with and without transparent huge pages, after
the memory has been idle for a while (docs/benchmarks.md at c117370, "Issue 11, fifteenth round").

On the shared benchmark VMs, huge pages freed for more than about two seconds are handed back to
the host (virtio-balloon free page reporting), and touching them again costs ~1-2.3 ms per MiB
instead of at most 0.05 (this loop's own cost included): a replay block whose heap grows by 20
MiB of huge pages pays 20-45 ms for it.
Run it to see whether a machine behaves so:

    python3 scripts/page_refault_cost.py [MIB]
"""
import mmap
import sys
import time


def touch(mib, huge):
    """Seconds to write one byte of every 4 KiB page of `mib` MiB of fresh anonymous memory."""
    area = mmap.mmap(-1, (mib + 2) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    area.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    start = time.perf_counter()
    for offset in range(0, mib << 20, 4096):
        area[offset] = 1
    elapsed = time.perf_counter() - start
    area.close()
    return elapsed


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    for huge in (False, True):
        for idle in (0, 0, 4, 0, 4):
            time.sleep(idle)
            seconds = touch(mib, huge)
            kind = "2 MiB pages" if huge else "4 KiB pages"
            print(f"{kind}, after {idle} s idle: {mib} MiB in {seconds * 1e3:6.1f} ms "
                  f"({seconds * 1e3 / mib:.2f} ms/MiB)")


if __name__ == "__main__":
    main()
