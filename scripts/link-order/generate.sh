#!/usr/bin/env bash
# Writes host/link-order.txt: the functions a one-shot `wasmclaw run` (a text
# turn, and a turn that calls a plugin's tool) and `serve` (the same two
# turns over the API) execute, found with valgrind's callgrind, for the
# linker to lay out together (see host/build.rs). Run it (`make link-order`)
# after updating dependencies (their functions' names change with their
# versions) or changing much of the host's start-up or turn path; a stale
# list still links, with less of the gain. It leaves an unstripped release
# build in target/release (or under $CARGO_TARGET_DIR, when set).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v valgrind >/dev/null; then
  echo "link-order: valgrind is needed (Debian's package valgrind)" >&2
  exit 1
fi

# The names come from the symbols, which the release profile strips.
CARGO_PROFILE_RELEASE_STRIP=none cargo build --release -p wasmclaw
cargo build --release --target wasm32-wasip2 --manifest-path plugins/Cargo.toml \
  --target-dir target/guests -p calculator

work="$PWD/target/link-order"
rm -rf "$work"
mkdir -p "$work/home/plugins"
cp target/guests/wasm32-wasip2/release/calculator.wasm plugins/calculator/calculator.toml "$work/home/plugins/"
# The instance pool of the default 1,000 instances reserves more address
# space than valgrind can give.
printf '[plugins]\nmax_instances = 1\n' > "$work/home/wasmclaw.toml"

serve=
python3 scripts/link-order/model.py "$work/model-port" &
model=$!
trap 'kill $model $serve 2>/dev/null || true' EXIT
# Says which step failed, with the end of what valgrind and wasmclaw said.
fail() {
  echo "link-order: $1" >&2
  tail -n 20 "$work/valgrind.log" >&2 2>/dev/null || true
  exit 1
}
for _ in $(seq 100); do [ -s "$work/model-port" ] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/model-port")/v1"

export WASMCLAW_HOME="$work/home" RUST_LOG=error
bin="${CARGO_TARGET_DIR:-target}/release/wasmclaw"
model_args=(--model openai:order --base-url "$base")
grind() {
  valgrind --tool=callgrind --demangle=no --dump-instr=no \
    --callgrind-out-file="$work/$1.callgrind" "${@:2}" 2>>"$work/valgrind.log"
}

# The first run compiles the plugin into the cache; the profiled ones load it.
"$bin" run "${model_args[@]}" "hi" >/dev/null
grind run-text "$bin" run "${model_args[@]}" "hi" >/dev/null || fail "the text turn of run failed"
grind run-tool "$bin" run "${model_args[@]}" "calculate 40 + 2" >/dev/null ||
  fail "the tool turn of run failed"

# valgrind itself in the background (not a function's subshell), so that
# $serve is the process to stop.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=link-order-token-0123456789
WASMCLAW_API_TOKEN=$token valgrind --tool=callgrind --demangle=no --dump-instr=no \
  --callgrind-out-file="$work/serve.callgrind" \
  "$bin" serve --listen "127.0.0.1:$port" "${model_args[@]}" >/dev/null 2>>"$work/valgrind.log" &
serve=$!
for _ in $(seq 600); do
  kill -0 $serve 2>/dev/null || fail "serve ended before it answered"
  curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break
  sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || fail "serve did not answer within 60 s"
for content in "hi" "calculate 40 + 2" "hi"; do
  curl -sf -o /dev/null -H "Authorization: Bearer $token" -H "Content-Type: application/json" \
    -d "{\"content\": \"$content\"}" "http://127.0.0.1:$port/v1/sessions/order/messages?wait=true" ||
    fail "a turn through serve failed"
done
# SIGTERM: serve stops as it does for a service manager (a background job
# of a script ignores SIGINT).
kill -TERM $serve
wait $serve || fail "serve did not stop cleanly"
serve=
[ -s "$work/serve.callgrind" ] || fail "no profile of serve"

python3 scripts/link-order/order.py "$bin" "$work/run-text.callgrind" "$work/run-tool.callgrind" \
  "$work/serve.callgrind" >host/link-order.txt
echo "host/link-order.txt: $(wc -l <host/link-order.txt) functions"
