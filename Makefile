# Entry points for every developer task. The README's two commands are
# `make demo` (the demo: no model or network needed once the toolchains
# are installed) and `make test` (what CI runs).

GUESTS := --release --target wasm32-wasip2 --target-dir target/guests
# Each step says what it does before it starts and how long it took.
STEP := bash scripts/step.sh

.PHONY: setup pyenv plugins lang-plugins demo test lint bench install link-order

# The guest target; rustup does not add it on its own.
setup:
	@$(STEP) "rustup: the wasm32-wasip2 target" rustup target add wasm32-wasip2

# The official Python SDKs, pinned, in a virtualenv at target/pyenv:
# OpenAI's (tests/all/serve_openai.rs drives `wasmclaw serve` with it) and
# MCP's (the MCP tests' clients and servers). Skipped when those versions
# are already there.
OPENAI_PY := 3.57.0
MCP_PY := 2.3.0
PYENV := target/pyenv
PY_CHECK := import sys, openai, importlib.metadata as m; sys.exit(openai.__version__ != '$(OPENAI_PY)' or m.version('mcp') != '$(MCP_PY)')

pyenv:
	@if $(PYENV)/bin/python -c "$(PY_CHECK)" 2>/dev/null; then \
		echo "$(PYENV): openai $(OPENAI_PY) and mcp $(MCP_PY) are installed"; \
	else \
		echo "$(PYENV): installing openai $(OPENAI_PY) and mcp $(MCP_PY) ..." && start=$$(date +%s) && \
		python3 -m venv --clear $(PYENV) && \
		$(PYENV)/bin/python -m pip install --quiet --disable-pip-version-check openai==$(OPENAI_PY) mcp==$(MCP_PY) && \
		echo "$(PYENV): installed in $$(( $$(date +%s) - start )) s"; \
	fi

# The example plugins, into target/guests/wasm32-wasip2/release.
plugins: setup
	@$(STEP) "building the example plugins (wasm32-wasip2, release)" cargo build $(GUESTS) --manifest-path plugins/Cargo.toml

# The example plugins in Python, JavaScript, C, Zig and Go, into
# target/guests/lang: their toolchains are installed into target/toolchains
# first, and each plugin's own unit tests run before it is built.
lang-plugins: setup
	@$(STEP) "toolchains and plugins in other languages" bash scripts/lang-plugins.sh

demo: setup lang-plugins
	@$(STEP) "the demo" bash scripts/demo.sh

# `wasmclaw` on the PATH: built with the cargo profile PROFILE (default
# `release`: optimised whole, no debug info; `dev` installs the debug build,
# `profiling` one with line tables) and copied to PREFIX/bin, default
# ~/.cargo/bin, where rustup puts cargo (so it is on the PATH already).
# Same as `cargo install --path host --locked` for the release profile.
PROFILE ?= release
PREFIX ?= $(HOME)/.cargo
PROFILE_DIR = $(if $(filter dev test,$(PROFILE)),debug,$(if $(filter bench,$(PROFILE)),release,$(PROFILE)))

install:
	cargo build --locked --profile $(PROFILE) -p wasmclaw
	install -D -m 755 target/$(PROFILE_DIR)/wasmclaw $(PREFIX)/bin/wasmclaw
	@echo "installed $(PREFIX)/bin/wasmclaw ($(PROFILE) profile)"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "note: $(PREFIX)/bin is not on PATH";; esac

# Formatting, the host and test plugins, every test, then lints (the
# OpenAI SDK and the plugins in other languages first, for the tests that
# use them).
test: setup lang-plugins pyenv
	@$(STEP) "formatting (cargo fmt --check)" cargo fmt --all --check
	@$(STEP) "building the host (debug)" cargo build -p wasmclaw
	@$(STEP) "every test (cargo test --workspace; the first run also builds the test plugins)" cargo test --workspace
	@$(STEP) "lints (cargo clippy)" cargo clippy --workspace --all-targets -- -D warnings

# Lints of the guest workspaces too (slower: a wasm32 check build).
lint: test
	@$(STEP) "lints of the example plugins" cargo clippy $(GUESTS) --manifest-path plugins/Cargo.toml -- -D warnings
	@$(STEP) "lints of the test plugins" cargo clippy $(GUESTS) --manifest-path tests/fixtures/Cargo.toml -- -D warnings

# Benchmarks: tables on stdout, figures in
# target/bench/{runtime,turns,scheduler,subturns,serve,hooks,languages,sse,isolation,idle_sessions,host_cost,many_sessions,compaction,mcp}.json.
# The release binary (optimised whole, which `host_cost` runs, beside the
# floor of a turn it is measured against: tests/floor) and the benches
# (built without LTO: see `[profile.bench]` in Cargo.toml) each build the
# host's dependencies.
bench: setup lang-plugins
	@$(STEP) "building the host and the floor (release)" cargo build --release -p wasmclaw -p wasmclaw-floor
	@$(STEP) "benchmarks" cargo bench -p wasmclaw-tests --bench runtime --bench turns --bench scheduler --bench subturns --bench serve --bench hooks --bench languages --bench sse --bench isolation --bench idle_sessions --bench host_cost --bench many_sessions --bench compaction --bench mcp

# host/link-order.txt, the functions the release binary lays out first and
# together (see host/build.rs), from valgrind's callgrind at `run` and
# `serve`. After updating or adding dependencies, or changing the start-up
# or turn path: names carry hashes that such changes move (adding `memchr`
# renamed 1,500 of 3,600, and `run`'s peak RSS rose from 12 to 16.6 MB
# until the list was written again).
link-order: setup
	@$(STEP) "the functions run and serve execute, in host/link-order.txt" bash scripts/link-order/generate.sh
