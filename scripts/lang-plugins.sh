#!/usr/bin/env bash
# The example plugins in other languages (plugins/lang/<language>/<plugin>/):
# installs their toolchains into target/toolchains (scripts/toolchains.sh),
# runs each plugin's own unit tests (its test.sh, natively), then builds each
# into target/guests/lang/<plugin>.wasm with its build.sh.
#
#   scripts/lang-plugins.sh              # every language
#   scripts/lang-plugins.sh python go    # only those
#
# A missing toolchain is installed; one that cannot be installed fails the
# run, saying which.
set -euo pipefail
cd "$(dirname "$0")/.."

langs=("$@")
[[ ${#langs[@]} -gt 0 ]] || langs=(python js c zig go)

bash scripts/toolchains.sh "${langs[@]}"

for lang in "${langs[@]}"; do
  for plugin in plugins/lang/"$lang"/*/; do
    plugin=${plugin%/}
    [[ -f "$plugin/build.sh" && "$(basename "$plugin")" != template ]] || continue
    if [[ -f "$plugin/test.sh" ]]; then
      echo "lang-plugins: testing $plugin ..."
      start=$SECONDS
      bash "$plugin/test.sh"
      echo "lang-plugins: tested $plugin in $((SECONDS - start)) s"
    fi
    echo "lang-plugins: building $plugin ..."
    start=$SECONDS
    bash "$plugin/build.sh"
    echo "lang-plugins: built $plugin in $((SECONDS - start)) s"
  done
done
