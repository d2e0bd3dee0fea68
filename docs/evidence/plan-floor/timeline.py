"""Per-thread CPU use of one process over time, from `perf script -F tid,time`.

    perf record -F 20000 -e cpu-clock -o t.data -- target/release/splitpkg plan TREE
    perf script -i t.data -F tid,time | python3 timeline.py 0.5

Prints one row per bin (milliseconds from the first sample): each thread's share of the bin, and
their sum. 100 % per thread is a thread that ran the whole bin. perf's own interrupts slow the
process down (about 1.7x at 20 kHz here), so read the shape, not the milliseconds.
"""

import collections
import sys


def main() -> None:
    width = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 20000.0
    rows = []
    for line in sys.stdin:
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            rows.append((int(parts[0]), float(parts[1].rstrip(":"))))
        except ValueError:
            continue
    if not rows:
        sys.exit("timeline.py: no samples on stdin")
    t0 = min(t for _, t in rows)
    tids = sorted({tid for tid, _ in rows})
    per_bin = hz * width / 1000
    bins: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for tid, t in rows:
        bins[int((t - t0) * 1000 / width)][tid] += 1
    for b in sorted(bins):
        shares = "  ".join(f"{int(bins[b][t] * 100 / per_bin):3d}%" for t in tids)
        total = int(sum(bins[b].values()) * 100 / per_bin)
        print(f"{b * width:6.1f} ms  {shares}   sum {total}%")
    print(f"threads {tids}; {len(rows)} samples = {len(rows) / hz * 1000:.1f} ms of CPU")


if __name__ == "__main__":
    main()
