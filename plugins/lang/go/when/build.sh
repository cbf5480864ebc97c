#!/usr/bin/env bash
# Builds the `when` plugin: target/guests/lang/when.wasm.
# Needs the Go toolchain, wasm-tools and the WASI adapter:
#   scripts/toolchains.sh go
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tc="$root/target/toolchains"
out="$root/target/guests/lang"
stage="$out/src/when"

go="$tc/go/bin/go"
wasm_tools="$tc/wasm-tools/bin/wasm-tools"
adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"
for f in "$go" "$wasm_tools" "$adapter"; do
  if [[ ! -e "$f" ]]; then
    echo "when: ${f#"$root"/} is missing; run scripts/toolchains.sh go" >&2
    exit 1
  fi
done

# Everything Go writes stays in target/toolchains/go; no module proxy (the
# bindings' runtime package is in the repository, see go.mod); never
# download another Go release.
export GOPATH="$tc/go/gopath" GOMODCACHE="$tc/go/gopath/pkg/mod" GOCACHE="$tc/go/cache" \
  XDG_CONFIG_HOME="$tc/go/config" GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly

rm -rf "$stage"
mkdir -p "$stage"
# A WASI reactor core module: c-shared gives an _initialize export instead
# of _start, so the exports can be called after the runtime starts.
# -checklinkname=0: the bindings' runtime reaches runtime.sbrk through
# //go:linkname, which the linker refuses by default since Go 1.23.
# -s -w: no symbol table or DWARF (a smaller component).
(cd "$here" && GOOS=wasip1 GOARCH=wasm "$go" build -trimpath -buildmode=c-shared \
  -ldflags="-s -w -checklinkname=0" -o "$stage/when.core.wasm" .)
# Then the component: the WIT world as a custom section, and the preview1
# adapter that maps WASI 0.1 calls onto WASI 0.2.
"$wasm_tools" component embed --world tool-plugin "$root/wit" "$stage/when.core.wasm" -o "$stage/when.embed.wasm"
"$wasm_tools" component new "$stage/when.embed.wasm" \
  --adapt wasi_snapshot_preview1="$adapter" -o "$out/when.wasm"
# The grants sidecar: tighter limits than the defaults, nothing else.
cp "$here/when.toml" "$out/when.toml"
echo "when: ${out#"$root"/}/when.wasm ($(( $(stat -c %s "$out/when.wasm") / 1024 )) KiB)"
