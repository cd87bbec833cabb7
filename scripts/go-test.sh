#!/usr/bin/env bash
# Runs the Go guest SDK's and the Go guests' own unit tests (`go test`, natively: the SDK's Harness plays the host), and
# the benchmark drivers' (bench/live, bench/suite), with the Go that builds the guests (scripts/go-guest.sh). `make test` runs it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=go-guest.sh
source "$ROOT/scripts/go-guest.sh"
go="$(go_guest_go)" || { "$ROOT/scripts/setup-wasm.sh" go && go="$(go_guest_go)"; } \
  || { echo "go-test: Go 1.24 or later not found; run scripts/setup-wasm.sh go" >&2; exit 1; }
for dir in "$ROOT"/guest-plugins/*-go; do   # sdk-go and every Go guest
  [ -f "$dir/go.mod" ] || continue
  (cd "$dir" && GOTOOLCHAIN=local "$go" test -count=1 ./...)
done
# The benchmark drivers' own unit tests (parity classification, the suite's config reading and expectations).
for dir in "$ROOT"/bench/live "$ROOT"/bench/suite; do
  (cd "$dir" && GOTOOLCHAIN=local "$go" test -count=1 ./...)
done
