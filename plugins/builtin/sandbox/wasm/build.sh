#!/usr/bin/env bash
# Rebuild the example WebAssembly tools from source, reproducibly: a pinned Zig toolchain from
# PyPI (the `ziglang` package) compiling C for wasm32-wasi (WASI preview 1). One source, two
# modules, committed under src/clawkit_sandbox/modules/ (tests check they match a rebuild when
# ziglang is available):
#   text_stats.wasm       a WASI command (fresh instance per call: JSON on stdin, result on stdout)
#   text_stats_task.wasm  a WASI reactor exporting clawkit_alloc/clawkit_handle (one instance per task)
#   bash plugins/builtin/sandbox/wasm/build.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../src/clawkit_sandbox/modules}"
zigcc=(uv run --no-project --with ziglang==0.17.0 python -m ziglang cc --target=wasm32-wasi -O2 -s
       -Wl,-z,stack-size=131072)
"${zigcc[@]}" -o "$out/text_stats.wasm" "$here/text_stats.c"
"${zigcc[@]}" -mexec-model=reactor -DCLAWKIT_REACTOR -o "$out/text_stats_task.wasm" "$here/text_stats.c"
for m in text_stats text_stats_task; do echo "built $out/$m.wasm ($(wc -c < "$out/$m.wasm") bytes)"; done
