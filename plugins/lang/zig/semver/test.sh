#!/usr/bin/env bash
# Unit tests of the semver logic, natively: zig test semver.zig.
# Needs: scripts/toolchains.sh zig
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tc="$root/target/toolchains"
if [[ ! -f "$tc/zig/bin/python" ]]; then
  echo "semver: target/toolchains/zig is missing; run scripts/toolchains.sh zig" >&2
  exit 1
fi
export ZIG_GLOBAL_CACHE_DIR="$tc/zig/cache"
mkdir -p "$root/target/guests/lang/src/semver-test"
"$tc/zig/bin/python" -m ziglang test "$here/semver.zig" --cache-dir "$root/target/guests/lang/src/semver-test/.zig-cache"
