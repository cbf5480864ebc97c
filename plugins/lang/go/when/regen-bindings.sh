#!/usr/bin/env bash
# Regenerates gen/, the Go bindings for the `tool-plugin` world of wit/plugin.wit.
# Run it after changing the WIT. Needs the wit-bindgen CLI 0.61
# (`cargo install wit-bindgen-cli@0.61.0 --locked`) and, to format the
# output, the Go toolchain (scripts/toolchains.sh go).
#
# The bindings are generated as a library (--pkg-name) so they stay in gen/:
# imports become wit_component/gen/<interface>, and the exported functions
# are looked up in wit_component/export_wasmclaw_plugin_tool (export.go of
# this plugin). Every Go plugin uses the module name wit_component, so these
# files are the same for all of them (the template gets a copy).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
want=0.61.0

bindgen=$(command -v wit-bindgen || echo "$HOME/.cargo/bin/wit-bindgen")
if [[ ! -x "$bindgen" ]]; then
  echo "when: wit-bindgen not found; run: cargo install wit-bindgen-cli@$want --locked" >&2
  exit 1
fi
have=$("$bindgen" --version | awk '{print $2}')
if [[ "$have" != "$want" ]]; then
  echo "when: $bindgen is $have; these bindings are pinned to $want" >&2
  exit 1
fi
# wit-bindgen formats with gofmt when it finds it on PATH.
gofmt=$(ls "$root"/target/toolchains/go/lib/python3*/site-packages/go/bin/gofmt 2>/dev/null | head -1 || true)
[[ -n "$gofmt" ]] && PATH="$(dirname "$gofmt"):$PATH"

rm -rf "$here/gen"
# It lists every file on stderr: show that only when it fails.
if ! out=$("$bindgen" go --world tool-plugin \
  --pkg-name wit_component/gen --export-pkg-name wit_component \
  --out-dir "$here/gen" "$root/wit" 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "when: regenerated ${here#"$root"/}/gen with wit-bindgen $have"
