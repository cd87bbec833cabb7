# The two commands a newcomer needs: `make demo` and `make test`. Both set up what is missing first.

# Build output lives outside the clone so a fresh clone (CI) reuses what an earlier run compiled.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/kube-wasm-scheduler/target
BIN := $(CARGO_TARGET_DIR)/debug/kube-wasm-scheduler
EXAMPLE ?= examples/second-scheduler


.PHONY: demo test test-versions registry fuzz campaign bench bench-tenancy bench-ratio bench-live bench-suite parity lint setup build check guests cluster-up cluster-down image test-image helm

setup:
	@scripts/setup.sh

build: setup
	cargo build --bin kube-wasm-scheduler

## guests: build every guest plugin to a component under guest-plugins/build/ (installs toolchains on first use).
guests: setup
	scripts/build-guests.sh

## demo: build the scheduler and the one guest the demo runs (only the Rust guest toolchain is set up), then simulate
## example clusters and print the placements, with explanations.
demo: build
	scripts/build-guests.sh priority-label
	@echo "== simulate $(EXAMPLE)"
	$(BIN) simulate --config $(EXAMPLE)/profile.yaml --cluster $(EXAMPLE)/cluster.yaml --explain default/web-1
	@echo
	@echo "== simulate examples/preemption"
	$(BIN) simulate --config examples/preemption/profile.yaml --cluster examples/preemption/cluster.yaml
	@echo
	@echo "== simulate examples/wasm-priority-label: native plugins plus a WebAssembly guest (PriorityLabel)"
	$(BIN) plugin check guest-plugins/build/priority-label.wasm
	$(BIN) simulate --config examples/wasm-priority-label/profile.yaml --cluster examples/wasm-priority-label/cluster.yaml --explain default/web-1

## test: every test (unit, integration with the built guests and a local OCI registry, golden simulator runs,
## benchmarks once each, and the Go guest SDK's and Go guests' own `go test`).
test: setup registry guests
	scripts/setup-browser.sh
	scripts/go-test.sh
	cargo test --workspace --all-targets --no-fail-fast

## test-versions: the end-to-end smoke (a second scheduler binding pods with events, FailedScheduling, the lease
## handed over, a volume and a DRA scenario) against each Kubernetes release this build serves: kube-apiserver
## $(KUBE_VERSIONS) (each built from the Go module proxy on first use, several minutes, then cached).
KUBE_VERSIONS ?= v1.35.4 v1.36.3 v1.37.2
SMOKE ?= second_scheduler,failed_scheduling_is_one_series,leader_election_hands_over,claims_that_wait_for_their_first_consumer,a_claimed_device_is_allocated_on_the_claim_and_the_pod_bound_to_its_node,a_kubectl_dump_is_simulated
test-versions: setup registry guests
	@for v in $(KUBE_VERSIONS); do \
	  echo "== kube-apiserver $$v"; \
	  KUBE_VERSION=$$v KWS_E2E_ONLY=$(SMOKE) cargo test -p kube-wasm-scheduler --test e2e -- end_to_end_on_a_real_api_server --nocapture || exit 1; \
	done

## registry: the CNCF distribution registry for the plugin delivery tests, built from the Go module proxy on first
## use (a few minutes) and cached under ~/.cache/kube-wasm-scheduler/registry.
registry:
	@scripts/build-registry.sh >/dev/null

## fuzz: the property tests (quantities, cluster files, configurations) and the hostile guest's garbled answers
## (lifting) with many more cases than `make test` runs: PROPTEST_CASES (default 20000), KWS_FUZZ_SEEDS (default
## 2000 seeds, four runs each).
fuzz: setup guests
	PROPTEST_CASES=$${PROPTEST_CASES:-20000} cargo test -p kube-wasm-scheduler --test integration -- properties config_props
	KWS_FUZZ_SEEDS=$${KWS_FUZZ_SEEDS:-2000} cargo test -p kube-wasm-scheduler --test integration -- lifting

## campaign: hostile inputs against the scheduler binary (configurations, cluster files, quantities, plugin files,
## hostile guests, hostile registries and https plugin servers) and a table of outcomes; fails on any panic, hang,
## wrong result or silently accepted bad input. Needs python3-yaml (and openssl for the https servers). CAMPAIGN_ARGS e.g. "--random 1000 --seed 7".
campaign: build guests
	scripts/campaign.py --bin $(BIN) $(CAMPAIGN_ARGS)

## bench: criterion benchmarks (release build), results under $(CARGO_TARGET_DIR)/criterion.
bench: setup guests
	cargo bench -p kube-wasm-scheduler

## bench-tenancy: what tenant policies cost (scripts/bench-tenancy.py): 50 namespaces with a SchedulingPolicy each,
## 5,000 pods on 200 nodes, simulated with and without the policies, interleaved; CPU per pod, peak RSS, ratios.
bench-tenancy: setup registry guests
	scripts/bench-tenancy.py $(BENCH_ARGS)

## bench-ratio: benchmark (a)'s Wasm/native ratio in several fresh processes, with median, min and max.
bench-ratio: setup guests
	scripts/bench-ratio.sh

## bench-live: our scheduler live beside kube-scheduler v1.37.2 and a null binder on a throwaway kube-apiserver,
## interleaved; Markdown tables, JSON/CSV and a plot under ~/.cache/kube-wasm-scheduler/bench-live/ (not part of
## make test; the default run takes ~40 minutes, BENCH_QUICK=1 is a one-minute smoke run; sizes, shapes, repetitions,
## KWS_BIN: see bench/live/run.sh and docs/performance.md).
bench-live: setup
	bench/live/run.sh $(BENCH_ARGS)

## bench-suite: kube-scheduler's own scheduler_perf workloads (read from the k8s.io/kubernetes module, not copied),
## run on a throwaway kube-apiserver by kube-scheduler v1.37.2 and ours in turn; upstream's SchedulingThroughput, CPU,
## peak RSS, scheduled/pending pods, as JSON and Markdown under ~/.cache/kube-wasm-scheduler/bench-suite/ (not part
## of make test). SUITE=short|all|integration, FILTER (regexp on TestCase/Workload), BENCH_REPS, KWS_BIN,
## BENCH_CONTENDERS: see bench/suite/run.sh and docs/performance.md.
bench-suite: setup
	bench/suite/run.sh $(BENCH_ARGS)

## parity: our decisions beside kube-scheduler v1.37.2's, live on a throwaway control plane, and the simulator's on
## the same cluster files: seeded random clusters and probe pods covering every default plugin's inputs; prints the
## agreement, the ties (apart) and every divergence with the probe and both choices, and fails on any divergence.
## PARITY_SEEDS (default 5, or "3-7", "1,4,9"), PARITY_PROBES (80), PARITY_NODES (40), PARITY_ARGS (harness flags);
## see scripts/parity.sh. `make test` runs a short one (host/tests/e2e/parity.rs).
parity: setup
	scripts/parity.sh $(PARITY_ARGS)

check: setup
	cargo check --workspace --all-targets

## lint: rustfmt and clippy over the whole workspace, warnings as errors (needs the rustfmt and clippy components).
lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

# A real control plane (etcd + kube-apiserver on 127.0.0.1, no kubelet) for trying the scheduler against.
CLUSTER_DIR ?= $(HOME)/.cache/kube-wasm-scheduler/cluster

## cluster-up: start etcd + kube-apiserver in $(CLUSTER_DIR) (builds kube-apiserver on first use, several minutes).
cluster-up:
	@scripts/control-plane.sh up $(CLUSTER_DIR) >/dev/null
	@echo
	@echo "Control plane running; data and logs in $(CLUSTER_DIR). Point kubectl and the scheduler at it with:"
	@echo "  $$(scripts/control-plane.sh env $(CLUSTER_DIR))"
	@echo "  kubectl get --raw /readyz"
	@echo "Scheduler: set clientConnection.kubeconfig: $(CLUSTER_DIR)/kubeconfig in its profile."
	@echo "Nodes need no kubelet, and this API server does not taint new nodes not-ready. A schedulable node:"
	@echo "  echo '{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"node-1\"}}' | kubectl create -f -"
	@echo "  kubectl patch node node-1 --subresource=status --type=merge -p '{\"status\": {\"allocatable\": {\"cpu\": \"8\", \"memory\": \"32Gi\", \"pods\": \"110\"}}}'"
	@echo "Stop it with: make cluster-down"

## cluster-down: stop the control plane started by cluster-up (its data stays in $(CLUSTER_DIR)).
cluster-down:
	@scripts/control-plane.sh down $(CLUSTER_DIR)

# The container image of deploy/manifests and deploy/chart: what deploy/image.txt lists (the release binary and the
# Rust sample guests under /plugins/, user 65532, no shell), built from the Dockerfile by an engine, or by buildah
# from scratch where none runs.
IMAGE ?= kube-wasm-scheduler:0.1.0

## image: build $(IMAGE): from the Dockerfile with docker or podman, whichever has an engine running; where neither
## does, with buildah from scratch (scripts/build-image.sh: the release binary, the libraries it loads, the sample
## guests; installs buildah when missing).
image:
	@engine=""; \
	for e in docker podman; do \
	  if command -v $$e >/dev/null 2>&1 && timeout 20 $$e info >/dev/null 2>&1; then engine=$$e; break; fi; \
	done; \
	if [ -n "$$engine" ]; then \
	  echo "$$engine build -t $(IMAGE) ."; \
	  $$engine build -t $(IMAGE) .; \
	else \
	  echo "make image: no docker or podman engine runs here: buildah, from scratch (scripts/build-image.sh)" >&2; \
	  scripts/build-image.sh --tag $(IMAGE); \
	fi

## test-image: the release image built with buildah (deploy/image.txt), pushed to a local registry, pulled back
## into fresh storage and run from its own root filesystem (chroot, user 65532, read-only, the pod template's
## volumes and in-cluster credentials) with deploy/manifests' command and args against a throwaway control plane:
## ready, leading, and a pod bound. As root. Not part of make test: the release build takes 20-40 minutes cold on
## two cores (66 minutes here beside other builds); the rest takes about 40 seconds (scripts/test-image.sh).
test-image: setup registry
	scripts/test-image.sh

## helm: build helm from the Go module proxy (cached under ~/.cache/kube-wasm-scheduler/helm) and print where.
helm:
	@scripts/build-helm.sh
