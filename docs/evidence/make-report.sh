#!/usr/bin/env bash
# Regenerate docs/evidence/report.{html,md} from the committed inputs:
#   smoke   docs/evidence/report-inputs/smoke.json: the real H200 run of the magma and the real
#           nomagma variant, with --bench, of 2026-12-01 (nomagma-real/smoke-envs.json as it was
#           then, with the 623,656-byte build; nomagma-real/ now holds the 2026-12-02 rerun with
#           the 672,664-byte build). The report's inputs stay one consistent set: pack.json below
#           carries that same first build.
#   plan    docs/evidence/report-inputs/plan.json, fatbin.json, pack.json, made from the torch 2.11
#           tree (fixtures/corpus/fetch --unpack torch-2.11.0-cu130) by the commands below when
#           --inputs is given (needs the corpus; pack takes about a minute on 2 cores). When the
#           real nomagma build is at third_party/build/libtorch_cuda_linalg.so
#           (tools/build-lazy-variant, nomagma-real/SOURCES.md), pack carries it as the nomagma
#           variant; otherwise the channel has the magma variant only and the report says so.
#           Each input records the command that made it and, through SOURCE_DATE_EPOCH (the
#           reproducible-builds convention; default: now), the date it was made.
# Usage: docs/evidence/make-report.sh [--inputs] [BIN]   (BIN defaults to target/release/splitpkg)
set -euo pipefail
cd "$(dirname "$0")/../.."
inputs=0
if [ "${1:-}" = --inputs ]; then inputs=1; shift; fi
bin=$(realpath "${1:-target/release/splitpkg}")
E=docs/evidence
R=$E/report-inputs
if [ "$inputs" = 1 ]; then
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date +%s)}
  tree=$(fixtures/corpus/fetch --unpack torch-2.11.0-cu130 | awk '$1 == "tree" {print $3}')
  nomagma=third_party/build/libtorch_cuda_linalg.so
  other=()
  [ -f "$nomagma" ] && other=(--lazy-variant "nomagma=$(realpath $nomagma)")
  "$bin" -q plan "$tree" --json --out $R/plan.json
  "$bin" -q fatbin "$tree/lib" --json --out $R/fatbin.json
  # The channel is a scratch directory: run pack inside it with a relative --out so the recorded
  # command and paths do not name a random temporary directory. The unpacked tree has no package
  # metadata: the version is given.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && "$bin" -q pack "$tree" --version 2.11.0 "${other[@]}" --out channel --json) > $R/pack.json
fi
args=(--plan $R/plan.json --smoke $R/smoke.json --fatbin $R/fatbin.json --pack $R/pack.json)
"$bin" report "${args[@]}" --out $E/report.html
"$bin" report "${args[@]}" --format md --out $E/report.md
echo "wrote $E/report.html $E/report.md" >&2
