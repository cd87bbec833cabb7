package kws

import (
	"errors"
	"fmt"
)

// Filterer is a plugin that serves Filter: whether the cycle's pod fits on one node. A status other than
// success rejects the node; equal statuses from many nodes cross the boundary once.
type Filterer interface {
	Filter(pod *CyclePod, node *NodeInfo) Status
}

// Scorer is a plugin that serves Score: one raw score of the cycle's pod per node. An error fails the call; a
// [Status] error keeps its code, any other error is CodeError.
type Scorer interface {
	Score(pod *CyclePod, node *NodeInfo) (int64, error)
}

// ScoreNormalizer is a Scorer that maps the raw scores of all feasible nodes into [0, MaxNodeScore] in place
// (see [ScaleToMax]). Without it the scores are passed on unchanged, which the host accepts only when they
// already are in range.
type ScoreNormalizer interface {
	NormalizeScore(pod *CyclePod, scores []int64) error
}

// Preparer is a plugin that derives data from each node when the node changes (a parsed label, say), so Filter
// and Score read it with [NodeInfo.Data] instead of redoing the work for every pod.
type Preparer interface {
	Prepare(node *Node) any
}

// constructor builds the registered plugin; set by Register.
var constructor func(cfg *Config) (any, error)

// Register names the plugin's constructor; call it once, from an init function. The plugin is built from its
// configuration on the first call that needs it (the host's config.validate comes first); a constructor error
// fails validate, so the scheduler refuses to start with the configuration, and fails every later call.
// P must implement at least one of [Filterer], [Scorer], [PreFilterer], [Reserver], [Permitter] and
// [EventsRegistrar]; which of them the host calls is the world the plugin is built for (filter-score-plugin
// serves Filter and Score, gang-plugin PreFilter, Reserve, Permit, events and the pod view).
func Register[P any](newPlugin func(cfg *Config) (P, error)) {
	if constructor != nil {
		panic("kws.Register called twice")
	}
	constructor = func(cfg *Config) (any, error) {
		p, err := newPlugin(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// CyclePod is the pod of the scheduling cycle in progress, the one Filter, Score and NormalizeScore are about.
// The host does not send it with those calls: it is fetched (host.cycle-pod) the first time the plugin asks in a
// cycle and kept until the next cycle.begin, so it crosses the boundary at most once per cycle, and never for a
// policy that looks only at nodes.
type CyclePod struct {
	pod *Pod
}

// Pod is the cycle's pod, or nil when the host has none (outside Filter, Score and NormalizeScore).
func (c *CyclePod) Pod() *Pod {
	// A none is not kept: asking again costs no copy, and it must not hide the pod from the calls that follow.
	if c.pod == nil {
		c.pod = hostCyclePod()
	}
	return c.pod
}

// rt is the instance's state. A Wasm instance is single-threaded and never entered twice at once, so package
// state needs no lock.
var rt struct {
	built  bool
	plugin any
	err    error
	table  nodeTable
	pod    CyclePod
}

// instance is the plugin, built on first use; a build error is logged once and returned by every call.
func instance() (any, error) {
	if !rt.built {
		rt.built = true
		rt.plugin, rt.err = build()
		if rt.err != nil {
			Log(LevelError, rt.err.Error())
		}
	}
	return rt.plugin, rt.err
}

func build() (any, error) {
	if constructor == nil {
		return nil, errors.New("no plugin registered: call kws.Register from an init function")
	}
	// Errors name the configuration as the Rust SDK's do, so a user reads the same line whatever the language.
	raw := hostConfig()
	cfg, err := parseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("plugin configuration %q: %v", raw, err)
	}
	p, err := constructor(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin configuration %q: %v", raw, err)
	}
	switch p.(type) {
	case Filterer, Scorer, PreFilterer, Reserver, Permitter, EventsRegistrar:
	default:
		return nil, fmt.Errorf("plugin %T serves no extension point (Filter, Score, PreFilter, Reserve, Permit)", p)
	}
	return p, nil
}

// asStatus is the status an error stands for: a Status keeps its code (a success given as an error becomes an
// Error, since it reports a failure), anything else is CodeError with the error's text.
func asStatus(err error) Status {
	var st Status
	if errors.As(err, &st) {
		if st.Code == CodeSuccess {
			st.Code = CodeError
		}
		return st
	}
	return Status{Code: CodeError, Reasons: []string{err.Error()}}
}

// validate is config.validate: the plugin builds with its configuration, or why not.
func validate() error {
	_, err := instance()
	return err
}

// begin is cycle.begin: the cached pod belongs to the previous cycle.
func begin() { rt.pod = CyclePod{} }

// applyChange is one entry of nodes.apply.
func applyChange(c NodeChange) { rt.table.apply(c) }

// filterBatch is Filter over slots in the contract's compact shape: only the positions of the nodes that do not
// pass, each pointing at one of the distinct statuses. With a configuration error, every node is rejected with it.
func filterBatch(slots []uint32) (statuses []Status, rejected, verdicts []uint32) {
	p, err := instance()
	if err != nil {
		rejected = make([]uint32, len(slots))
		for i := range rejected {
			rejected[i] = uint32(i)
		}
		return []Status{asStatus(err)}, rejected, make([]uint32, len(slots))
	}
	f, ok := p.(Filterer)
	if !ok {
		return nil, nil, nil
	}
	last := -1
	for i, slot := range slots {
		var st Status
		if n := rt.table.info(slot, p); n != nil {
			st = f.Filter(&rt.pod, n)
		} else {
			st = missingSlot(slot)
		}
		if st.Code == CodeSuccess {
			continue
		}
		// Most rejections repeat the previous one: check it before searching the few distinct statuses.
		v := -1
		if last >= 0 && statuses[last].equal(st) {
			v = last
		} else {
			for k := range statuses {
				if statuses[k].equal(st) {
					v = k
					break
				}
			}
		}
		if v < 0 {
			statuses = append(statuses, st)
			v = len(statuses) - 1
		}
		last = v
		rejected = append(rejected, uint32(i))
		verdicts = append(verdicts, uint32(v))
	}
	return statuses, rejected, verdicts
}

// scoreBatch is Score over slots into out (len(out) == len(slots)); a plugin without Score scores 0.
func scoreBatch(slots []uint32, out []int64) *Status {
	p, err := instance()
	if err != nil {
		st := asStatus(err)
		return &st
	}
	s, ok := p.(Scorer)
	if !ok {
		clear(out)
		return nil
	}
	for i, slot := range slots {
		n := rt.table.info(slot, p)
		if n == nil {
			st := missingSlot(slot)
			return &st
		}
		v, err := s.Score(&rt.pod, n)
		if err != nil {
			st := asStatus(err)
			return &st
		}
		out[i] = v
	}
	return nil
}

// normalizeBatch is NormalizeScore over the raw scores, in place.
func normalizeBatch(scores []int64) *Status {
	p, err := instance()
	if err != nil {
		st := asStatus(err)
		return &st
	}
	if n, ok := p.(ScoreNormalizer); ok {
		if err := n.NormalizeScore(&rt.pod, scores); err != nil {
			st := asStatus(err)
			return &st
		}
	}
	return nil
}
