#!/usr/bin/env bash
# Builds and runs every test: the release build with warnings as errors, the
# demo end to end with its traces loaded by the Chrome DevTools trace engine,
# the ASan+UBSan build, the TSan build of the threaded suites, an install
# consumed by a separate CMake project, and every libFuzzer target for 60 s.
# Usage: tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh

echo "== release build + tests (warnings are errors)"
cmake --workflow --preset default

echo "== demo end to end; its traces must load in the Chrome DevTools trace engine"
demo=build/ci-demo
tools/demo.sh "$demo" >/dev/null
build/default/tools/jitpipe plan "$demo/lowered.json" --model docs/examples/model.json \
  --trace "$demo/plan.trace.json" >/dev/null
for trace in simulated.trace.json replay.trace.json plan.trace.json; do
  tools/check-trace-engine.sh "$demo/$trace"
done

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
cmake --workflow --preset asan

echo "== ThreadSanitizer build + the tests labelled threads (runtime, transports)"
cmake --workflow --preset tsan

echo "== install + find_package(jitpipe) consumer"
tools/check-install.sh build/default

echo "== libFuzzer targets, 60 s each (longer: tools/fuzz.sh 600)"
tools/fuzz.sh 60
