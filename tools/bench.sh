#!/usr/bin/env bash
# Builds the Google Benchmark suites in release mode (build/bench), runs them
# and prints the README's performance table as markdown on stdout (the
# suites' own console output goes to stderr).
# Usage: tools/bench.sh [FILTER]
#   FILTER: a --benchmark_filter regular expression (default: every benchmark).
# Exit status: 0 when every target in the table is met, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

filter="${1:-.}"
build=build/bench
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJITPIPE_BUILD_BENCH=ON \
  -DJITPIPE_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target jitpipe_benchmarks -- -j2 >&2

results="$build/bench/results"
rm -rf "$results"
mkdir -p "$results"
while read -r suite; do
  [ -n "$suite" ] || continue
  name="$(basename "$suite")"
  echo "== $name" >&2
  "$suite" --benchmark_filter="$filter" --benchmark_out="$results/$name.json" \
    --benchmark_out_format=json >&2
done < "$build/bench/benchmarks.txt"

shopt -s nullglob
files=("$results"/*.json)
if [ ${#files[@]} -eq 0 ]; then
  echo "bench.sh: no benchmark matched \"$filter\"" >&2
  exit 1
fi
"$build/bench/bench_table" "${files[@]}"
