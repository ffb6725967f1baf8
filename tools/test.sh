#!/usr/bin/env bash
# Builds and runs every test: the release build with warnings as errors, the
# demo end to end, the ASan+UBSan build, the TSan build of the threaded
# suites, an install consumed by a separate CMake project, and every
# libFuzzer target for 60 s.
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

stage "release build + tests (warnings are errors)" cmake --workflow --preset default

# The traces the CLI writes are checked by the project's own rule checker in
# the suites (traces/trace_checker.h). tools/check-trace-engine.sh loads one in
# the DevTools engine too, but that needs an npm package from the npm
# registry, and CI installs nothing from outside Debian's apt sources.
demo() { tools/demo.sh build/ci-demo >/dev/null; }
stage "demo end to end" demo

stage "AddressSanitizer + UndefinedBehaviorSanitizer build + tests" \
  cmake --workflow --preset asan

stage "ThreadSanitizer build + the tests labelled threads (runtime, transports, planning)" \
  cmake --workflow --preset tsan

stage "install + find_package(jitpipe) consumer" tools/check-install.sh build/default

stage "libFuzzer targets, 60 s each (longer: tools/fuzz.sh 600)" tools/fuzz.sh 60

echo "== all stages passed in $SECONDS s"
