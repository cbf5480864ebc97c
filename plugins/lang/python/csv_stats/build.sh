#!/usr/bin/env bash
# Builds the csv_stats plugin: target/guests/lang/csv_stats.wasm.
# Needs the Python guest toolchain: scripts/toolchains.sh python
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tc="$root/target/toolchains/python"
out="$root/target/guests/lang"

if [[ ! -x "$tc/bin/componentize-py" ]]; then
  echo "csv_stats: ${tc#"$root"/} has no componentize-py; run scripts/toolchains.sh python" >&2
  exit 1
fi
# componentize-py runs the app's imports while it builds and leaves
# __pycache__ next to the sources: build from a copy so the source folder
# stays clean.
stage="$out/src/csv_stats"
rm -rf "$stage"
mkdir -p "$stage"
cp "$here"/app.py "$here"/csvstats.py "$stage/"
cd "$stage"
# -p .: the plugin's own modules. componentize-py would also search the
# site-packages of an active venv (VIRTUAL_ENV); the plugin uses none.
env -u VIRTUAL_ENV "$tc/bin/componentize-py" -q -d "$root/wit" -w tool-plugin \
  componentize app -p . -o "$out/csv_stats.wasm"
echo "csv_stats: ${out#"$root"/}/csv_stats.wasm ($(( $(stat -c %s "$out/csv_stats.wasm") / 1024 )) KiB)"
