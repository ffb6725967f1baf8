#!/usr/bin/env bash
# Installs a built tree into a scratch prefix and builds + runs a separate
# project that uses find_package(jitpipe), and checks the installed CLI: it
# runs, and (in a build with MPI) the MPI world's module is where the CLI
# looks for it, <bindir>/../<libdir> (comm/world_plugin.h).
# Usage: tools/check-install.sh BUILD_DIR
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
"$prefix/bin/jitpipe" --version >/dev/null
if [ -f "$build/tools/libjitpipe_world_mpi.so" ]; then
  libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
  if [ ! -f "$prefix/$libdir/libjitpipe_world_mpi.so" ]; then
    echo "check-install: $prefix/$libdir/libjitpipe_world_mpi.so is missing" >&2
    exit 1
  fi
fi
