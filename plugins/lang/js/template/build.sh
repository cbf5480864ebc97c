#!/usr/bin/env bash
# Builds the __NAME__ plugin into ./__NAME__.wasm from plugin.js and ./wit.
#
# componentize-js is looked for in $WASMCLAW_TOOLCHAINS/js (what a wasmclaw
# checkout's `scripts/toolchains.sh js` installs), then in ./node_modules,
# then on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

cli=""
for candidate in \
  ${WASMCLAW_TOOLCHAINS:+"$WASMCLAW_TOOLCHAINS/js/node_modules/.bin/componentize-js"} \
  "$here/node_modules/.bin/componentize-js"; do
  if [[ -x "$candidate" ]]; then cli="$candidate"; break; fi
done
[[ -n "$cli" ]] || cli="$(command -v componentize-js || true)"
if [[ -z "$cli" ]] || ! command -v node >/dev/null; then
  cat >&2 <<'MSG'
__NAME__: componentize-js and Node.js 20.19 or newer are needed. Either
  - in a wasmclaw checkout run `scripts/toolchains.sh js` and set
    WASMCLAW_TOOLCHAINS=<checkout>/target/toolchains, or
  - here: npm install --save-dev --save-exact @bytecodealliance/componentize-js@0.23.0 @bytecodealliance/preview2-shim@0.17.9
    (componentize-js 0.23.0 needs preview2-shim but does not declare it).
MSG
  exit 1
fi
# -d http fetch-event: the tool needs no network, so the component leaves
# out wasi:http and the fetch event loop (a plugin that calls `fetch` keeps
# them, and needs a [network] grant).
"$cli" --wit "$here/wit" --world-name tool-plugin -d http fetch-event \
  -o "$here/__NAME__.wasm" "$here/plugin.js"
echo "__NAME__: __NAME__.wasm ($(( $(stat -c %s "$here/__NAME__.wasm") / 1024 )) KiB)"
