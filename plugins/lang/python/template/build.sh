#!/usr/bin/env bash
# Builds this plugin (world __WORLD__) into ./__NAME__.wasm with componentize-py, from app.py
# and the WIT in ./wit.
#
# componentize-py is looked for in $WASMCLAW_TOOLCHAINS/python/bin (the
# toolchains folder of a wasmclaw checkout: scripts/toolchains.sh python),
# then on PATH. Install it with:
#   python3 -m pip install componentize-py==0.25.1
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name=__NAME__

cpy=""
if [[ -n "${WASMCLAW_TOOLCHAINS:-}" && -x "$WASMCLAW_TOOLCHAINS/python/bin/componentize-py" ]]; then
  cpy="$WASMCLAW_TOOLCHAINS/python/bin/componentize-py"
elif command -v componentize-py >/dev/null; then
  cpy="$(command -v componentize-py)"
else
  where="on PATH"
  [[ -z "${WASMCLAW_TOOLCHAINS:-}" ]] || where="in $WASMCLAW_TOOLCHAINS/python/bin and on PATH"
  echo "$name: componentize-py not found $where;" >&2
  echo "  install it: python3 -m pip install componentize-py==0.25.1" >&2
  echo "  or, in a wasmclaw checkout: scripts/toolchains.sh python, then WASMCLAW_TOOLCHAINS=<checkout>/target/toolchains" >&2
  exit 1
fi

# componentize-py runs the app's imports while it builds and leaves
# __pycache__ next to the sources: build from a copy in a temporary folder.
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$here"/*.py "$stage/"
cd "$stage"
# -p .: the plugin's own modules. componentize-py would also search the
# site-packages of an active venv (VIRTUAL_ENV); the plugin uses only the
# standard library.
env -u VIRTUAL_ENV "$cpy" -q -d "$here/wit" -w __WORLD__ componentize app -p . -o "$here/$name.wasm"
echo "$name: $here/$name.wasm ($(( $(stat -c %s "$here/$name.wasm") / 1024 )) KiB)"
