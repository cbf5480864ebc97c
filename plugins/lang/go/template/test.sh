#!/usr/bin/env bash
# Runs the unit tests of tools/ natively (no WebAssembly involved).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tc="${WASMCLAW_TOOLCHAINS:-}"
if [[ -n "$tc" && -x "$tc/go/bin/go" ]]; then
  go="$tc/go/bin/go"
  export GOPATH="$tc/go/gopath" GOMODCACHE="$tc/go/gopath/pkg/mod" GOCACHE="$tc/go/cache" XDG_CONFIG_HOME="$tc/go/config"
else
  go=$(command -v go) || { echo "__NAME__: no Go toolchain (install Go 1.25+ or set WASMCLAW_TOOLCHAINS)" >&2; exit 1; }
fi
cd "$here"
GOPROXY=off GOTOOLCHAIN=local "$go" test ./tools/
