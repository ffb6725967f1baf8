#!/usr/bin/env bash
# The overlap target of issue 5 as a benchmark: exposed gradient reduction,
# as a share of one rank's reduction time, for the interleaved and V
# schedules under bench/overlap_model.json, where one stage's reduction
# (22.5M bf16 parameters, fp32 gradients, ring all-reduce over 8 replicas at
# 200 GB/s: 947 us in 8 buckets, 808 us in one) costs less than one stage's
# W (1000 us) and half its full backward.
#
# Columns: the plain lowering with one bucket (PyTorch's REDUCE_GRAD after
# the last B or W), the overlap pass alone, 8 buckets alone, and both.
# Target: the last column at most 10% (the first table; the second one is a
# reference outside the target's regime).
#
# A third table (issue 38 item 6) shows the zero-bubble schedules at pp 4,
# m 16, 8 buckets in the regime where a stage's reduction outlasts its W:
# the overlap pass with every I and W kept split (--overlap-merge=false),
# then with the merge of the last I and W of the rank that ends the step
# (the default), the makespan of both, and what the pass decided. The merge
# is kept only where the simulated step gets shorter; the table reports, it
# does not set the exit status.
#
# Usage: bench/overlap_reduce.sh [PATH/TO/jitpipe] [PP] [MICROBATCHES]
# Needs jq. Exit status 1 when a schedule misses the target.
set -euo pipefail
cd "$(dirname "$0")/.."
jp="${1:-build/default/tools/jitpipe}"
pp="${2:-8}"
mbs="${3:-32}"
model=bench/overlap_model.json
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# exposed / per-rank reduction, in percent, and the exposed time; with a
# fourth argument "minimum", the lower bound on it instead
# (planning/reduction_floor.h).
share() {
  local key=exposed_reduce_us
  [ "${4:-}" = minimum ] && key=minimum_exposed_reduce_us
  "$jp" simulate "$1" --model "$2" ${3:+"$3"} --json |
    jq -r --arg k "$key" '"\(100 * .[$k] / .reduce_us | . * 10 | round / 10)% (\(.[$k] | round) us)"'
}

# One table: every schedule under model $1 (8 buckets) and its 1-bucket
# variant. Sets `missed` when the last column is above 10%.
table() {
  jq '.dp.buckets = 1' "$1" > "$tmp/one_bucket.json"
  echo "| schedule | v | plain, 1 bucket | overlap pass | 8 buckets | overlap + 8 buckets | theoretical minimum |"
  echo "|---|---|---|---|---|---|---|"
  for spec in interleaved-1f1b:2 interleaved-1f1b:4 interleaved-zb:2 zbv:2 v-half:2 v-min:2 \
              dualpipev:2; do
    name="${spec%:*}"
    v="${spec#*:}"
    "$jp" generate --schedule "$name" --pp "$pp" --microbatches "$mbs" --stages-per-rank "$v" \
      -o "$tmp/s.json"
    best="$(share "$tmp/s.json" "$1" --overlap)"
    echo "| $name | $v | $(share "$tmp/s.json" "$tmp/one_bucket.json") |" \
         "$(share "$tmp/s.json" "$tmp/one_bucket.json" --overlap) |" \
         "$(share "$tmp/s.json" "$1") | $best | $(share "$tmp/s.json" "$1" --overlap minimum) |"
    if (( $(echo "${best%%%*} > 10" | bc) )); then missed=1; fi
  done
}

echo "pp $pp, $mbs microbatches, $model: a stage's reduction 947 us (8 buckets), W 1000 us"
echo
missed=0
table "$model"
target_missed=$missed
# For reference, outside the target's regime: twice the parameters, so a
# stage's reduction (1.6 to 1.9 ms) outlasts a W but not I + W. The last
# stage's buckets can only start during its last W, so at least R - W + R/8
# stays exposed there; the overlap pass helps where a rank's other stage
# would still be reducing.
jq '.defaults.param_bytes = 90000000' "$model" > "$tmp/double.json"
echo
echo "reference: parameters doubled (a stage's reduction 1.7 ms in 8 buckets, W 1 ms)"
echo
table "$tmp/double.json"

# exposed share and makespan of schedule $1 under model $2 with the overlap
# pass, and --overlap-merge=$3; with a fourth argument, the decisions.
merge_cell() {
  "$jp" simulate "$1" --model "$2" --overlap --overlap-merge="$3" --json |
    jq -r --arg d "${4:-}" 'if $d == "" then
      "\(100 * .exposed_reduce_us / .reduce_us | . * 10 | round / 10)% (\(.exposed_reduce_us * 1000 | round / 1000) us), step \(.makespan_us * 1000 | round / 1000) us"
      else ([.overlap_merges[].explanation] | join("; ")) end'
}

# The regime of the merge: every stage F = I = W = 1 us, its reduction 2 us
# in 8 buckets (dp 2 at 2 GB/s: the floor of a split is 2 - 7/8 = 1.125 us,
# 28%); then stage 0's reduction 2 us and the others' 1 us; then this
# file's model with parameters doubled (above).
cat > "$tmp/unit.json" <<JSON
{"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "param_bytes": 4000},
 "dp": {"size": 2, "reduce": "all_reduce", "gb_per_s": 2, "buckets": 8}}
JSON
jq '.defaults.param_bytes = 2000 | .stages = [{"index": 0, "param_bytes": 4000}]' \
  "$tmp/unit.json" > "$tmp/unit_stage0.json"
echo
echo "merging the last I and W (issue 38 item 6): pp 4, 16 microbatches, 8 buckets"
echo
echo "| model | schedule | split (--overlap-merge=false) | merge where shorter | decisions |"
echo "|---|---|---|---|---|"
for m in unit unit_stage0 double; do
  for name in zbv interleaved-zb; do
    "$jp" generate --schedule "$name" --pp 4 --microbatches 16 --stages-per-rank 2 \
      -o "$tmp/s.json"
    echo "| $m | $name | $(merge_cell "$tmp/s.json" "$tmp/$m.json" false) |" \
         "$(merge_cell "$tmp/s.json" "$tmp/$m.json" true) |" \
         "$(merge_cell "$tmp/s.json" "$tmp/$m.json" true decisions) |"
  done
done
exit "$target_missed"
