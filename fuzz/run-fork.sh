#!/usr/bin/env bash
# Long libFuzzer campaigns on a many-core machine, several targets at once in fork mode — how the
# ≥10 M-execution runs in docs/security.md were made (on the device machine, which has no Rust:
# build here with fuzz/run-stable.sh, strip, carry the binaries and seeds there).
#
# Usage: fuzz/run-fork.sh BINDIR SEEDDIR SECONDS TARGET:WORKERS [TARGET:WORKERS ...]
#   BINDIR/TARGET is the fuzz binary, SEEDDIR/TARGET/ its seeds. The corpus lives in
#   ${FUZZ_WORK:-/tmp/splitpkg-fuzz}/TARGET/corpus and is resumed when the script runs again (the
#   counts of a resumed campaign add up). Logs and crash artifacts go to ${OUT:-.}/TARGET.log and
#   ${OUT:-.}/TARGET-artifacts/; the last status line of each target is printed at the end.
set -u
bins=$(realpath "$1"); seeds=$(realpath "$2"); secs=$3; shift 3
work=${FUZZ_WORK:-/tmp/splitpkg-fuzz}; out=$(realpath "${OUT:-.}")
echo "$(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p')"
pids=()
for spec in "$@"; do
  t=${spec%%:*}; n=${spec#*:}
  mkdir -p "$work/$t/corpus" "$out/$t-artifacts"
  echo "$t: $n workers, resuming from $(find "$work/$t/corpus" -type f | wc -l) corpus files"
  cp "$seeds/$t"/* "$work/$t/corpus/"
  # One thread per worker: the archive harness reads through rayon, which would oversubscribe.
  ( cd "$work/$t" && RAYON_NUM_THREADS=1 "$bins/$t" "$work/$t/corpus" -fork="$n" -max_total_time="$secs" \
      -max_len=65536 -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$out/$t-artifacts/" -print_final_stats=1 \
      > "$out/$t.log" 2>&1; echo "exit $?" >> "$out/$t.log" ) &
  pids+=($!)
done
wait "${pids[@]}"
for spec in "$@"; do
  t=${spec%%:*}
  echo "== $t: $(grep -E '^#[0-9]+' "$out/$t.log" | tail -1)"
  tail -1 "$out/$t.log"
  ls "$out/$t-artifacts"
done
