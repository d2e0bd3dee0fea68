#!/usr/bin/env bash
# Build the cargo-fuzz target on *stable* Rust (no cargo-fuzz, no nightly) with the same
# SanitizerCoverage instrumentation cargo-fuzz asks rustc for, seed a corpus with synthetic
# sections, and fuzz for a bounded time. No AddressSanitizer (that needs nightly); the reader has
# no unsafe code, so Rust's own bounds checks and overflow checks stand in for it.
#
# Usage: fuzz/run-stable.sh [TARGET] [SECONDS]   (targets: fatbin elf plan_json archive smoke_json; default
#        fatbin, 60 s; a lone number is the seconds for fatbin, as before)
# Env: FUZZ_CORPUS, FUZZ_ARTIFACTS (default fuzz/corpus/TARGET, fuzz/artifacts/TARGET), FUZZ_SEEDS
#      (a directory of extra seed files), FUZZ_RUNS (stop after N executions instead), CARGO_TARGET_DIR,
#      FUZZ_PROFILE (release, or dev), FUZZ_TIMEOUT (libFuzzer's per-input hang limit in seconds, default 10).
# The full test tier runs every target briefly (`cargo test --release --features full-tests`;
# tests/it/fatbin.rs, `fuzz_targets_build_and_run`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ ${1:-} =~ ^[0-9]+$ || -z ${1:-} ]]; then name=fatbin; secs=${1:-60}; else name=$1; secs=${2:-60}; fi
case $name in fatbin|elf|plan_json|archive|smoke_json) ;; *) echo "run-stable.sh: no fuzz target $name (fatbin elf plan_json archive smoke_json)" >&2; exit 2 ;; esac
target=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# --target keeps RUSTFLAGS off build scripts and proc macros, as cargo-fuzz does.
# FUZZ_PROFILE=dev builds unoptimised: half the build time, a tenth of the speed (the test suite's choice).
profile=${FUZZ_PROFILE:-release}
cargo build --profile "$profile" --manifest-path "$here/Cargo.toml" --target "$target" --bins
bin=${CARGO_TARGET_DIR:-$here/target}/$target/$([[ $profile == dev ]] && echo debug || echo "$profile")/$name
corpus=${FUZZ_CORPUS:-$here/corpus/$name}
artifacts=${FUZZ_ARTIFACTS:-$here/artifacts/$name}
mkdir -p "$corpus" "$artifacts"
# Seeds: for fatbin, synthetic sections bare and inside a minimal ELF (fuzz/seeds/fatbin, written by
# `cargo test --release --test it -- --ignored fatbin::write_fuzz_seeds`); for the others, FUZZ_SEEDS
# (the test suite passes fixture libraries, plans and archives built with gcc).
if [[ -d $here/seeds/$name ]]; then cp "$here"/seeds/"$name"/* "$corpus"/; fi
# Inputs that once crashed a target (fuzz/regressions/TARGET/): every run starts by replaying them.
if [[ -d $here/regressions/$name ]]; then cp "$here"/regressions/"$name"/* "$corpus"/; fi
if [[ -n ${FUZZ_SEEDS:-} ]]; then cp "$FUZZ_SEEDS"/* "$corpus"/; fi
limit=(-max_total_time="$secs")
[[ -n ${FUZZ_RUNS:-} ]] && limit=(-runs="$FUZZ_RUNS")
"$bin" "$corpus" "${limit[@]}" -max_len=65536 -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-10}" \
  -artifact_prefix="$artifacts/" -print_final_stats=1
