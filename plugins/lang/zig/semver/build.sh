#!/usr/bin/env bash
# Builds the semver plugin: target/guests/lang/semver.wasm (+ semver.toml).
# Needs: scripts/toolchains.sh zig   (Zig from PyPI ziglang, wasm-tools, the adapter)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
bindings="$root/plugins/lang/c/bindings"
tc="$root/target/toolchains"
out="$root/target/guests/lang"
stage="$out/src/semver"
zig=("$tc/zig/bin/python" -m ziglang)
wasm_tools="$tc/wasm-tools/bin/wasm-tools"
adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"

for need in "$tc/zig/bin/python" "$wasm_tools" "$adapter"; do
  if [[ ! -f "$need" ]]; then
    echo "semver: ${need#"$root"/} is missing; run scripts/toolchains.sh zig" >&2
    exit 1
  fi
done
# Zig keeps its caches in the toolchain folder and the stage, not in ~ or here.
export ZIG_GLOBAL_CACHE_DIR="$tc/zig/cache"
rm -rf "$stage"
mkdir -p "$stage"
cp "$here"/plugin.zig "$here"/semver.zig "$stage/"
cd "$stage"

# Zig 0.17 has no @cImport: translate the C header of the bindings into Zig.
"${zig[@]}" translate-c -target wasm32-wasi -lc -I "$bindings" "$bindings/tool_plugin.h" >tool_plugin.zig

# A reactor (-fno-entry -mexec-model=reactor: no main, exports called any
# number of times), linked with wasi-libc because the bindings use malloc.
# The C bindings and their component type object are compiled in.
# --stack: Zig's default for wasm is 16 MiB of stack, reserved in the initial
# memory, so the plugin could not even start under a 16 MiB memory grant.
# 256 KiB is plenty (std.json parses without recursion; std.mem.sort keeps a
# 512-item buffer on the stack).
"${zig[@]}" build-exe -target wasm32-wasi -O ReleaseSmall -fno-entry -mexec-model=reactor -lc --stack 262144 \
  --cache-dir "$stage/.zig-cache" -I "$bindings" -femit-bin="$stage/semver.core.wasm" \
  plugin.zig "$bindings/tool_plugin.c" "$bindings/tool_plugin_component_type.o"

"$wasm_tools" component new "$stage/semver.core.wasm" \
  --adapt "wasi_snapshot_preview1=$adapter" -o "$out/semver.wasm"
cp "$here/semver.toml" "$out/semver.toml"
echo "semver: ${out#"$root"/}/semver.wasm ($(( $(stat -c %s "$out/semver.wasm") / 1024 )) KiB)"
