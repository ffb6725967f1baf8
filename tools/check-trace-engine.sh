#!/usr/bin/env bash
# Loads a Chrome trace with the Chrome DevTools trace engine
# (@paulirish/trace_engine, pinned in tools/trace_engine/package-lock.json) as
# a smoke test that a real viewer accepts it: prints the trace bounds, the
# threads per process and the number of flows; exits non-zero when the engine
# throws or finds nothing. Needs node and npm; installs the package on the
# first run (npm ci, from the lock file: this downloads from the npm registry,
# which is why tools/test.sh does not run it).
#
# Usage: tools/check-trace-engine.sh TRACE.json
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 TRACE.json" >&2
  exit 2
fi
trace=$(realpath -- "$1")
engine_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/trace_engine" && pwd)

if [[ ! -d "$engine_dir/node_modules/@paulirish/trace_engine" ]]; then
  (cd "$engine_dir" && npm ci --no-audit --no-fund >&2)
fi
cd "$engine_dir"
exec node check.mjs "$trace"
