#!/usr/bin/env bash
# Build the cargo-fuzz target on *stable* Rust (no cargo-fuzz, no nightly) with the same
# SanitizerCoverage instrumentation cargo-fuzz asks rustc for, seed a corpus with synthetic
# sections, and fuzz for a bounded time. No AddressSanitizer (that needs nightly); the reader has
# no unsafe code, so Rust's own bounds checks and overflow checks stand in for it.
#
# Usage: fuzz/run-stable.sh [SECONDS]   (default 60)
# Env: FUZZ_CORPUS, FUZZ_ARTIFACTS (default fuzz/corpus/fatbin, fuzz/artifacts/fatbin), CARGO_TARGET_DIR,
#      FUZZ_PROFILE (release, or dev).
# The test suite runs it for 20 s (tests/fatbin.rs, `fuzz_target_builds_and_runs`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-60}
target=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# --target keeps RUSTFLAGS off build scripts and proc macros, as cargo-fuzz does.
# FUZZ_PROFILE=dev builds unoptimised: half the build time, a tenth of the speed (the test suite's choice).
profile=${FUZZ_PROFILE:-release}
cargo build --profile "$profile" --manifest-path "$here/Cargo.toml" --target "$target" --bin fatbin
bin=${CARGO_TARGET_DIR:-$here/target}/$target/$([[ $profile == dev ]] && echo debug || echo "$profile")/fatbin
corpus=${FUZZ_CORPUS:-$here/corpus/fatbin}
artifacts=${FUZZ_ARTIFACTS:-$here/artifacts/fatbin}
mkdir -p "$corpus" "$artifacts"
# Seeds: synthetic sections, bare and inside a minimal ELF (fuzz/seeds/, written by
# `cargo test --release --test fatbin -- --ignored write_fuzz_seeds`).
cp "$here"/seeds/fatbin/* "$corpus"/
"$bin" "$corpus" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts/" -print_final_stats=1
