#!/usr/bin/env bash
# Installs a built tree into a scratch prefix and builds + runs a separate
# project that uses find_package(jitpipe). Usage: tools/check-install.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/default}"
prefix="$build/install-check/prefix"
consumer="$build/install-check/consumer"
rm -rf "$build/install-check"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S tests/install_consumer -B "$consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PWD/$prefix" >/dev/null
cmake --build "$consumer" >/dev/null
"$consumer/consumer"
