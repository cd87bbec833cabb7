// Command priority-label-go is the PriorityLabel policy as a Go guest (world filter-score-plugin), the same
// behaviour as the Rust guest in guest-plugins/priority-label.
//
// Configuration (pluginConfig[].args.config): {"labelKey": "..."}, default key priority.example.com.
//
//   - Filter: a node without the label is UnschedulableAndUnresolvable, reason "node(s) didn't have label <key>".
//   - Score: the label's integer value; a non-integer value is an Error.
//   - NormalizeScore: score * 100 / max (negative scores count as 0; all 0 when no score is positive).
package main

import (
	"errors"
	"strconv"
	"strings"

	kws "example.invalid/kws/sdk-go"
)

// DefaultLabelKey is the label read when the configuration names none.
const DefaultLabelKey = "priority.example.com"

// label is a node's label as Prepare found it: missing, an integer, or not an integer.
type label struct {
	present bool
	integer bool
	value   int64
}

// PriorityLabel is the plugin: which label to read, and the Filter reason (the same text for every node, so the
// host counts it once).
type PriorityLabel struct {
	key     string
	missing kws.Status
}

// New builds the plugin from its configuration.
func New(cfg *kws.Config) (*PriorityLabel, error) {
	key, err := cfg.String("labelKey", DefaultLabelKey)
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, errors.New("labelKey must not be empty")
	}
	return &PriorityLabel{key: key, missing: kws.Unresolvable("node(s) didn't have label " + key)}, nil
}

// Prepare reads the label once per node change rather than once per pod.
func (p *PriorityLabel) Prepare(node *kws.Node) any {
	v, ok := node.Label(p.key)
	if !ok {
		return label{}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return label{present: true, integer: err == nil, value: n}
}

// Filter keeps the nodes that carry the label.
func (p *PriorityLabel) Filter(_ *kws.CyclePod, node *kws.NodeInfo) kws.Status {
	if !node.Data().(label).present {
		return p.missing
	}
	return kws.Success()
}

// Score is the label's integer value; Filter keeps unlabelled nodes out, so they score lowest if it is disabled.
func (p *PriorityLabel) Score(_ *kws.CyclePod, node *kws.NodeInfo) (int64, error) {
	l := node.Data().(label)
	switch {
	case !l.present:
		return 0, nil
	case !l.integer:
		v, _ := node.Label(p.key)
		return 0, kws.Errorf("node %s: label %s has non-integer value %q", node.Name, p.key, v)
	}
	return l.value, nil
}

// NormalizeScore scales by the maximum to [0, 100].
func (p *PriorityLabel) NormalizeScore(_ *kws.CyclePod, scores []int64) error {
	kws.ScaleToMax(scores, kws.MaxNodeScore)
	return nil
}

func init() { kws.Register(New) }

// main is not called: the module is a reactor (-buildmode=c-shared), whose exports the host calls after
// _initialize has run the init functions above.
func main() {}
