// Package kws is the Go SDK for kube-wasm-scheduler guest plugins (contract kws:plugin@0.2.1, world
// filter-score-plugin, or gang-plugin with the build tag kws_gang): a plugin written in Go and compiled by the
// standard Go toolchain (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared) serves Filter, Score and NormalizeScore
// to the scheduler, or PreFilter, Reserve and Permit with the pod view, the waiting pods and events
// ([PreFilterer], [Permitter], [Pods], [WaitingPods], [EventsRegistrar]).
//
// A plugin is a type with the methods of the points it serves ([Filterer], [Scorer], [ScoreNormalizer],
// optionally [Preparer] for per-node data derived when a node changes), built from its configuration by a
// constructor, and registered with one line:
//
//	type Plugin struct{ key string }
//
//	func New(cfg *kws.Config) (*Plugin, error) {
//		key, err := cfg.String("labelKey", "priority.example.com")
//		return &Plugin{key: key}, err
//	}
//
//	func (p *Plugin) Score(pod *kws.CyclePod, node *kws.NodeInfo) (int64, error) {
//		v, _ := node.Label(p.key)
//		return strconv.ParseInt(v, 10, 64)
//	}
//
//	func init() { kws.Register(New) }
//
//	func main() {}
//
// The SDK is the contract's glue, mirroring the Rust SDK (guest-plugins/sdk): the node table kept from
// `nodes.apply`, the cycle's pod fetched from the host on first use after `cycle.begin`, Filter's compact
// batched answer, statuses, and the hand-written canonical-ABI code (abi_wasip1.go) that Go's
// //go:wasmexport and //go:wasmimport need, because wit-bindgen-go's output does not compile with the standard
// Go toolchain. Off Wasm, [Harness] drives the same dispatch for a plugin's unit tests.
package kws
