#!/usr/bin/env bash
# Builds __NAME__.wasm, a WASI 0.2 component, next to this script.
# Needs Rust with the wasm32-wasip2 target: rustup target add wasm32-wasip2
set -euo pipefail
cd "$(dirname "$0")"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  echo "__NAME__: the wasm32-wasip2 target is missing: rustup target add wasm32-wasip2" >&2
  exit 1
fi
cargo build --quiet --locked --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/__NAME__.wasm" __NAME__.wasm
echo "__NAME__: __NAME__.wasm ($(( $(stat -c %s __NAME__.wasm) / 1024 )) KiB)"
