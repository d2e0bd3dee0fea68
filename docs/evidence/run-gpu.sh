#!/usr/bin/env bash
# Everything splitpkg does on the GPU machine, in one device call (from the repository root):
#
#     MODE=quick bash docs/evidence/run-gpu.sh     # a few cases per op: shakes out harness problems
#     MODE=full  bash docs/evidence/run-gpu.sh     # the evidence run
#
# 1. environment (GPU, driver, torch), 2. `splitpkg plan` and `splitpkg fatbin --device` on the
# installed torch, 3. header walk vs `cuobjdump --list-elf` (bench/fatbin.sh), 4. `splitpkg smoke`
# (docs/evidence/run-smoke.sh: magma for real, nomagma emulated, --bench).
# Needs dist/splitpkg (a release build carried from the Rust machine). Writes everything to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-docs/evidence/out}
mkdir -p "$OUT"
export SPLITPKG=${SPLITPKG:-$PWD/dist/splitpkg}
PY=python3
"$PY" -c 'import torch' 2>/dev/null || PY=/opt/torch/.venv/bin/python3
TORCH=$("$PY" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)

"$SPLITPKG" plan "$TORCH" --quiet > "$OUT/plan-installed-torch.txt" 2>&1
echo "plan exit code $?" >> "$OUT/plan-installed-torch.txt"
"$SPLITPKG" fatbin "$TORCH/lib" --device "sm_$SM" --quiet > "$OUT/fatbin-installed-torch.txt" 2>&1
echo "fatbin exit code $?" >> "$OUT/fatbin-installed-torch.txt"
RUNS=11 CUOBJDUMP_RUNS=3 bash bench/fatbin.sh "$TORCH/lib/libtorch_cuda.so" "$TORCH/lib/libtorch_cuda_linalg.so" \
  > "$OUT/fatbin-vs-cuobjdump.txt" 2>&1

if [ "${MODE:-full}" = quick ]; then
  export SMOKE_EXTRA="--only float64" DEADLINE=200 BENCH=""
fi
bash docs/evidence/run-smoke.sh
