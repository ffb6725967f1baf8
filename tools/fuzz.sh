#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake preset "fuzz": clang-14, ASan + UBSan,
# build/fuzz) and runs each for SECONDS on its seed corpus, one after another.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  per target; default 60 (what CI runs). Longer runs: tools/fuzz.sh 600
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

failed=0
while read -r target; do
  [ -n "$target" ] || continue
  name="$(basename "$target")"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  work="$build/corpus/$name"
  artifacts="$build/artifacts/$name/"
  log="$build/logs/$name.log"
  mkdir -p "$work" "$artifacts" "$build/logs"
  status=0
  "$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 \
    -artifact_prefix="$artifacts" "$work" "tests/fuzz/corpus/$name" tests/corpus/inputs \
    >"$log" 2>&1 || status=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)"
  if [ "$status" -eq 0 ]; then
    echo "$name: ok, ${execs:-?} executions in ${seconds} s, $cov"
  else
    failed=1
    echo "$name: FAILED (exit $status) after ${execs:-?} executions; see $log and $artifacts"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|contract broken)' "$log" | head -5 || true
  fi
done < "$build/tests/fuzz/fuzzers.txt"
exit "$failed"
