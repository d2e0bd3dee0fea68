#!/usr/bin/env bash
# `splitpkg wheel` on the GPU machine (NVIDIA H200, torch 2.11.0+cu130 installed with pip, no
# network), in one device call from the repository root:
#
#     bash docs/evidence/wheel-gpu/run.sh
#
# Needs dist/splitpkg (a stripped release build carried from the Rust machine) and the real
# MAGMA-free lazy library (default third_party/build/libtorch_cuda_linalg.so, built by
# tools/build-lazy-variant, carried, never committed).
#
#  1. The machine has the installed torch, not its wheel (no network): the wheel is rebuilt from
#     the install with tools/repack-installed-wheel.py (every file checked against the install's
#     RECORD; stored members). It is a RE-PACKED wheel, not PyPI's; the split of PyPI's own
#     wheel is tested in the full tier (tests/it/wheel.rs) and shown in the README.
#  2. splitpkg wheel on it with --lazy-variant nomagma=<real build>.
#  3. pip install --no-index --no-deps --target: "default" (the documented default command) and
#     "slim" (the documented slim command); nvidia/ linked beside each, as torch's RPATH reaches the
#     CUDA libraries through $ORIGIN/../../nvidia; every other dependency from the machine's own
#     site-packages.
#  4. splitpkg plan on each target (which variant is installed, what switching saves).
#  5. splitpkg smoke --variant magma=<default target> --variant nomagma=<slim target> --bench.
#  6. A switch inside a --target directory: pip has no uninstall for --target, so installing the
#     magma wheel over the slim target (--upgrade) leaves both dist-infos listing the library.
#     plan must say so (two owners, the pypa/pip#4625 warning). Switching in a venv is one
#     command and is tested with real pip and uv in tests/it/wheel.rs; with --target, install the
#     other variant into a fresh directory.
#
#  7. (issue 26) splitpkg index on the split, served by `python3 -m http.server` on the machine's
#     loopback; pip installs from it into venvs that see the machine's site-packages after their own
#     (torch's other dependencies are installed there, the machine has no network): `pip install
#     --upgrade torch` gets the core and, through its dependency, the preferred lazy wheel; the slim
#     pin gets nomagma; pip check, plan and smoke on each. Output under $OUT/index/.
#
# INDEX_ONLY=1 runs steps 1, 2 and 7. Without the nomagma build (NOMAGMA missing) the split has the
# magma variant only and the slim steps are skipped, saying so in steps.log.
#
# Writes to $OUT (default docs/evidence/wheel-gpu/out); copy it into docs/evidence/wheel-gpu/.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/evidence/wheel-gpu/out}
mkdir -p "$OUT"
BIN=${SPLITPKG:-$PWD/dist/splitpkg}
NOMAGMA=$(realpath -m "${NOMAGMA:-third_party/build/libtorch_cuda_linalg.so}")
PY=${PY:-python3}
[ -n "${TORCH:-}" ] || "$PY" -c 'import torch' 2>/dev/null || PY=/opt/torch/.venv/bin/python3
# TORCH may be given (a dry run of the packaging steps on a machine without a GPU).
TORCH=${TORCH:-$("$PY" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')}
SITE=$(dirname "$TORCH")
W=${WORK:-/tmp/splitpkg-wheel-gpu}
rm -rf "$W"; mkdir -p "$W"
PIP=("$PY" -m pip --disable-pip-version-check)
. docs/evidence/steps.sh
owners() { # owners TARGET: installed distributions whose RECORD lists the lazy library
  grep -l '^torch/lib/libtorch_cuda_linalg.so,' "$1"/*.dist-info/RECORD 2>/dev/null | xargs -r -n1 dirname | xargs -r -n1 basename
}

step environment
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -srm
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "has_magma", torch.cuda.has_magma)' 2>&1
  "${PIP[@]}" --version
  "$BIN" --version
  echo "stock   $(stat -c %s "$TORCH/lib/libtorch_cuda_linalg.so") bytes  sha256 $(sha256sum < "$TORCH/lib/libtorch_cuda_linalg.so" | cut -c1-64)"
  [ -f "$NOMAGMA" ] && echo "nomagma $(stat -c %s "$NOMAGMA") bytes  sha256 $(sha256sum < "$NOMAGMA" | cut -c1-64)  (tools/build-lazy-variant)"
} > "$OUT/environment.txt" 2>&1

step "repack the installed torch as a wheel"
run repack "$PY" tools/repack-installed-wheel.py torch "$SITE" "$W/input"
WHL=$(ls "$W"/input/*.whl)

step "split"
start=$(date +%s%N)
LAZY_VARIANT=()
if [ -f "$NOMAGMA" ]; then LAZY_VARIANT=(--lazy-variant "nomagma=$NOMAGMA"); else echo "no nomagma build at $NOMAGMA: magma only, slim steps skipped" >> "$OUT/steps.log"; fi
"$BIN" wheel "$WHL" "${LAZY_VARIANT[@]}" --out "$W/wheels" --json > "$OUT/wheel.json" 2> "$OUT/wheel.stderr"
echo "exit $? after $(( ($(date +%s%N) - start) / 1000000 )) ms" >> "$OUT/wheel.stderr"
ls -l "$W/wheels" "$W/wheels/variants" > "$OUT/wheels-ls.txt" 2>&1
# The lazy distribution's requirement for each variant, from the report.
req() { "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(*["%s==%s" % (w["distribution"], w["version"]) for w in r["lazy"] if w["variant"] == sys.argv[2]])' "$OUT/wheel.json" "$1"; }
SLIM_REQ=$(req nomagma)
MAGMA_REQ=$(req magma)
echo "slim: $SLIM_REQ  magma: $MAGMA_REQ" >> "$OUT/steps.log"

if [ -z "${INDEX_ONLY:-}" ]; then
step "pip install --target: default and slim"
run pip-default "${PIP[@]}" install --no-index --no-deps --find-links "$W/wheels" --target "$W/default" torch torch-cuda-linalg
run pip-slim "${PIP[@]}" install --no-index --no-deps --find-links "$W/wheels" --target "$W/slim" torch "$SLIM_REQ"
for t in default slim; do
  ln -s "$SITE/nvidia" "$W/$t/nvidia"
  echo "$t: $(owners "$W/$t" | tr '\n' ' ')" >> "$OUT/owners.txt"
done
du -sb "$W/default/torch" "$W/slim/torch" "$TORCH" > "$OUT/du.txt" 2>&1

step "plan on each target"
run plan-default "$BIN" plan "$W/default" --quiet
run plan-slim "$BIN" plan "$W/slim" --quiet

step "smoke: default vs slim target"
run smoke "$BIN" smoke --variant "magma=$W/default" --variant "nomagma=$W/slim" --python "$PY" --bench --deadline 300 --json --out "$OUT/smoke.json"
"$BIN" smoke --replay "$OUT/smoke.json" --all > "$OUT/smoke-table.txt" 2>&1

step "switch inside the slim --target directory (pip cannot uninstall there)"
run pip-switch "${PIP[@]}" install --no-index --no-deps --upgrade --find-links "$W/wheels" --target "$W/slim" "$MAGMA_REQ"
echo "slim after switch: $(owners "$W/slim" | tr '\n' ' ')" >> "$OUT/owners.txt"
run plan-after-switch "$BIN" plan "$W/slim" --quiet
fi

step "index: served on the loopback, installed from with pip"
I="$OUT/index"; mkdir -p "$I"
run index/index "$BIN" index "$W/wheels" --out "$W/index"
(cd "$W/index" && find . -type f -printf '%s %p\n' | sort -k2) > "$I/index-ls.txt"
"$BIN" index "$W/wheels" --out "$W/index" --json --quiet > "$I/index-again.json" 2>&1
cp "$W/index/torch/index.html" "$I/torch-page.html"; cp "$W/index/torch-cuda-linalg/index.json" "$I/lazy-page.json"
PORT=${PORT:-8731}
"$PY" -m http.server --bind 127.0.0.1 --directory "$W/index" "$PORT" > "$W/http.log" 2>&1 &
HTTP=$!
trap 'kill $HTTP 2>/dev/null' EXIT
sleep 2
URL="http://127.0.0.1:$PORT/"
sets=(default)
[ -n "$SLIM_REQ" ] && sets+=(slim)
for t in "${sets[@]}"; do
  V="$W/index-$t"
  # The machine's site-packages after the venv's own (a .pth line): torch's other dependencies
  # are found there; torch itself comes from the index (pip leaves the machine's torch alone).
  "$PY" -m venv --without-pip "$V"
  VSITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$SITE" > "$VSITE/zz-machine-site.pth"
  if [ "$t" = default ]; then reqs=(torch); else reqs=(torch "$SLIM_REQ"); fi
  run "index/pip-$t" "${PIP[@]}" --python "$V/bin/python" install --upgrade --index-url "$URL" "${reqs[@]}"
  run "index/pip-check-$t" "${PIP[@]}" --python "$V/bin/python" check
  ln -s "$SITE/nvidia" "$VSITE/nvidia"
  echo "$t: $(owners "$VSITE" | tr '\n' ' ')" >> "$I/owners.txt"
  run "index/plan-$t" "$BIN" plan "$VSITE" --quiet
done
run index/pip-download "${PIP[@]}" download --no-deps --index-url "$URL" -d "$W/dl" "torch==$(sed -n 's/^Version: //p' "$W/index/torch/"*.metadata | head -1)" torch-cuda-linalg
(cd "$W/dl" && sha256sum *.whl) > "$I/download-sha256.txt"
smoke_args=(--variant "magma=$W/index-default")
[ -n "$SLIM_REQ" ] && smoke_args+=(--variant "nomagma=$W/index-slim")
run index/smoke "$BIN" smoke "${smoke_args[@]}" --deadline 240 --json --out "$I/smoke.json"
"$BIN" smoke --replay "$I/smoke.json" > "$I/smoke-table.txt" 2>&1
grep -c '"GET ' "$W/http.log" > "$I/http-requests.txt"; grep '"GET ' "$W/http.log" | sed 's/^.*"GET /GET /' >> "$I/http-requests.txt"
step done
