#!/usr/bin/env bash
# Regenerates the C bindings of world `tool-plugin` (wit/plugin.wit) in this
# folder, shared by the C and Zig plugins. Needs the wit-bindgen CLI at the
# version below: cargo install wit-bindgen-cli@0.61.0 --locked
#
# Besides tool_plugin.h and tool_plugin.c it writes tool_plugin_component_type.o,
# a small wasm object whose custom section carries the world's component type
# (what `wasm-tools component new` reads). It is committed too: the
# generated .c always references a symbol it defines, so there is no
# building without it (even `--no-object-file` keeps that reference).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The WIT: ../wit in a plugin made by `wasmclaw new-plugin` (NAME/bindings,
# NAME/wit), else the repository's wit/ (this folder is plugins/lang/c/bindings).
wit="$here/../wit"
[[ -d "$wit" ]] || wit="$here/../../../../wit"
want=0.61.0
have=$(wit-bindgen --version 2>/dev/null | awk '{print $2}') || true
if [[ "$have" != "$want" ]]; then
  echo "regen-bindings: need wit-bindgen $want on PATH (have '${have:-none}'): cargo install wit-bindgen-cli@$want --locked" >&2
  exit 1
fi
wit-bindgen c --world tool-plugin --out-dir "$here" "$wit"
echo "regen-bindings: wrote tool_plugin.h, tool_plugin.c and tool_plugin_component_type.o in $here"
