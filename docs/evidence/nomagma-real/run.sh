#!/usr/bin/env bash
# The REAL nomagma evidence run on the GPU machine (NVIDIA H200, torch 2.11.0+cu130 pip wheel, no
# network), in one device call from the repository root:
#
#     bash docs/evidence/nomagma-real/run.sh
#
# Needs dist/splitpkg (a stripped release build carried from the Rust machine) and the real
# MAGMA-free lazy library built by tools/build-lazy-variant (default
# third_party/build/libtorch_cuda_linalg.so, carried, never committed). Nothing here is emulated:
#
#  1. environment, and both libraries (stock, real nomagma) with sizes and sha256;
#  2. `verify-variant` of the real library against the installed torch's contract, and `plan` of
#     a copy of the installed torch with the real library in place (must be NOT PRESENT);
#  3. smoke on the copied tree: --variant magma=<stock install> --variant nomagma=<copy>, --bench
#     on both (default routing on each: what each variant's users get);
#  4. pack the installed torch with --lazy-variant nomagma=<real>, solve (every scenario must be
#     applicable), solve --install both environments, env on each;
#  5. smoke on the INSTALLED environments themselves (their site-packages), --bench on both;
#  6. switch the slim environment to magma with rattler's installer (env --switch), env again.
#
# Writes everything to $OUT (default docs/evidence/nomagma-real/out); copy it into
# docs/evidence/nomagma-real/ and commit. Expected wall time on an H200: about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/evidence/nomagma-real/out}
mkdir -p "$OUT"
BIN=${SPLITPKG:-$PWD/dist/splitpkg}
NOMAGMA=$(realpath "${NOMAGMA:-third_party/build/libtorch_cuda_linalg.so}")
PY=python3
"$PY" -c 'import torch' 2>/dev/null || PY=/opt/torch/.venv/bin/python3
TORCH=$("$PY" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')
SITE=$(dirname "$TORCH")
W=${WORK:-/tmp/splitpkg-nomagma-real}
rm -rf "$W"; mkdir -p "$W"
. docs/evidence/steps.sh

step environment
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -srm
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "git", torch.version.git_version, "has_magma", torch.cuda.has_magma)' 2>&1
  "$BIN" --version
  echo "stock   $(stat -c %s "$TORCH/lib/libtorch_cuda_linalg.so") bytes  sha256 $(sha256sum < "$TORCH/lib/libtorch_cuda_linalg.so" | cut -c1-64)  $TORCH/lib/libtorch_cuda_linalg.so"
  echo "nomagma $(stat -c %s "$NOMAGMA") bytes  sha256 $(sha256sum < "$NOMAGMA" | cut -c1-64)  (tools/build-lazy-variant)"
  echo "work dir W=$W"
} > "$OUT/environment.txt" 2>&1

step "verify-variant and plan of the real library"
VERSION=$("$PY" -c "import importlib.metadata as m; print(m.version(\"torch\").split(\"+\")[0])")
run emit "$BIN" emit "$TORCH" --version "$VERSION" --out "$W/recipe" --quiet
run verify-variant "$BIN" verify-variant "$NOMAGMA" --variant nomagma --contract "$W/recipe/rattler-build/contract.json" --lib-dir "$TORCH/lib" --lib-dir "$SITE/nvidia/cu13/lib"
# A copy of the installed torch with the real library in place; nvidia/ linked beside it, since
# torch's RPATH reaches the CUDA libraries through $ORIGIN/../../nvidia.
mkdir -p "$W/copy"
cp -a "$TORCH" "$W/copy/torch"
cp "$NOMAGMA" "$W/copy/torch/lib/libtorch_cuda_linalg.so"
ln -s "$SITE/nvidia" "$W/copy/nvidia"
run plan-copy "$BIN" plan "$W/copy/torch" --quiet
run verify-variant-stock-as-nomagma "$BIN" verify-variant "$TORCH/lib/libtorch_cuda_linalg.so" --variant nomagma --contract "$W/recipe/rattler-build/contract.json"

step "smoke: stock install vs copied tree with the real library"
run smoke-copy "$BIN" smoke --variant "magma=$TORCH" --variant "nomagma=$W/copy" --python "$PY" --bench --deadline 300 --json --out "$OUT/smoke-copy.json"
"$BIN" smoke --replay "$OUT/smoke-copy.json" --all > "$OUT/smoke-copy-table.txt" 2>&1

step "pack, solve, install, env"
mkdir -p "$W/root"
cp -a "$TORCH" "$W/root/torch"
run pack "$BIN" pack "$W/root" --version "$VERSION" --lazy-variant "nomagma=$NOMAGMA" --out "$W/channel"
run solve "$BIN" solve "$W/channel" --install "$W/envs"
run env-default "$BIN" env "$W/envs/default"
run env-slim "$BIN" env "$W/envs/slim"
for e in default slim; do ln -s "$SITE/nvidia" "$W/envs/$e/nvidia"; done

step "smoke on the installed environments"
run smoke-envs "$BIN" smoke --variant "magma=$W/envs/default" --variant "nomagma=$W/envs/slim" --python "$PY" --bench --deadline 300 --json --out "$OUT/smoke-envs.json"
"$BIN" smoke --replay "$OUT/smoke-envs.json" --all > "$OUT/smoke-envs-table.txt" 2>&1

step "switch the slim environment with rattler's installer"
run env-switch "$BIN" env "$W/envs/slim" --switch
run plan-after-switch "$BIN" plan "$W/envs/slim" --quiet
run smoke-after-switch "$BIN" smoke --variant "magma=$W/envs/slim" --python "$PY" --only float64 --deadline 120 --json --out "$OUT/smoke-after-switch.json"
du -sb "$W/envs/default" "$W/envs/slim" "$W/channel" > "$OUT/du.txt" 2>&1
step done
