#!/usr/bin/env bash
# Builds the pii_guard hook plugin: target/guests/lang/pii_guard.wasm, and
# copies its grants and settings, pii_guard.toml, beside it.
# Needs the Python guest toolchain: scripts/toolchains.sh python
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tc="$root/target/toolchains/python"
out="$root/target/guests/lang"

if [[ ! -x "$tc/bin/componentize-py" ]]; then
  echo "pii_guard: ${tc#"$root"/} has no componentize-py; run scripts/toolchains.sh python" >&2
  exit 1
fi
# componentize-py runs the app's imports while it builds and leaves
# __pycache__ next to the sources: build from a copy so the source folder
# stays clean.
stage="$out/src/pii_guard"
rm -rf "$stage"
mkdir -p "$stage"
cp "$here"/app.py "$here"/pii.py "$stage/"
cd "$stage"
# -p .: the plugin's own modules. componentize-py would also search the
# site-packages of an active venv (VIRTUAL_ENV); the plugin uses none.
env -u VIRTUAL_ENV "$tc/bin/componentize-py" -q -d "$root/wit" -w hook-plugin \
  componentize app -p . -o "$out/pii_guard.wasm"
cp "$here/pii_guard.toml" "$out/pii_guard.toml"
echo "pii_guard: ${out#"$root"/}/pii_guard.wasm ($(( $(stat -c %s "$out/pii_guard.wasm") / 1024 )) KiB)"
