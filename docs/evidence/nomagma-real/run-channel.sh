#!/usr/bin/env bash
# The real nomagma package in a channel with every solve scenario applicable, on the Rust machine
# (no GPU needed), from the repository root:
#
#     bash docs/evidence/nomagma-real/run-channel.sh
#
# The GPU run (run.sh) packs the installed torch alone, so scenarios (d) version skew and (e)
# flipped preference have nothing to show there. Here the channel gets a second real release
# (the torch 1.13.1 wheel, magma only: no nomagma build of it exists) and a second channel packed
# with --prefer nomagma, so (a)-(e) all apply; both environments are installed, reported, and the
# slim one is switched to magma and back with rattler's installer.
#
# Needs target/release/splitpkg, the corpus wheels (fixtures/corpus/fetch) and the real
# MAGMA-free library (third_party/build/libtorch_cuda_linalg.so, from tools/build-lazy-variant).
# Writes to $OUT (default docs/evidence/nomagma-real).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-docs/evidence/nomagma-real}
BIN=${SPLITPKG:-$PWD/target/release/splitpkg}
NOMAGMA=$(realpath "${NOMAGMA:-third_party/build/libtorch_cuda_linalg.so}")
W=${WORK:-/tmp/splitpkg-channel-real}
rm -rf "$W"; mkdir -p "$W"
wheel() { bash fixtures/corpus/fetch "$1" | awk '$1 == "wheel" {print $3}'; }
W211=$(wheel torch-2.11.0-cu130); W113=$(wheel torch-1.13.1-cu117)
run() {
  local name=$1; shift
  local start; start=$(date +%s%N)
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$? ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '\n$ %s\nexit code %d after %d.%03d s (%s, %s cores)\n' "$(printf '%q ' "$@" | sed "s#$W#\$W#g; s#$PWD/##g; s#$HOME/.cache/splitpkg-corpus/##g")" \
    "$rc" $((ms / 1000)) $((ms % 1000)) "$(date -u +%Y-%m-%d)" "$(nproc)" >> "$OUT/$name.txt"
  echo "$name: exit $rc" >&2
}
run channel-pack-2.11 "$BIN" pack "$W211" --lazy-variant "nomagma=$NOMAGMA" --out "$W/channel"
run channel-pack-1.13 "$BIN" pack "$W113" --out "$W/channel"
run channel-pack-flipped "$BIN" pack "$W211" --lazy-variant "nomagma=$NOMAGMA" --prefer nomagma --out "$W/flipped"
run channel-solve "$BIN" solve "$W/channel" --prefer-channel "$W/flipped" --install "$W/envs"
run channel-env-default "$BIN" env "$W/envs/default"
run channel-env-slim "$BIN" env "$W/envs/slim" --svg "$OUT/channel-env-slim.svg"
run channel-switch-to-magma "$BIN" env "$W/envs/slim" --switch
run channel-switch-back "$BIN" env "$W/envs/slim" --switch
run channel-plan-slim "$BIN" plan "$W/envs/slim" --quiet
