#!/usr/bin/env bash
# The plugin's logic, tested natively with the machine's Python 3 (its
# modules use only what both it and the plugin's bundled CPython have).
set -euo pipefail
cd "$(dirname "$0")"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -q test_pii
