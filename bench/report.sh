#!/usr/bin/env bash
# Time `splitpkg report` on the committed evidence (docs/evidence/make-report.sh's inputs: a 1.3 MB
# smoke run with 1,368 cases and two benches, the torch 2.11 plan, fatbin and pack JSON); the issue
# asks for under 100 ms. Prints the median, min and max wall time of N runs (default 21) after one
# warm-up, for HTML and Markdown. A benchmark, not a test: nothing asserts on time.
#
#   bench/report.sh [N] [BIN]        (BIN defaults to target/release/splitpkg, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-21}
bin=${2:-target/release/splitpkg}
[[ -x $bin ]] || cargo build --release --quiet --bin splitpkg
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
exec python3 - "$bin" "$n" "$out" <<'PY'
import statistics, subprocess, sys, time
bin, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
E = "docs/evidence"
args = ["--plan", f"{E}/report-inputs/plan.json", "--smoke", f"{E}/report-inputs/smoke.json",
        "--fatbin", f"{E}/report-inputs/fatbin.json", "--pack", f"{E}/report-inputs/pack.json"]
for fmt in ("html", "md"):
    cmd = [bin, "report", *args, "--format", fmt, "--out", f"{out}/r.{fmt}"]
    subprocess.run(cmd, check=True)  # warm-up (page cache)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append((time.perf_counter() - t) * 1000)
    size = len(open(f"{out}/r.{fmt}", "rb").read())
    print(f"report --format {fmt}: median {statistics.median(times):.1f} ms, min {min(times):.1f} ms, "
          f"max {max(times):.1f} ms over {n} runs; {size:,} bytes written")
PY
