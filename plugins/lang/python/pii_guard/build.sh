#!/usr/bin/env bash
# Builds the pii_guard hook plugin: target/guests/lang/pii_guard.wasm, with
# its grants and settings, pii_guard.toml, beside it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../componentize.sh" "$here" hook-plugin
