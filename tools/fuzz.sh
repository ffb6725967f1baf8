#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake preset "fuzz": clang-14, ASan + UBSan,
# build/fuzz) and runs each for SECONDS on its seed corpus, as many at once as
# there are cores (FUZZ_JOBS overrides; each libFuzzer process uses one core).
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  per target; default 60. Longer runs: tools/fuzz.sh 600. (The suites
#            replay every target's seeds without libFuzzer: tests/fuzz/CMakeLists.txt.)
#   TARGET   run only these (e.g. pipeline_fuzzer); default: every target.
# Seeds: tests/fuzz/corpus/<target>/ plus the bad-input corpus
# tests/corpus/inputs/ (read only). What libFuzzer adds goes to
# build/fuzz/corpus/<target>/ and is reused by the next run; a crashing input
# is written to build/fuzz/artifacts/<target>/ (replay it: build/fuzz/tests/fuzz/<target> FILE);
# full logs are in build/fuzz/logs/. Prints one summary line per target with
# libFuzzer's final stats (executions, coverage: cov = edges, ft = features).
# Exit status: 0 when no target crashed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
build=build/fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz >&2

jobs="${FUZZ_JOBS:-$(nproc)}"
mkdir -p "$build/logs"

# run_target PATH: one libFuzzer campaign; its summary line goes to
# $build/logs/<name>.summary and its exit status to <name>.status.
run_target() {
  local target="$1" name work artifacts log status=0 execs cov
  name="$(basename "$target")"
  work="$build/corpus/$name"
  artifacts="$build/artifacts/$name/"
  log="$build/logs/$name.log"
  mkdir -p "$work" "$artifacts"
  "$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 \
    -artifact_prefix="$artifacts" "$work" "tests/fuzz/corpus/$name" tests/corpus/inputs \
    >"$log" 2>&1 || status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)"
  if [ "$status" -eq 0 ]; then
    echo "$name: ok, ${execs:-?} executions in ${seconds} s, $cov" >"$build/logs/$name.summary"
  else
    { echo "$name: FAILED (exit $status) after ${execs:-?} executions; see $log and $artifacts"
      grep -E '^(==[0-9]+==ERROR|SUMMARY|contract broken)' "$log" | head -5 || true
    } >"$build/logs/$name.summary"
  fi
  echo "$status" >"$build/logs/$name.status"
}

names=()
while read -r target; do
  [ -n "$target" ] || continue
  name="$(basename "$target")"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  rm -f "$build/logs/$name.summary" "$build/logs/$name.status"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$target" &
  names+=("$name")
done < "$build/tests/fuzz/fuzzers.txt"
wait

failed=0
for name in "${names[@]}"; do
  cat "$build/logs/$name.summary"
  [ "$(cat "$build/logs/$name.status")" = 0 ] || failed=1
done
exit "$failed"
