#!/usr/bin/env bash
# Builds and runs every test: the release build with warnings as errors, the
# ASan+UBSan build, the TSan build of the threaded suites, and an install
# consumed by a separate CMake project.
# Usage: tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh

echo "== release build + tests (warnings are errors)"
cmake --workflow --preset default

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
cmake --workflow --preset asan

echo "== ThreadSanitizer build + the tests labelled threads (runtime, transports)"
cmake --workflow --preset tsan

echo "== install + find_package(jitpipe) consumer"
tools/check-install.sh build/default
