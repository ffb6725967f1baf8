#!/usr/bin/env bash
# The main job, end to end on the embedded default (threads in one process):
# set up, build, then take an interleaved 1F1B schedule from generation to a
# real replay, writing traces and a diagram. Usage: tools/demo.sh [OUTPUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/demo}"

tools/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target jitpipe
jp=build/default/tools/jitpipe
model=docs/examples/model.json
mkdir -p "$out"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# 1. A schedule: interleaved 1F1B, 4 ranks x 2 stages, 8 microbatches
#    (PyTorch's Interleaved1F1B order, bubbles included).
step "$jp" generate --schedule interleaved-1f1b --pp 4 --stages-per-rank 2 --microbatches 8 \
    -o "$out/schedule.json"
step "$jp" validate "$out/schedule.json"
printf '\n\033[1m$ %s\033[0m\n' "$jp show $out/schedule.json | head -12"
"$jp" show "$out/schedule.json" | head -12

# 2. Lower it: sends, just-in-time receives, gradient reductions.
step "$jp" lower "$out/schedule.json" --reduce-grad -o "$out/lowered.json"

# 3. Memory: just-in-time buffers against PyTorch's eager ones, with the arena.
step "$jp" plan "$out/lowered.json" --model "$model" --trace "$out/planned.trace.json"

# 4. Time: a simulated step under the model, as a Chrome trace.
step "$jp" simulate "$out/lowered.json" --model "$model" --trace "$out/simulated.trace.json"

# 5. Every schedule for these parameters, side by side, and a diagram of ours.
step "$jp" compare --pp 4 --microbatches 8 --stages-per-rank 2 --model "$model"
step "$jp" render "$out/schedule.json" --model "$model" -o "$out/schedule.svg"

# 6. For real: 4 pipeline ranks x 2 data-parallel replicas as threads, an MLP
#    split over the 8 stages, checked against an unpipelined reference.
step "$jp" replay "$out/schedule.json" --backend inproc --stage mlp --dp 2 --steps 3 \
    --trace "$out/replay.trace.json"

echo
echo "demo: wrote $out/ (schedule.json, lowered.json, planned.trace.json,"
echo "      simulated.trace.json, schedule.svg, replay.trace.json); open the traces in https://ui.perfetto.dev or chrome://tracing"
