#!/usr/bin/env bash
# componentize.sh DIR WORLD: builds the Python plugin in DIR (its modules,
# `app` exporting the world's interfaces) into target/guests/lang/NAME.wasm,
# NAME being DIR's name, and copies its grants file NAME.toml beside it if it
# has one. Each plugin's build.sh calls this.
# Needs the Python guest toolchain: scripts/toolchains.sh python
set -euo pipefail
here="$(cd "$1" && pwd)"
world=$2
name="$(basename "$here")"
root="$(cd "$here/../../../.." && pwd)"
tc="$root/target/toolchains/python"
out="$root/target/guests/lang"

if [[ ! -x "$tc/bin/componentize-py" ]]; then
  echo "$name: ${tc#"$root"/} has no componentize-py; run scripts/toolchains.sh python" >&2
  exit 1
fi
# componentize-py runs the app's imports while it builds and leaves
# __pycache__ next to the sources: build from a copy (without the tests) so
# the source folder stays clean.
stage="$out/src/$name"
rm -rf "$stage"
mkdir -p "$stage"
find "$here" -maxdepth 1 -name '*.py' ! -name 'test_*' -exec cp {} "$stage/" \;
cd "$stage"
# -p .: the plugin's own modules. componentize-py would also search the
# site-packages of an active venv (VIRTUAL_ENV); the plugins use none.
env -u VIRTUAL_ENV "$tc/bin/componentize-py" -q -d "$root/wit" -w "$world" \
  componentize app -p . -o "$out/$name.wasm"
[[ ! -f "$here/$name.toml" ]] || cp "$here/$name.toml" "$out/$name.toml"
echo "$name: ${out#"$root"/}/$name.wasm ($(( $(stat -c %s "$out/$name.wasm") / 1024 )) KiB)"
