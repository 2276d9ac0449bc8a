#!/usr/bin/env bash
# Rebuild the example WebAssembly tool from source, reproducibly: a pinned Zig toolchain from
# PyPI (the `ziglang` package) compiling C for wasm32-wasi (WASI preview 1). The output is
# committed at src/clawkit_sandbox/modules/text_stats.wasm; tests check it matches a rebuild
# when ziglang is available.
#   bash plugins/builtin/sandbox/wasm/build.sh [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../src/clawkit_sandbox/modules/text_stats.wasm}"
uv run --no-project --with ziglang==0.17.0 python -m ziglang cc --target=wasm32-wasi -O2 -s -Wl,-z,stack-size=131072 \
  -o "$out" "$here/text_stats.c"
echo "built $out ($(wc -c < "$out") bytes)"
