#!/usr/bin/env bash
# The evidence run of `splitpkg smoke` on the GPU machine (NVIDIA H200, torch 2.11.0+cu130 pip
# wheel with MAGMA inside, no network). One call from the repository root:
#
#     bash docs/evidence/run-smoke.sh
#
# Needs target/release/splitpkg (built on a Rust machine and carried along; the GPU machine has no
# Rust toolchain) and a python3 that imports torch. There is no nomagma build of torch 2.11 there,
# so the run is:
#   magma    the system torch installation, for real, every preference;
#   nomagma  the SAME installation with the cuSOLVER preference forced (--emulate nomagma):
#            reported as EMULATED, never as a real nomagma pass;
#   --bench  median timings under default / cusolver / magma on the magma variant.
#
# Writes to $OUT (default docs/evidence/out): smoke.json (the report, docs/smoke.schema.json),
# smoke.txt (every case, rendered from smoke.json with --replay), smoke.log (progress on stderr),
# command.txt, environment.txt. Copy them into docs/evidence/ and commit.
# Expected wall time on an H200: 3–6 minutes; --deadline keeps it under 9 minutes whatever happens.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-docs/evidence/out}
mkdir -p "$OUT"
BIN=${SPLITPKG:-target/release/splitpkg}
PY=${PYTHON:-python3}
# The GPU machine's torch lives in /opt/torch/.venv; use it when python3 on PATH has no torch.
if ! "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null \
   && [ -z "${PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python3 ]; then
  PY=/opt/torch/.venv/bin/python3
fi

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -srm
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "has_magma", torch.cuda.has_magma)' 2>&1
  "$BIN" --version
} > "$OUT/environment.txt"

TORCH=$("$PY" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])') || {
  echo "run-smoke.sh: $PY cannot find torch" >&2
  exit 2
}

# DEADLINE, BENCH and SMOKE_EXTRA let docs/evidence/run-gpu.sh make a quick run first.
# shellcheck disable=SC2206
extra=(${SMOKE_EXTRA:-})
cmd=("$BIN" smoke
  --variant "magma=$TORCH"
  --variant "nomagma=$TORCH" --emulate nomagma
  --python "$PY"
  ${BENCH---bench}
  --deadline "${DEADLINE:-480}"
  "${extra[@]}"
  --json --out "$OUT/smoke.json")
printf '%q ' "${cmd[@]}" | sed "s#$OUT/#\$OUT/#g" > "$OUT/command.txt"
echo >> "$OUT/command.txt"

start=$(date +%s)
"${cmd[@]}" 2> >(tee "$OUT/smoke.log" >&2)
rc=$?
sleep 1
echo "splitpkg smoke exit code $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/smoke.log"

if [ -s "$OUT/smoke.json" ]; then
  "$BIN" smoke --replay "$OUT/smoke.json" --all > "$OUT/smoke.txt"
  grep -E '^(RESULT|NOTE)' "$OUT/smoke.txt"
fi
exit $rc
