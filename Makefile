# Entry points for every developer task. The README's two commands are
# `make demo` (the offline demo) and `make test` (what CI runs).

GUESTS := --release --target wasm32-wasip2 --target-dir target/guests

.PHONY: setup plugins demo test lint bench

# The guest target; rustup does not add it on its own.
setup:
	rustup target add wasm32-wasip2

# The example plugins, into target/guests/wasm32-wasip2/release.
plugins: setup
	cargo build $(GUESTS) --manifest-path plugins/Cargo.toml

demo: setup
	bash scripts/demo.sh

# Formatting, the host and test plugins, every test, then lints.
test: setup
	cargo fmt --all --check
	cargo build -p wasmclaw
	cargo test --workspace
	cargo clippy --workspace --all-targets -- -D warnings

# Lints of the guest workspaces too (slower: a wasm32 check build).
lint: test
	cargo clippy $(GUESTS) --manifest-path plugins/Cargo.toml -- -D warnings
	cargo clippy $(GUESTS) --manifest-path tests/fixtures/Cargo.toml -- -D warnings

# Benchmarks: tables on stdout, figures in
# target/bench/{runtime,turns,scheduler,subturns}.json.
bench: setup
	cargo bench -p wasmclaw-tests --bench runtime --bench turns --bench scheduler --bench subturns
