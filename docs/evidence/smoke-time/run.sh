#!/usr/bin/env bash
# Where the time of `smoke` goes, before and after (issue 28, item 4), on the GPU machine in one
# device call from the repository root:
#
#     bash docs/evidence/smoke-time/run.sh
#
# The smoke step of ../nomagma-real/run.sh (both REAL variants: the installed torch with MAGMA, and
# a copy of it with the real nomagma library; --bench; the same 684 cases each), run with two
# binaries in turn: dist/splitpkg-before (the variants one after the other) and dist/splitpkg (the
# variants' batteries at once, each worker with its share of the CPU cores, the bench workers
# started while the batteries run), "after" twice. The nomagma library is built first, from
# third_party/pytorch-src (../nomagma-real/SOURCES.md; carried, never committed), by
# tools/build-lazy-variant. Every progress line is stamped with the seconds since the command
# started (log-*.txt); times.txt is the summary. Writes to $OUT (default docs/evidence/smoke-time/out).
#
# RUNS overrides the runs, as NAME:BINARY words in order: on a freshly started machine,
#     RUNS="cold:dist/splitpkg warm:dist/splitpkg warm-2:dist/splitpkg" bash docs/evidence/smoke-time/run.sh
# times the first smoke after boot (nothing of the CUDA wheels in the page cache, the GPU not yet
# used) and then the same step warm. DROP_CACHES=1 empties the page cache before each run (sync;
# echo 3 > /proc/sys/vm/drop_caches, as root): every run then reads torch and the CUDA wheels from
# disk, colder than a first run after boot (which finds torch cached by the copy made above). Each
# run's log starts with the machine's uptime and how much of its memory is page cache.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/evidence/smoke-time/out}
mkdir -p "$OUT"
W=${WORK:-/tmp/splitpkg-smoke-time}
RUNS=${RUNS:-before:dist/splitpkg-before after:dist/splitpkg after-2:dist/splitpkg}
rm -rf "$W"; mkdir -p "$W"
. docs/evidence/steps.sh
PY=python3
"$PY" -c 'import torch' 2>/dev/null || PY=/opt/torch/.venv/bin/python3
TORCH=$("$PY" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')
SITE=$(dirname "$TORCH")

step environment
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -srm
  echo "cores $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  for b in $(for r in $RUNS; do echo "${r#*:}"; done | sort -u); do echo "$b: $("$b" --version) sha256 $(sha256sum < "$b" | cut -c1-16)"; done
} > "$OUT/environment.txt" 2>&1

step "build the real nomagma library"
run build tools/build-lazy-variant --src third_party/pytorch-src --torch "$TORCH" \
  --cuda-include /usr/local/cuda/include --cuda-lib "$SITE/nvidia/cu13/lib" \
  --splitpkg dist/splitpkg --out "$W/nomagma/libtorch_cuda_linalg.so"
echo "nomagma sha256 $(sha256sum < "$W/nomagma/libtorch_cuda_linalg.so" | cut -c1-64)" >> "$OUT/environment.txt"
mkdir -p "$W/copy"
cp -a "$TORCH" "$W/copy/torch"
cp "$W/nomagma/libtorch_cuda_linalg.so" "$W/copy/torch/lib/libtorch_cuda_linalg.so"
ln -s "$SITE/nvidia" "$W/copy/nvidia"

# smoke NAME BIN: the smoke step, progress lines stamped (seconds since start).
smoke() {
  local name=$1 bin=$2
  step "smoke $name"
  if [[ ${DROP_CACHES:-0} == 1 ]]; then
    sync; echo 3 > /proc/sys/vm/drop_caches || echo "   could not drop the page cache" >&2
  fi
  printf 'uptime %s s, page cache %s kB\n' "$(cut -d' ' -f1 /proc/uptime)" "$(awk '$1=="Cached:"{print $2}' /proc/meminfo)" > "$OUT/log-$name.txt"
  local start; start=$(date +%s%N)
  "$bin" smoke --variant "magma=$TORCH" --variant "nomagma=$W/copy" --python "$PY" --bench \
    --deadline 300 --json --out "$OUT/smoke-$name.json" 2>&1 \
    | "$PY" -u -c 'import sys, time
t0 = time.monotonic()
for line in sys.stdin:
    print(f"{time.monotonic() - t0:8.2f} {line}", end="")' >> "$OUT/log-$name.txt"
  local rc=${PIPESTATUS[0]}
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '\n$ %s smoke --variant magma=TORCH --variant nomagma=$W/copy --python %s --bench --deadline 300 --json --out smoke-%s.json\nexit code %d after %d.%03d s\n' \
    "$bin" "$PY" "$name" "$rc" $((ms / 1000)) $((ms % 1000)) >> "$OUT/log-$name.txt"
  echo "   smoke $name: exit $rc, $((ms / 1000)).$((ms % 1000 / 100)) s" | tee -a "$OUT/steps.log" >&2
}
for r in $RUNS; do smoke "${r%%:*}" "${r#*:}"; done

step summary
"$PY" - "$OUT" $(for r in $RUNS; do echo "${r%%:*}"; done) > "$OUT/times.txt" <<'PYEOF'
import json, re, sys, os
out = sys.argv[1]
print("run       total    phase (first..last progress line, s since start)")
for name in sys.argv[2:]:
    path = os.path.join(out, f"log-{name}.txt")
    if not os.path.exists(path):
        continue
    phases = {}
    total = None
    for line in open(path):
        m = re.match(r"\s*([\d.]+) smoke: \[([^\]]+)\]", line)
        if m:
            words = m.group(2).split()
            t, tag = float(m.group(1)), " ".join(words[:2] if words[0] == "bench" else words[:1])
            first, _ = phases.get(tag, (t, t))
            phases[tag] = (first, t)
        m = re.match(r"exit code (\d+) after ([\d.]+) s", line)
        if m:
            total = (int(m.group(1)), float(m.group(2)))
    try:
        s = json.load(open(os.path.join(out, f"smoke-{name}.json")))["summary"]
        summary = f"cases {s['cases']} pass {s['pass']} fail {s['fail']} expected_fail {s['expected_fail']} timeout {s['timeout']}"
    except Exception as e:
        summary = f"no summary ({e})"
    print(f"{name:<9} {total[1] if total else float('nan'):6.1f} s exit {total[0] if total else '?'}  {summary}")
    for tag, (a, b) in phases.items():
        print(f"    {tag:<16} {a:7.1f} .. {b:7.1f}  ({b - a:5.1f} s)")
PYEOF
cat "$OUT/times.txt" >&2
step done
