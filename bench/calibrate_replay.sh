#!/usr/bin/env bash
# Issue 39 part 5: the in-process runtime against the simulator under a
# calibrated model, where compute dominates. Per schedule and round:
#
#   1. replay the fp32 reference transformer (--stage transformer) for
#      STEPS steps (--json): each stage's host time per call, steps after
#      the first (runtime/stage_call_times.h);
#   2. `jitpipe model --calibrate` those times into the layers' F, I, W
#      (planning/calibrate.h) and simulate the schedule under that model;
#   3. replay again (a fresh run) and compare its step with the simulated one.
#
# Columns: the simulated step; the measured step of the calibrating run and
# of the fresh run (median of the steps after the first); each over the
# simulated one. The calibrating run's ratio is the simulator's error given
# the call times (what the schedule's waits, transfers and buffers add);
# the fresh run's adds the drift of the machine's speed between runs;
# each rank's compute per step, simulated and measured (the sum of its stage
# calls) in both runs: the calibrating run's differs from the simulated by
# the fit's error, the fresh run's also by the drift; and what the
# calibrating run's step spends beyond the simulated one.
# Target: fresh / simulated within 10% (not checked: the machine is shared).
#
# Shape: 4 decoder layers, hidden 512, 8 heads, 4 K/V heads, ffn 1408, seq
# 256, 2 sequences per microbatch, vocabulary 2048, fp32 (activations 1 MiB
# per microbatch); pp 2 (two rank threads; the stage's OpenBLAS runs one
# thread per rank), 4 microbatches.
#
# Usage: bench/calibrate_replay.sh [PATH/TO/jitpipe] [ROUNDS] [STEPS]
# Needs jq and a build with OpenBLAS. About two minutes per round on two shared cores.
set -euo pipefail
cd "$(dirname "$0")/.."
jp="${1:-build/default/tools/jitpipe}"
rounds="${2:-3}"
steps="${3:-4}"
shape=(--layers 4 --hidden 512 --heads 8 --kv-heads 4 --ffn 1408 --seq 256
       --microbatch-size 2 --vocab 2048 --dtype fp32 --swiglu --rmsnorm)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$jp" model "${shape[@]}" --tflops 1 -o "$tmp/flops.json" >/dev/null

# Median of the steps after the first of a replay report.
step_of() { jq '[.step_us_all[1:][]] | sort | .[(length / 2 | floor)]' "$1"; }
# Per pipeline rank, its stages' call time per step (stage s on the rank the
# schedule file's stage_to_rank names: s mod pp for 1F1B, the V for ZBV),
# comma-separated, in ms. $1: the replay report; $2: the schedule.
busy_of() {
  jq -r --slurpfile s "$2" '.pp as $pp | .stage_times as $t | [range(0; $pp) as $r |
         [$t.stages[] | select($s[0].stage_to_rank[.stage] == $r) |
          (.forward_us * .forward_calls + .backward_input_us * .backward_input_calls +
           .backward_weight_us * .backward_weight_calls + .backward_us * .backward_calls)] |
         add / $t.counted_steps / 1000 | . * 10 | round / 10 | tostring] | join(",")' "$1"
}

printf '| schedule | round | simulated ms | calibrating run ms | its / simulated | fresh run ms | fresh / simulated | busy simulated ms | busy calibrating ms | busy fresh ms | calibrating beyond simulated ms |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for schedule in 1f1b zbv; do
  "$jp" generate --schedule "$schedule" --pp 2 --microbatches 4 -o "$tmp/s.json" >/dev/null
  for round in $(seq 1 "$rounds"); do
    replay=("$jp" replay "$tmp/s.json" --model "$tmp/flops.json" --stage transformer
            "${shape[@]}" --steps "$steps" --json)
    "${replay[@]}" > "$tmp/calibrating.json"
    "$jp" model "${shape[@]}" --calibrate "$tmp/calibrating.json" -o "$tmp/calibrated.json" \
        > "$tmp/fit.txt"
    sim=$("$jp" simulate "$tmp/s.json" --model "$tmp/calibrated.json" --json)
    simulated=$(jq '.makespan_us' <<<"$sim")
    sim_busy=$(jq -r '[.ranks[] | .busy_us / 1000 | . * 10 | round / 10 | tostring] | join(",")' <<<"$sim")
    "${replay[@]}" > "$tmp/fresh.json"
    first=$(step_of "$tmp/calibrating.json")
    fresh=$(step_of "$tmp/fresh.json")
    awk -v s="$schedule" -v r="$round" -v sim="$simulated" -v a="$first" -v b="$fresh" \
        -v ma="$(busy_of "$tmp/calibrating.json" "$tmp/s.json")" \
        -v mb="$(busy_of "$tmp/fresh.json" "$tmp/s.json")" \
        -v sb="$sim_busy" \
        'BEGIN { printf "| %s | %d | %.1f | %.1f | %.3f | %.1f | %.3f | %s | %s | %s | %.1f |\n",
                 s, r, sim / 1000, a / 1000, a / sim, b / 1000, b / sim, sb, ma, mb,
                 (a - sim) / 1000 }'
  done
  grep -o 'heads-scaled fit[^)]*\|per-kind fit[^)]*\|one-scale fit[^)]*' "$tmp/fit.txt" |
      sed "s/^/  $schedule: last fit: /" >&2
done
