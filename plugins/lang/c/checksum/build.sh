#!/usr/bin/env bash
# Builds the checksum plugin: target/guests/lang/checksum.wasm (+ checksum.toml).
# Needs: scripts/toolchains.sh c   (clang-19 for wasm32-wasi, wasm-tools, the adapter)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
bindings="$here/../bindings"
tc="$root/target/toolchains"
out="$root/target/guests/lang"
stage="$out/src/checksum"
wasm_tools="$tc/wasm-tools/bin/wasm-tools"
adapter="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"

for need in clang-19 "$wasm_tools" "$adapter"; do
  if ! command -v "$need" >/dev/null && [[ ! -f "$need" ]]; then
    echo "checksum: ${need#"$root"/} is missing; run scripts/toolchains.sh c" >&2
    exit 1
  fi
done
mkdir -p "$stage"

# A reactor (no main; the host calls the exports any number of times),
# linked with wasi-libc for malloc and snprintf. -Oz and --strip-all keep it
# small; the component type object tells `component new` the world.
clang-19 --target=wasm32-wasi -mexec-model=reactor -std=c11 -Oz -Wall -Wextra -Werror \
  -I "$bindings" -I "$here/../json" -Wl,--strip-all -o "$stage/checksum.core.wasm" \
  "$here"/plugin.c "$here"/checksum.c "$here"/digest.c "$here"/../json/json.c \
  "$bindings/tool_plugin.c" "$bindings/tool_plugin_component_type.o"

# The core module imports WASI preview1 (wasi-libc); the adapter maps it
# onto WASI 0.2, which is what the host provides.
"$wasm_tools" component new "$stage/checksum.core.wasm" \
  --adapt "wasi_snapshot_preview1=$adapter" -o "$out/checksum.wasm"
cp "$here/checksum.toml" "$out/checksum.toml"
echo "checksum: ${out#"$root"/}/checksum.wasm ($(( $(stat -c %s "$out/checksum.wasm") / 1024 )) KiB)"
