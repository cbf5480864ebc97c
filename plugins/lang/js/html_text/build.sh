#!/usr/bin/env bash
# Builds the html_text plugin: target/guests/lang/html_text.wasm.
# Needs the JavaScript guest toolchain: scripts/toolchains.sh js
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cli="$root/target/toolchains/js/node_modules/.bin/componentize-js"
out="$root/target/guests/lang"

if ! command -v node >/dev/null || [[ ! -x "$cli" ]]; then
  echo "html_text: no componentize-js in target/toolchains/js (or no node); run scripts/toolchains.sh js" >&2
  exit 1
fi
mkdir -p "$out"
# componentize-js reads plugin.js and the modules it imports from this folder
# and writes nothing next to them. `-d http fetch-event`: it needs no
# network, so the component leaves out wasi:http and the fetch event loop.
"$cli" --wit "$root/wit" --world-name tool-plugin -d http fetch-event \
  -o "$out/html_text.wasm" "$here/plugin.js"
echo "html_text: ${out#"$root"/}/html_text.wasm ($(( $(stat -c %s "$out/html_text.wasm") / 1024 )) KiB)"
