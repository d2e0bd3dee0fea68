#!/usr/bin/env bash
# The variant contract (issue 23, item 1) on the real torch wheels, no GPU, no compiler of PyTorch:
#
#     bash docs/evidence/variant-contract/run.sh        # from the repository root, after cargo build --release
#
# For torch 2.11.0+cu130 and 1.13.1+cu117 (fixtures/corpus/fetch --unpack): the contract `emit`
# writes, then `verify-variant` on
#   stock-as-magma    the wheel's libtorch_cuda_linalg.so as what it is (must pass);
#   stock-as-nomagma  the same file offered as nomagma (refused: MAGMA inside);
#   stub              a 15 KB gcc library, SONAME libtorch_cuda_linalg.so, one exported function
#                     at_cuda_getCurrentCUDASolverDnHandle (refused: no exports, no registrations);
#   derived-no-solver a copy of the stock file whose at::cuda::solver exports (CUDASolver.cpp) are
#                     made undefined in .dynsym — DERIVED, standing in for a build that left that
#                     unit out (refused: the stock file's exports missing).
# Writes $OUT (default docs/evidence/variant-contract/out): one .txt per run, contract-*.json.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/evidence/variant-contract/out}
BIN=${SPLITPKG:-$PWD/target/release/splitpkg}
W=${WORK:-/tmp/splitpkg-variant-contract}   # a fixed path, so the outputs name the same files each run
rm -rf "$W"; mkdir -p "$W"
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUT"
printf 'void *at_cuda_getCurrentCUDASolverDnHandle(void) { return 0; }\n' > "$W/stub.c"
mkdir -p "$W/stub"
gcc -shared -fPIC -O2 -Wl,-soname,libtorch_cuda_linalg.so -o "$W/stub/libtorch_cuda_linalg.so" "$W/stub.c"

# Copy $1 to $2 with every defined dynamic symbol whose name starts with $3 made undefined.
undefine() {
  python3 - "$@" <<'PY'
import struct, sys
src, dst, prefix = sys.argv[1], sys.argv[2], sys.argv[3].encode()
b = bytearray(open(src, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum = struct.unpack_from("<HH", b, 0x3a)
secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
dynsym = next(s for s in secs if s[1] == 11)  # SHT_DYNSYM
strtab = secs[dynsym[6]]
n = 0
for off in range(dynsym[4], dynsym[4] + dynsym[5], dynsym[9]):
    name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", b, off)
    s = strtab[4] + name
    if shndx != 0 and b[s:b.index(0, s)].startswith(prefix):
        struct.pack_into("<HQ", b, off + 6, 0, 0)
        n += 1
open(dst, "wb").write(b)
print(f"{n} exports starting {prefix.decode()} made undefined")
PY
}

run() { # name, then the command
  local name=$1; shift
  { echo "\$ ${*/#$PWD\//}"; "$@"; echo "exit code $?"; } > "$OUT/$name.txt" 2>&1
}

for spec in torch-2.11.0-cu130:2.11.0 torch-1.13.1-cu117:1.13.1; do
  name=${spec%%:*}; version=${spec#*:}
  tree=$(fixtures/corpus/fetch --unpack "$name" | awk '$1 == "tree" {print $3}')
  stock=$tree/lib/libtorch_cuda_linalg.so
  "$BIN" emit "$tree" --version "$version" --out "$W/$name" --quiet >/dev/null
  c=$W/$name/rattler-build/contract.json
  cp "$c" "$OUT/contract-$name.json"
  mkdir -p "$W/$name/derived"
  undefine "$stock" "$W/$name/derived/libtorch_cuda_linalg.so" _ZN2at4cuda6solver > "$OUT/$name-derived-no-solver.how.txt"
  run "$name-stock-as-magma" "$BIN" verify-variant "$stock" --variant magma --contract "$c"
  run "$name-stock-as-nomagma" "$BIN" verify-variant "$stock" --variant nomagma --contract "$c"
  run "$name-stub" "$BIN" verify-variant "$W/stub/libtorch_cuda_linalg.so" --variant nomagma --contract "$c"
  run "$name-derived-no-solver" "$BIN" verify-variant "$W/$name/derived/libtorch_cuda_linalg.so" --variant magma --contract "$c"
done
ls -l "$W/stub/libtorch_cuda_linalg.so" | awk '{print "stub size", $5, "bytes"}' > "$OUT/stub-size.txt"
