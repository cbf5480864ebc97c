#!/usr/bin/env bash
# Runs the unit tests of dates/ natively with the repository's Go toolchain
# (scripts/toolchains.sh go).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tc="$(cd "$here/../../../.." && pwd)/target/toolchains"
if [[ ! -x "$tc/go/bin/go" ]]; then
  echo "when: target/toolchains/go is missing; run scripts/toolchains.sh go" >&2
  exit 1
fi
export GOPATH="$tc/go/gopath" GOMODCACHE="$tc/go/gopath/pkg/mod" GOCACHE="$tc/go/cache" \
  XDG_CONFIG_HOME="$tc/go/config" GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly
cd "$here"
"$tc/go/bin/go" vet ./dates/
"$tc/go/bin/go" test "$@" ./dates/
