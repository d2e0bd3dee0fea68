#!/usr/bin/env bash
# Regenerate the evidence in this folder (by hand; nothing here runs in CI): what the reference
# reader, dlopen-notes.py of systemd/package-notes v0.20 (commit f61031486a821df877b8b589fca5e29b67fe8247,
# with pyelftools from PyPI), and readelf read back from libraries `splitpkg note` wrote, and the
# real-world check on a PyPI wheel whose SDL3 libraries carry .note.dlopen. Third-party files live
# in $CACHE, never in the repository.
#
# Usage: docs/evidence/dlopen-note/run.sh   (from the repository root, after cargo build --release)
# Needs: $CACHE/dlopen-notes.py (git show v0.20:dlopen-notes.py of systemd/package-notes),
#        $CACHE/venv with pyelftools, gcc, readelf.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
CACHE=${CACHE:-$HOME/.cache/splitpkg-dlopen-note}
dlopen-notes.py() { "$CACHE/venv/bin/python" "$CACHE/dlopen-notes.py" "$@"; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bash "$repo/fixtures/build.sh" "$work/fx" >/dev/null
cd "$work"
# readelf before binutils 2.43 does not know the note type: it prints the note and exits 1.
show() { echo "\$ $*"; { "$@" 2>&1 || echo "(exit status $?)"; } | sed "s|$work/||g; s|$CACHE/||g"; echo; }
B=splitpkg; PATH=$repo/target/release:$PATH

{
echo "# splitpkg note on gcc-built fixtures, read back by readelf and dlopen-notes.py v0.20"
echo
cp fx/conda-like/lib/libtorch_cuda.so libtorch_cuda.so
show "$B" note libtorch_cuda.so --out libtorch_cuda.noted.so --soname libtorch_cuda_linalg.so --feature linalg --priority required --description "GPU linear algebra"
show readelf -n -W libtorch_cuda.noted.so
show dlopen-notes.py libtorch_cuda.noted.so
show dlopen-notes.py -s libtorch_cuda.noted.so
show dlopen-notes.py --rpm-requires linalg libtorch_cuda.noted.so
echo "# Merging into a note made as systemd's ELF_NOTE_DLOPEN makes it (fixtures/src/dlopen_note.h)"
echo
cp fx/dlopen-note/lib/libtorch_cuda.so libtorch_cuda.macro.so
show dlopen-notes.py libtorch_cuda.macro.so
show "$B" note libtorch_cuda.macro.so --out libtorch_cuda.merged.so --soname libcupti.so.12 --soname libcupti.so --feature profiler --priority suggested
show readelf -n -W libtorch_cuda.merged.so
show dlopen-notes.py libtorch_cuda.merged.so
show dlopen-notes.py -s libtorch_cuda.merged.so
} > "$here/fixtures.txt"

# Real world: luma-engine 0.2.5 (PyPI) ships SDL3 3.x libraries built with SDL's dlopen notes.
wheel=$(ls "$CACHE"/wheels/luma_engine-0.2.5-py3-none-any.whl)
mkdir luma && (cd luma && unzip -q "$wheel" 'luma/lib/*.so')
{
echo "# Real-world check: luma-engine 0.2.5 from PyPI (pip download --no-deps luma-engine==0.2.5),"
echo "# whose luma/lib/SDL3.so and SDL3_mixer.so carry .note.dlopen (SDL3_image.so, SDL3_ttf.so do not)"
echo
for f in luma/luma/lib/*.so; do echo "$(basename "$f"): sha256 $(sha256sum "$f" | cut -c1-16)…"; done; echo
show dlopen-notes.py -s luma/luma/lib/SDL3.so luma/luma/lib/SDL3_mixer.so
show "$B" inspect luma/luma/lib -q
echo "# splitpkg's entries, as JSON (compare with dlopen-notes.py -s above)"
"$B" inspect luma/luma/lib --json -q | python3 -c '
import json, sys
for f in json.load(sys.stdin)["files"]:
    for n in f["elf"].get("dlopen_notes", []):
        print(f["path"], " ".join(n["soname"]), n["priority"], n.get("feature", ""))
    for p in f["elf"].get("dlopen_note_problems", []):
        print(f["path"], "PROBLEM", p)'
echo
echo "# Merging into SDL3's own note"
echo
show "$B" note luma/luma/lib/SDL3.so --out SDL3.noted.so --soname libtorch_cuda_linalg.so --feature linalg --priority required
show readelf -n -W SDL3.noted.so
show dlopen-notes.py -s SDL3.noted.so
} > "$here/real-world.txt"
echo "wrote $here/fixtures.txt $here/real-world.txt"
