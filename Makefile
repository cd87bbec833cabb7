# The two commands a newcomer needs: `make demo` and `make test`. Both set up what is missing first.

# Build output lives outside the clone so a fresh clone (CI) reuses what an earlier run compiled.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/kube-wasm-scheduler/target
BIN := $(CARGO_TARGET_DIR)/debug/kube-wasm-scheduler
EXAMPLE ?= examples/second-scheduler

.PHONY: demo test bench setup build check

setup:
	@scripts/setup.sh

build: setup
	cargo build --bin kube-wasm-scheduler

## demo: build, then simulate an example cluster and print the placements (and one pod's explanation).
demo: build
	@echo "== simulate $(EXAMPLE)"
	$(BIN) simulate --config $(EXAMPLE)/profile.yaml --cluster $(EXAMPLE)/cluster.yaml --explain default/web-1
	@echo
	@echo "== simulate examples/preemption"
	$(BIN) simulate --config examples/preemption/profile.yaml --cluster examples/preemption/cluster.yaml

## test: every test (unit, integration, golden simulator runs).
test: setup
	cargo test --workspace --all-targets --no-fail-fast

## bench: criterion benchmarks (release build), results under $(CARGO_TARGET_DIR)/criterion.
bench: setup
	cargo bench -p kube-wasm-scheduler

check: setup
	cargo check --workspace --all-targets
