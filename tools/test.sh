#!/usr/bin/env bash
# Builds and runs every test: the release build with warnings as errors and
# its threaded, GPU-host and MPI suites, the demo end to end, its traces in
# the DevTools trace engine, every suite under ASan+UBSan, the threaded
# suites under TSan (the fuzz targets, replaying their seeds and the
# bad-input corpus, are among the ASan suites), and an install consumed by a
# separate CMake project. Fuzzing itself (clang, libFuzzer) is
# tools/fuzz.sh: a search whose length decides what it finds is a campaign,
# not a gate.
# Usage: tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# stage TITLE COMMAND...: runs one stage and says how long it took.
stage() {
  local title="$1" start=$SECONDS
  shift
  echo "== $title"
  "$@"
  echo "== $title: $((SECONDS - start)) s"
}

stage "dependencies (Debian packages)" tools/install-deps.sh

# The default build, with one ctest entry per test binary rather than per
# case (preset "ci", same build/default): ~4000 process starts were ~117 of
# the stage's CPU-seconds. It makes only the suites labelled threads, gpu, modules or process
# and the MPI jobs; every suite runs under ASan + UBSan below
# (tests/CMakeLists.txt says why that split).
stage "release build + the threaded, GPU-host and MPI suites (warnings are errors)" \
  cmake --workflow --preset ci

demo() { tools/demo.sh build/ci-demo >/dev/null; }
stage "demo end to end" demo

# The traces the CLI writes are checked by the project's own rule checker in
# the suites (traces/trace_checker.h); here the demo's planned, simulated and
# replayed traces are loaded by the Chrome DevTools trace engine itself (the
# npm package pinned by tools/trace_engine/package-lock.json): each must parse
# with send -> receive flows and memory counters. The demo's model gives
# times, so its planned trace is the simulated step; the same plan under a
# model of sizes only is drawn over program index (planned_index).
trace_engine() {
  (cd tools/trace_engine && npm ci --no-audit --no-fund --loglevel=error)
  build/default/tools/jitpipe plan build/ci-demo/lowered.json \
    --model tests/testdata/traces/sizes_only_model.json \
    --trace build/ci-demo/planned_index.trace.json >/dev/null
  for trace in planned planned_index simulated replay; do
    tools/check-trace-engine.sh --flows --counters "build/ci-demo/$trace.trace.json"
  done
}
stage "DevTools trace engine on the demo's traces" trace_engine

stage "AddressSanitizer + UndefinedBehaviorSanitizer build + every suite" \
  cmake --workflow --preset asan

stage "ThreadSanitizer build + the tests labelled threads (runtime, transports, planning)" \
  cmake --workflow --preset tsan

stage "install + find_package(jitpipe) consumer" tools/check-install.sh build/default

echo "== all stages passed in $SECONDS s"
