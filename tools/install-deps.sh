#!/usr/bin/env bash
# Installs jitpipe's build and test dependencies from Debian's packages when
# any is missing: the toolchain and libraries, and node + npm for the DevTools
# trace engine check (tools/check-trace-engine.sh, whose one npm package comes
# from the npm registry, pinned by tools/trace_engine/package-lock.json).
# Usage: tools/install-deps.sh
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libabsl-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  libopenblas-dev
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm: Debian's nodejs and npm packages, unless some node with npm
# is already on the PATH (a nodejs package from elsewhere bundles npm, and
# Debian's npm would conflict with it).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
