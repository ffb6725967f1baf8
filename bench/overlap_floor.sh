#!/usr/bin/env bash
# Issue 18, item 6: the overlap pass against its theoretical minimum
# (planning/reduction_floor.h). Unit costs (F = I = W = 1 us per stage), one
# stage's reduction R = 1, 2 or 3 us (dp 2 at 2 GB/s) in 8 buckets, every
# schedule at pp 4 and 8, m 2p and 4p. Prints the cases where the exposed
# reduction with the pass stays above the minimum, and a count.
#
# Usage: bench/overlap_floor.sh [PATH/TO/jitpipe]   Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
jp="${1:-build/default/tools/jitpipe}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cases=0
above=0
for reduce in 1 2 3; do
  cat > "$tmp/m.json" <<JSON
{"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "param_bytes": $((reduce * 2000))},
 "dp": {"size": 2, "reduce": "all_reduce", "gb_per_s": 2, "buckets": 8}}
JSON
  for spec in interleaved-1f1b:2 interleaved-zb:2 zbv:2 dualpipev:2 v-half:2 v-min:2 zb-h1:1 \
              zb-h2:1 1f1b:1 gpipe:1 dualpipe:2; do
    name="${spec%:*}"
    v="${spec#*:}"
    for pp in 4 8; do
      for m in $((2 * pp)) $((4 * pp)); do
        "$jp" generate --schedule "$name" --pp "$pp" --microbatches "$m" --stages-per-rank "$v" \
          -o "$tmp/s.json" 2>/dev/null || continue
        cases=$((cases + 1))
        line="$("$jp" simulate "$tmp/s.json" --model "$tmp/m.json" --json --compare-overlap |
          jq -r '.compare_overlap | [(100 * .without.exposed_reduce_us / .with.reduce_us),
                 (100 * .with.exposed_reduce_us / .with.reduce_us),
                 (100 * .minimum_exposed_reduce_us / .with.reduce_us),
                 (.with.exposed_reduce_us - .minimum_exposed_reduce_us > 1e-6)] |
                 "\(.[0] * 10 | round / 10)% \(.[1] * 10 | round / 10)% \(.[2] * 10 | round / 10)% \(.[3])"')"
        read -r without with minimum over <<< "$line"
        if [ "$over" = true ]; then
          above=$((above + 1))
          echo "R=$reduce us $name pp $pp m $m: without the pass $without, with it $with, minimum $minimum"
        fi
      done
    done
  done
done
echo "$cases cases; $above above the theoretical minimum"
