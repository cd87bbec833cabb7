// Package kit is what the live benchmarks' Go programs share (bench/live/driver, bench/suite): the contenders (how
// each scheduler is configured, started, probed for readiness and stopped), the control plane's pids and port,
// what they read from /proc, and small helpers for the API server.
package kit
