#!/usr/bin/env bash
# The plugin's logic, tested natively with the machine's Node.js (the same
# modules that plugin.js imports inside the component).
set -euo pipefail
cd "$(dirname "$0")"
node --test
