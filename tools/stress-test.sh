#!/usr/bin/env bash
# Runs the tests with one ctest label N times in a row in an already built
# preset, and stops at the first failing round: the check that a fix for a
# flaky test holds (a suite that fails sometimes is a failing suite). The
# preset's test environment applies (ASAN_OPTIONS, TSAN_OPTIONS).
#
# Usage: tools/stress-test.sh LABEL N [PRESET]   (PRESET: asan by default)
# Example: tools/stress-test.sh mpi 20
# Exit status: 0 when all N rounds passed, 1 at the first failing round
# (its ctest output is kept in build/PRESET/stress-LABEL-ROUND.log), 2 on
# usage errors.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 || $# -gt 3 || ! "$2" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 LABEL N [PRESET]" >&2
  exit 2
fi
label="$1" rounds="$2" preset="${3:-asan}"
if [[ ! -f "build/$preset/CTestTestfile.cmake" ]]; then
  echo "$0: build/$preset is not built (cmake --workflow --preset $preset)" >&2
  exit 2
fi

start=$SECONDS
for ((round = 1; round <= rounds; ++round)); do
  log="build/$preset/stress-$label-$round.log"
  if ctest --preset "$preset" -L "^${label}\$" --no-tests=error >"$log" 2>&1; then
    echo "round $round/$rounds: $(grep -E 'tests passed' "$log") ($((SECONDS - start)) s so far)"
    rm -f "$log"
  else
    echo "round $round/$rounds FAILED ($log):"
    grep -E 'Failed|\*\*\*|Exception|tests passed' "$log" || true
    exit 1
  fi
done
echo "$label: $rounds/$rounds rounds passed in $((SECONDS - start)) s"
