#!/usr/bin/env bash
# Loads a Chrome trace with the Chrome DevTools trace engine
# (@paulirish/trace_engine, pinned in tools/trace_engine/package-lock.json) as
# a smoke test that a real viewer accepts it: prints the trace bounds, the
# threads per process, the number of flows and counter series; exits non-zero
# when the engine throws or finds nothing, or lacks what --flows / --counters
# ask for (tools/trace_engine/check.mjs). Needs node and npm
# (tools/install-deps.sh); installs the package on the first run (npm ci, from
# the lock file, from the npm registry). tools/test.sh runs it on the demo's
# traces.
#
# Usage: tools/check-trace-engine.sh [--flows] [--counters] TRACE.json
set -euo pipefail

flags=()
while [[ $# -gt 1 && "$1" == --* ]]; do flags+=("$1"); shift; done
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--flows] [--counters] TRACE.json" >&2
  exit 2
fi
trace=$(realpath -- "$1")
engine_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/trace_engine" && pwd)

if [[ ! -d "$engine_dir/node_modules/@paulirish/trace_engine" ]]; then
  (cd "$engine_dir" && npm ci --no-audit --no-fund >&2)
fi
cd "$engine_dir"
exec node check.mjs "${flags[@]}" "$trace"
