#!/usr/bin/env bash
# The demo, offline (a scripted model; the only web server is a local one it
# starts): builds wasmclaw and the example plugins, installs them in
# a demo home folder (target/demo) as an operator would, lets a scripted model
# drive them through a turn of several iterations, shows the hooks at work,
# and shows the sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/step.sh "building the host (release; minutes on a clean checkout, seconds after)" \
  cargo build --release -p wasmclaw
bash scripts/step.sh "building the example plugins (wasm32-wasip2, release)" \
  cargo build --release --target wasm32-wasip2 --manifest-path plugins/Cargo.toml --target-dir target/guests

home="$PWD/target/demo"
rm -rf "$home"
mkdir -p "$home/plugins" "$home/workspace" "$home/audit"
for p in calculator files research text time tool_policy secret_redactor audit_log prompt_context; do
  cp "target/guests/wasm32-wasip2/release/$p.wasm" "plugins/$p/$p.toml" "$home/plugins/"
done
export WASMCLAW_HOME="$home"

step() { printf '\n\033[1m$ wasmclaw %s\033[0m\n' "$*"; ./target/release/wasmclaw "$@" || true; }

step plugins list

printf '\n\033[1m# A turn: the scripted model calls tools over four iterations (events on stdout)\033[0m\n'
export WASMCLAW_MODEL="scripted:scripts/demo-model.json"
# Every event is a JSON line on stdout (--events -); the word-by-word llm_delta lines are left out here.
printf '\n\033[1m$ wasmclaw run --events - --session demo "Plan the garden party ..."\033[0m\n'
./target/release/wasmclaw run --events - --session demo \
  "Plan the garden party for two weeks and three days after 2026-12-01" | grep -v '"type":"llm_delta"' || true

printf '\n\033[1m# The same, as a chat: text streams, tool calls show as they run\033[0m\n'
printf '%s\n' "Plan the garden party again, please" "thanks!" | ./target/release/wasmclaw chat --session demo-chat || true

printf '\n\033[1m# Sub-agents: a subagent call with one tool, and the research plugin starting two through agent.spawn-subturn\033[0m\n'
printf '\n\033[1m$ wasmclaw run --session demo-sub "Use sub-agents ..."\033[0m\n'
./target/release/wasmclaw run --session demo-sub "Use sub-agents to check the party dates and budget" || true
step turns --session demo-sub

printf '\n\033[1m# Hooks: the tool policy denies .env, the secret redactor hides a key, the audit log keeps every event\033[0m\n'
mkdir -p "$home/workspace/deploy"
printf 'DATABASE_URL=postgres://admin:hunter2@db/prod\n' > "$home/workspace/.env"
printf 'region = eu-west-1\napi_key = sk-demo0123456789abcdefghijklmn\n' > "$home/workspace/deploy/settings.txt"
printf '\n\033[1m$ wasmclaw run --events - --session demo-hooks "Show me the deploy settings"   # hook, tool and end events only\033[0m\n'
./target/release/wasmclaw run --events - --session demo-hooks "Show me the deploy settings" 2>&1 \
  | grep -E '"type":"(hook_decision|hook_error|tool_call_end|turn_end)"|^[^{]' || true
printf '\n\033[1m# target/demo/audit/events.jsonl, written by the audit_log hook: events by kind\033[0m\n'
sed -n 's/.*"type":"\([a-z_]*\)".*/\1/p' "$home/audit/events.jsonl" | sort | uniq -c

printf '\n\033[1m# The HTTP API: wasmclaw serve, a message, its events replayed over SSE, an OpenAI-style request, metrics\033[0m\n'
out="$home/serve.out"
./target/release/wasmclaw serve --listen 127.0.0.1:0 --token demo-token > "$out" &
server=$!
for _ in $(seq 100); do grep -q 'serving on' "$out" && break; sleep 0.1; done
url=$(sed -n 's/^wasmclaw serving on //p' "$out")
# The command goes to stderr, so a pipe after `api` sees only the answer.
api() { printf '\n\033[1m$ curl %s\033[0m\n' "$*" >&2; curl -sS -H 'authorization: Bearer demo-token' -H 'content-type: application/json' "$@"; echo; }
api -d '{"content": "Plan the garden party over HTTP"}' "$url/v1/sessions/web/messages?wait=true"
# The session's events from the start (Last-Event-ID: 0), as `seq type`:
api --no-show-error --max-time 1 -H 'last-event-id: 0' "$url/v1/sessions/web/events?deltas=false" \
  | sed -n 's/^data: {"seq":\([0-9]*\),.*"parent_turn_id":[^,]*,"type":"\([a-z_]*\)".*/\1 \2/p' | tr '\n' ',' || true
api -d '{"messages": [{"role": "user", "content": "Plan the garden party, OpenAI style"}]}' "$url/v1/chat/completions"
api "$url/metrics" | grep -E '^wasmclaw_(turns_total|tool_calls_total)' || true
kill -TERM "$server"; wait "$server" || true

printf '\n\033[1m# Single tool calls\033[0m\n'
step plugins call calculate '{"expression":"(1 + 2) * 3 ^ 2 - sqrt(16)"}'
step plugins call write_file '{"path":"notes/todo.md","content":"- water the plants\n- call Ada\n"}'
step plugins call read_file '{"path":"notes/todo.md"}'
step plugins call search_files '{"pattern":"Ada"}'
step plugins call regex_replace '{"text":"call Ada at 10:30","pattern":"(\\d+):(\\d+)","replacement":"${1}h${2}"}'
step plugins call date_diff '{"from":"2024-02-01","to":"2025-03-15"}'

printf '\n\033[1m# The network: web_fetch reaches only the origins its grant names (here a local web server, named by its address)\033[0m\n'
mkdir -p "$home/site"
printf '<html><head><title>Party</title><style>p{}</style></head><body><h1>Garden party</h1><p>Saturday at <b>four</b>.</p><ul><li>lanterns</li><li>lemonade</li></ul></body></html>\n' > "$home/site/party.html"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$home/site" > "$home/site.out" 2>&1 &
site=$!
trap 'kill "$site" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q 'port [0-9]' "$home/site.out" && break; sleep 0.1; done
port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$home/site.out" | head -1)
[[ -n "$port" ]] || { echo "demo: the local web server did not start: $(cat "$home/site.out")" >&2; exit 1; }
cp target/guests/wasm32-wasip2/release/web_fetch.wasm "$home/plugins/"
printf '[network]\nallow = ["http://127.0.0.1:%s"]\nmax_requests = 3\n' "$port" > "$home/plugins/web_fetch.toml"
cat "$home/plugins/web_fetch.toml"
step plugins call web_fetch "{\"url\":\"http://127.0.0.1:$port/party.html\"}"
step plugins call web_fetch "{\"url\":\"http://localhost:$port/party.html\"}"
step plugins call web_fetch '{"url":"https://example.com/"}'
kill "$site"; wait "$site" 2>/dev/null || true

printf '\n\033[1m# Plugins in other languages (built by make lang-plugins): Python, JavaScript, C, Zig, Go\033[0m\n'
for p in csv_stats html_text checksum semver when; do
  cp "target/guests/lang/$p.wasm" "$home/plugins/"
  [[ ! -f "target/guests/lang/$p.toml" ]] || cp "target/guests/lang/$p.toml" "$home/plugins/"
done
step plugins call csv_summary '{"csv":"guest,age,drinks\nAda,36,2\nGrace,45,1\nLinus,29,3\n"}'
step plugins call html_to_text '{"html":"<h1>Invitation</h1><p>Bring <b>lanterns</b> &amp; <a href=\"https://example.com/map\">the map</a>.</p>"}'
step plugins call checksum '{"text":"garden party","algorithm":"sha256"}'
step plugins call semver_sort '{"versions":["1.10.0","1.2.3","0.9.0","1.2.10"]}'
step plugins call timezone_convert '{"datetime":"2026-12-18T16:00:00Z","to":"Asia/Tokyo"}'
step plugins call datetime_add '{"datetime":"2026-12-18","duration":"2y"}'

printf '\n\033[1m# The sandbox: files outside the grant, bad arguments, a broken plugin\033[0m\n'
step plugins call read_file '{"path":"../../etc/passwd"}'
step plugins call calculate '{"expr":"1+1"}'
printf '\0asm\1\0\0\0' > "$home/plugins/broken.wasm"
step plugins check "$home/plugins/broken.wasm"
step plugins list
