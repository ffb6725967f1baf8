#!/usr/bin/env bash
# tools/gpu-check parses (bash -n) and, with --dry-run, lists the commands
# of every step without a GPU: the GPU tests (the bf16 transformer's
# included), the mlp and transformer replays of each schedule (Llama 3 8B's
# layers: jit, eager, arena + graph, --measure-costs, --reference-check=false)
# and their simulations. Run by ctest from the source tree; writes only
# under TMPDIR (gpu-check's own temporary folder, removed).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash -n tools/gpu-check
out="$(tools/gpu-check --dry-run 2>/dev/null)"
fail() { echo "gpu_check_dry_run_test: $1" >&2; echo "$out" >&2; exit 1; }
[ "$(tail -1 <<<"$out")" = "gpu-check: dry run, nothing run" ] || fail "no closing line"
grep -q "cuda_transformer_stage_test --gtest_brief=0" <<<"$out" || fail "no transformer test row"
for schedule in 1f1b interleaved-1f1b zbv; do
  llama="$(grep -F "/$schedule.json --backend cuda --stage transformer" <<<"$out" |
           grep -F -- "--hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --seq 4096" |
           grep -F -- "--vocab 128256 --dtype bf16" | grep -cF -- "--reference-check=false")"
  [ "$llama" -eq 4 ] || fail "$schedule: $llama Llama replays, not 4"
  for extra in "--measure-costs" "--policy jit" "--policy eager" "--buffers arena --graph"; do
    grep -F "/$schedule.json --backend cuda --stage transformer" <<<"$out" |
      grep -F -- "--hidden 4096" | grep -qF -- "$extra" || fail "$schedule: no Llama $extra"
  done
  grep -qE "simulate [^ ]*/$schedule.json --model [^ ]*/tf-$schedule.model.json" <<<"$out" ||
    fail "$schedule: no simulation of the device costs"
done
if grep -vE '^(cmake|timeout|build/gpu/|gpu-check: )' <<<"$out" | grep -q .; then
  fail "a line that is not a command"
fi
echo "gpu_check_dry_run_test: ok"
