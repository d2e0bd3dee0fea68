"""Output-to-exit latency: how long each command runs after its first output reaches the pipe.

    python3 exit-latency.py "floor=target/release/examples/floor TREE TREE/lib/libtorch_cuda_linalg.so" \
        "plan=target/release/splitpkg plan TREE"

`plan` and the floor print their result in one write just before they exit, so the time from that
write to the end of `wait` is the exit: mostly the kernel tearing down what the process still maps.
N runs (default 41) after 3 warm-ups, the commands in turns; medians.
"""

import os
import shlex
import statistics
import subprocess
import sys
import time


def once(argv: list[str]) -> tuple[float, float]:
    """(whole run, first output to exit), in ms."""
    r, w = os.pipe()
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=w, stderr=subprocess.DEVNULL)
    os.close(w)
    os.read(r, 1 << 20)
    first = time.perf_counter()
    child.wait()
    end = time.perf_counter()
    while os.read(r, 1 << 20):
        pass
    os.close(r)
    return (end - start) * 1e3, (end - first) * 1e3


def main() -> None:
    runs = int(os.environ.get("N", "41"))
    commands = [(a.split("=", 1)[0], shlex.split(a.split("=", 1)[1])) for a in sys.argv[1:]]
    if not commands:
        sys.exit(__doc__)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in commands}
    for i in range(runs + 3):
        for name, argv in commands:
            t = once(argv)
            if i >= 3:
                times[name].append(t)
    for name, _ in commands:
        whole = statistics.median(t[0] for t in times[name])
        tail = statistics.median(t[1] for t in times[name])
        print(f"{name:10s} whole run {whole:7.3f} ms   first output -> exit {tail:6.3f} ms")


if __name__ == "__main__":
    main()
