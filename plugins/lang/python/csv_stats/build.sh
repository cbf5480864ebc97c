#!/usr/bin/env bash
# Builds the csv_stats tool plugin: target/guests/lang/csv_stats.wasm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../componentize.sh" "$here" tool-plugin
