#!/usr/bin/env bash
# Header walk of `splitpkg fatbin` against `cuobjdump --list-elf` on the same libraries.
#
# For each library: the in-process header-walk time (`--time`: section lookup, walk and summary),
# and the whole `splitpkg fatbin FILE` process, both as the median of RUNS runs after one warm-up;
# then, when cuobjdump is on PATH, `cuobjdump --list-elf FILE` (median of CUOBJDUMP_RUNS), the
# ratio, and whether both count the same ELF entries.
#
# Usage: bench/fatbin.sh [LIB...]
#   default LIBs: libtorch_cuda.so and libtorch_cuda_linalg.so of torch 2.11 (fixtures/corpus/fetch)
# Env: RUNS (11), CUOBJDUMP_RUNS (3), SPLITPKG (binary; default target/release/splitpkg, built if absent)
# Results are printed and appended to bench/results/fatbin.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-11}
cruns=${CUOBJDUMP_RUNS:-3}
bin=${SPLITPKG:-target/release/splitpkg}
[[ -x $bin ]] || cargo build --release --quiet
if (($# == 0)); then
  tree=$(fixtures/corpus/fetch --unpack torch-2.11.0-cu130 | awk '$1 == "tree" { print $3 }')
  set -- "$tree/lib/libtorch_cuda.so" "$tree/lib/libtorch_cuda_linalg.so"
fi
now() { date +%s.%N; }
ms() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", (e - s) * 1000 }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mkdir -p bench/results
out=bench/results/fatbin.txt
{
  echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) cores; splitpkg $("$bin" --version | awk '{ print $2 }'); RUNS=$runs"
  for lib in "$@"; do
    "$bin" fatbin "$lib" --quiet > /dev/null # warm the page cache
    walks=() walls=()
    for ((i = 0; i < runs; i++)); do
      s=$(now)
      w=$("$bin" fatbin "$lib" --time --quiet 2>&1 > /dev/null | awk '/header walk/ { print $4; exit }')
      e=$(now)
      walks+=("$w")
      walls+=("$(ms "$s" "$e")")
    done
    walk=$(printf '%s\n' "${walks[@]}" | median)
    wall=$(printf '%s\n' "${walls[@]}" | median)
    entries=$("$bin" fatbin "$lib" --json --quiet | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(l["fatbin"]["elf"] for l in d["libraries"]))')
    line="$(basename "$lib"): splitpkg header walk $walk ms, process $wall ms (median of $runs), $entries ELF entries"
    if command -v cuobjdump > /dev/null; then
      times=()
      for ((i = 0; i < cruns; i++)); do
        s=$(now)
        n=$(cuobjdump --list-elf "$lib" | grep -c 'ELF file' || true)
        e=$(now)
        times+=("$(ms "$s" "$e")")
      done
      cu=$(printf '%s\n' "${times[@]}" | median)
      ratio=$(awk -v a="$cu" -v b="$wall" 'BEGIN { printf "%.0f", a / b }')
      same=$([[ $n == "$entries" ]] && echo "same count" || echo "COUNT DIFFERS: cuobjdump $n")
      line+="; cuobjdump --list-elf $cu ms (median of $cruns), ×$ratio slower, $same"
    else
      line+="; cuobjdump not on PATH"
    fi
    echo "$line"
  done
} | tee -a "$out"
