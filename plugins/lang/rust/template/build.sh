#!/usr/bin/env bash
# Builds __NAME__.wasm, a WASI 0.2 component, next to this script.
# Needs Rust with the wasm32-wasip2 target: rustup target add wasm32-wasip2
# Shares compiled dependencies with other plugins when CARGO_TARGET_DIR names
# a common target folder (e.g. export CARGO_TARGET_DIR=~/.cache/wasmclaw-plugins).
set -euo pipefail
cd "$(dirname "$0")"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "__NAME__: the wasm32-wasip2 target is missing: rustup target add wasm32-wasip2" >&2
  exit 1
fi
# CARGO_TARGET_DIR, when set, is a target folder shared by several plugins:
# wit-bindgen and serde_json are compiled once for all of them (about 30 s
# each time otherwise). Without it, ./target.
target="${CARGO_TARGET_DIR:-target}"
if [[ ! -d "$target/wasm32-wasip2/release/deps" ]]; then
  echo "__NAME__: building (the first build in $target compiles wit-bindgen and serde_json: about a minute; then seconds)"
fi
cargo build --quiet --locked --release --target wasm32-wasip2
cp "$target/wasm32-wasip2/release/__NAME__.wasm" __NAME__.wasm
echo "__NAME__: __NAME__.wasm ($(( $(stat -c %s __NAME__.wasm) / 1024 )) KiB)"
