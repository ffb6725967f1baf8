#!/usr/bin/env bash
# Installs jitpipe's build and test dependencies from Debian's packages when
# any is missing. Nothing is downloaded from anywhere but the apt sources.
# (The optional tools/check-trace-engine.sh needs node, npm and the npm
# registry; it is not part of the tests and this script does not set it up.)
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
