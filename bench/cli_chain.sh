#!/usr/bin/env bash
# Issue 19, item 4: the whole chain through the CLI, interleaved 1F1B pp 128
# v 4 m 1024, one process per step as a user runs it:
#   generate -> lower (--recv jit) -> validate -> plan -> simulate
# with docs/design.md's example model, then `plan` alone with a model whose 512
# stages each have their own stash and output sizes (the same sizes as
# DistinctModel in bench/bench_support.cc: the arena's hardest case).
#
# Each binary given runs the chain ROUNDS times, the binaries alternated
# round by round so that they share the machine's mood (this VM's speed
# drifts by 2x within an hour); prints per step and binary the median wall
# time and the largest peak RSS (GNU time), and the chain's total.
#
# Usage: bench/cli_chain.sh [-n ROUNDS] JITPIPE [JITPIPE...]   (default: 3
# rounds of build/default/tools/jitpipe). Needs /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
if [ "${1:-}" = "-n" ]; then
  rounds="$2"
  shift 2
fi
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(build/default/tools/jitpipe)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/example.json" <<'JSON'
{"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "input_bytes": 1048576, "output_bytes": 1048576,
              "stash_bytes": 4194304, "param_bytes": 16777216}}
JSON
{
  echo '{"format": "jitpipe.model", "version": 1,'
  echo ' "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,'
  echo '              "input_bytes": 1048576, "output_bytes": 1048576,'
  echo '              "stash_bytes": 4194304, "param_bytes": 16777216},'
  echo ' "stages": ['
  mib=1048576
  for ((s = 0; s < 512; s++)); do
    output=$((mib + (s * 104729 % 53) * 8191))
    if ((s > 0)); then input=$((mib + ((s - 1) * 104729 % 53) * 8191)); else input=$mib; fi
    stash=$((3 * mib + (s * 7919 % 61) * 4099))
    sep=","
    ((s == 511)) && sep=""
    echo "  {\"index\": $s, \"stash_bytes\": $stash, \"output_bytes\": $output, \"input_bytes\": $input}$sep"
  done
  echo ' ]}'
} > "$tmp/distinct.json"

steps=(generate lower validate plan simulate plan-distinct)
# run BINARY STEP: prints "seconds kilobytes" of one step.
run() {
  local jp="$1" step="$2" args
  case "$step" in
    generate) args=(generate --schedule interleaved-1f1b --pp 128 --microbatches 1024
                    --stages-per-rank 4 -o "$tmp/gen.json") ;;
    lower) args=(lower "$tmp/gen.json" -o "$tmp/low.json") ;;
    validate) args=(validate "$tmp/low.json") ;;
    plan) args=(plan "$tmp/low.json" --model "$tmp/example.json" --json) ;;
    simulate) args=(simulate "$tmp/low.json" --model "$tmp/example.json" --json) ;;
    plan-distinct) args=(plan "$tmp/low.json" --model "$tmp/distinct.json" --json) ;;
  esac
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$jp" "${args[@]}" > "$tmp/out" 2> "$tmp/err" || {
    echo "cli_chain.sh: $jp ${args[*]} failed:" >&2
    cat "$tmp/err" >&2
    exit 1
  }
  cat "$tmp/time"
}

for ((r = 0; r < rounds; r++)); do
  for b in "${!binaries[@]}"; do
    for step in "${steps[@]}"; do
      read -r seconds kb < <(run "${binaries[$b]}" "$step")
      echo "$r $b $step $seconds $kb" >> "$tmp/results"
    done
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '| step |'
for b in "${!binaries[@]}"; do printf ' %s |' "${binaries[$b]}"; done
printf '\n|---|'
for b in "${!binaries[@]}"; do printf -- '---|'; done
printf '\n'
for step in "${steps[@]}" chain; do
  printf '| %s |' "$step"
  for b in "${!binaries[@]}"; do
    if [ "$step" = chain ]; then
      # Per round: the five chain steps summed; then the median over rounds.
      t=$(awk -v b="$b" '$2 == b && $3 != "plan-distinct" { sum[$1] += $4 }
                         END { for (r in sum) print sum[r] }' "$tmp/results" | median)
      kb=$(awk -v b="$b" '$2 == b && $3 != "plan-distinct" && $5 > m {m = $5} END {print m}' \
           "$tmp/results")
    else
      t=$(awk -v b="$b" -v s="$step" '$2 == b && $3 == s {print $4}' "$tmp/results" | median)
      kb=$(awk -v b="$b" -v s="$step" '$2 == b && $3 == s && $5 > m {m = $5} END {print m}' \
           "$tmp/results")
    fi
    printf ' %.2f s, %.2f GiB |' "$t" "$(echo "$kb / 1048576" | bc -l)"
  done
  printf '\n'
done
