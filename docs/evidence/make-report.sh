#!/usr/bin/env bash
# Regenerate docs/evidence/report.{html,md} from the committed inputs:
#   smoke   docs/evidence/nomagma-real/smoke-envs.json (real H200 run of the magma and the real
#           nomagma variant, with --bench; see nomagma-real/SOURCES.md)
#   plan    docs/evidence/report-inputs/plan.json, fatbin.json, pack.json, made from the torch 2.11
#           tree (fixtures/corpus/fetch --unpack torch-2.11.0-cu130) by the commands below when
#           --inputs is given (needs the corpus; pack takes about a minute on 2 cores).
# Usage: docs/evidence/make-report.sh [--inputs] [BIN]   (BIN defaults to target/release/splitpkg)
set -euo pipefail
cd "$(dirname "$0")/../.."
inputs=0
if [ "${1:-}" = --inputs ]; then inputs=1; shift; fi
bin=${1:-target/release/splitpkg}
E=docs/evidence
R=$E/report-inputs
if [ "$inputs" = 1 ]; then
  tree=$(fixtures/corpus/fetch --unpack torch-2.11.0-cu130 | awk '$1 == "tree" {print $3}')
  channel=$(mktemp -d)
  "$bin" -q plan "$tree" --json --out $R/plan.json
  "$bin" -q fatbin "$tree/lib" --json --out $R/fatbin.json
  # The unpacked tree has no package metadata: the version is given.
  "$bin" -q pack "$tree" --version 2.11.0 --out "$channel/channel" --json > $R/pack.json
  rm -rf "$channel"
fi
args=(--plan $R/plan.json --smoke $E/nomagma-real/smoke-envs.json --fatbin $R/fatbin.json --pack $R/pack.json)
"$bin" report "${args[@]}" --out $E/report.html
"$bin" report "${args[@]}" --format md --out $E/report.md
echo "wrote $E/report.html $E/report.md" >&2
