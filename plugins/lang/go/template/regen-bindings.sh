#!/usr/bin/env bash
# Regenerates gen/, the Go bindings for the `tool-plugin` world of
# wit/plugin.wit, after the WIT changed. Needs the wit-bindgen CLI 0.61
# (`cargo install wit-bindgen-cli@0.61.0 --locked`); gofmt on PATH formats
# the output. The runtime package the bindings import is in pkg/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bindgen=$(command -v wit-bindgen || echo "$HOME/.cargo/bin/wit-bindgen")
[[ -x "$bindgen" ]] || { echo "__NAME__: wit-bindgen not found; run: cargo install wit-bindgen-cli@0.61.0 --locked" >&2; exit 1; }
rm -rf "$here/gen"
# --pkg-name keeps the bindings in gen/; the exports stay in this module's
# export_wasmclaw_plugin_tool package.
if ! out=$("$bindgen" go --world tool-plugin \
  --pkg-name wit_component/gen --export-pkg-name wit_component \
  --out-dir "$here/gen" "$here/wit" 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "__NAME__: regenerated gen/ with $("$bindgen" --version)"
