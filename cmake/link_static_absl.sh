#!/usr/bin/env bash
# Linker launcher (cmake/JitpipeStaticAbsl.cmake): runs the link command it
# is given with every Abseil shared library that has a static archive beside
# it (libabsl_X.so[.N...] -> libabsl_X.a) replaced by that archive, in place.
set -euo pipefail
args=()
for arg in "$@"; do
  if [[ "$arg" =~ ^(.*/libabsl_[A-Za-z0-9_]+)\.so(\.[0-9.]+)?$ ]] && [[ -f "${BASH_REMATCH[1]}.a" ]]; then
    args+=("${BASH_REMATCH[1]}.a")
  else
    args+=("$arg")
  fi
done
exec "${args[@]}"
