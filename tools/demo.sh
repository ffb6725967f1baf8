#!/usr/bin/env bash
# The main job, end to end on the embedded default: set up, build, then take
# a schedule through jitpipe. Usage: tools/demo.sh [OUTPUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/demo}"

tools/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target jitpipe
jp=build/default/tools/jitpipe
mkdir -p "$out"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# torchtitan's 4-rank zero-bubble schedule (compute-only, I/W split), as
# PyTorch users write it.
step "$jp" validate docs/examples/torchtitan_4-rank.csv
step "$jp" show docs/examples/torchtitan_4-rank.csv
step "$jp" convert docs/examples/torchtitan_4-rank.csv -o "$out/torchtitan_4-rank.json"
echo
echo "demo: wrote $out/torchtitan_4-rank.json"
