#!/usr/bin/env bash
# Installs jitpipe's build and test dependencies from Debian's packages when
# any is missing. Nothing is downloaded from anywhere but the apt sources
# (tools/check-trace-engine.sh later installs its one npm package, pinned by
# tools/trace_engine/package-lock.json, from the npm registry).
# Usage: tools/install-deps.sh
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libabsl-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  clang-14 libclang-rt-14-dev
)

missing=()
# node and npm run the DevTools trace-engine check; a machine may have them
# from outside Debian, so only their absence asks for Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
