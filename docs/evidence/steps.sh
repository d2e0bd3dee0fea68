# Shared by the GPU evidence scripts (nomagma-real/run.sh, wheel-gpu/run.sh): source it after
# setting OUT (where the outputs go) and W (the work dir, shown as $W in recorded commands).

# step TEXT: a timestamped heading on stderr and in $OUT/steps.log.
step() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/steps.log" >&2; }

# run NAME CMD...: stdout+stderr to $OUT/NAME.txt, the command and its exit code appended; never
# fails, so one failing step does not hide the evidence of the next.
run() {
  local name=$1; shift
  local start; start=$(date +%s%N)
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '\n$ %s\nexit code %d after %d.%03d s\n' "$(printf '%q ' "$@" | sed "s#$W#\$W#g; s#$PWD/##g")" "$rc" $((ms / 1000)) $((ms % 1000)) >> "$OUT/$name.txt"
  echo "   $name: exit $rc" | tee -a "$OUT/steps.log" >&2
  return 0
}
