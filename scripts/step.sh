#!/usr/bin/env bash
# One step of a make target, announced before it starts and timed:
#
#   scripts/step.sh "building the host (debug)" cargo build -p wasmclaw
#
# prints "==> building the host (debug) ..." then runs the command, its own
# output shown as it comes, then "==> building the host (debug): done in 41 s"
# (or "failed after 41 s", with the command's exit status).
set -uo pipefail
what=$1
shift
printf '==> %s ...\n' "$what"
start=$SECONDS
"$@"
status=$?
if [[ $status -eq 0 ]]; then
  printf '==> %s: done in %d s\n' "$what" $((SECONDS - start))
else
  printf '==> %s: failed after %d s (exit status %d)\n' "$what" $((SECONDS - start)) "$status" >&2
fi
exit "$status"
