package main

// Expectations: the measured pods each workload ends with scheduled and pending, recorded once from kube-scheduler
// (--record) and checked against another contender (--expect). `make test` runs the integration-test workloads this
// way on ours alone, so a workload whose pods end differently fails the test instead of going unnoticed.

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Expected is one measurement's outcome: how many measured pods existed, were bound and stayed pending.
type Expected struct {
	Name      string `json:"name"`
	Pods      int    `json:"pods"`
	Scheduled int    `json:"scheduled"`
	Pending   int    `json:"pending"`
	// Churned: a churn op adds pods to the measured namespaces at its own pace; Pods counts the others, and
	// Scheduled and Pending are not recorded (see Measurement.Churned).
	Churned bool `json:"churned,omitempty"`
}

// Expectations is the file: which scheduler and workload files they were recorded from, and per workload
// (TestCase/Workload) its measurements in order.
type Expectations struct {
	RecordedFrom string                `json:"recordedFrom"`
	Workloads    map[string][]Expected `json:"workloads"`
}

// expectedOf is what result r measured, as an expectation.
func expectedOf(r Result) []Expected {
	out := make([]Expected, 0, len(r.Measurements))
	for _, m := range r.Measurements {
		if m.Churned {
			out = append(out, Expected{Name: m.Name, Pods: m.Pods - m.ChurnPods, Churned: true})
			continue
		}
		out = append(out, Expected{Name: m.Name, Pods: m.Pods, Scheduled: m.Scheduled, Pending: m.Pending})
	}
	return out
}

// record writes the outcomes of contender's successful runs to path (the first repetition of each workload); a
// workload that failed for it is left out and named in the returned error.
func record(path, contender, source string, results []Result) error {
	e := Expectations{RecordedFrom: contender + " on " + source, Workloads: map[string][]Expected{}}
	var failed []string
	for _, r := range results {
		if r.Contender != contender || r.Rep != 1 {
			continue
		}
		if !r.OK {
			failed = append(failed, r.Workload)
			continue
		}
		e.Workloads[r.Workload] = expectedOf(r)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--record: %w", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("--record: %s failed for %s and is not recorded", strings.Join(failed, ", "), contender)
	}
	return nil
}

// loadExpectations reads an --expect file.
func loadExpectations(path string) (*Expectations, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--expect: %w", err)
	}
	var e Expectations
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("--expect %s: %w", path, err)
	}
	if len(e.Workloads) == 0 {
		return nil, fmt.Errorf("--expect %s: no workloads", path)
	}
	return &e, nil
}

// check compares every result with its workload's expectation and returns one line per difference: a run that
// failed, a workload with no expectation, or a measurement whose counts differ.
func (e *Expectations) check(results []Result) []string {
	var bad []string
	for _, r := range results {
		who := fmt.Sprintf("%s (%s, rep %d)", r.Workload, r.Contender, r.Rep)
		if !r.OK {
			bad = append(bad, fmt.Sprintf("%s: did not complete: %s", who, strings.TrimSpace(r.Error+" "+r.NotApplicable)))
			continue
		}
		want, ok := e.Workloads[r.Workload]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: no expectation recorded (record one from kube-scheduler with --record)", who))
			continue
		}
		got := expectedOf(r)
		if len(got) != len(want) {
			bad = append(bad, fmt.Sprintf("%s: %d measurements, expected %d", who, len(got), len(want)))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				bad = append(bad, fmt.Sprintf("%s: measurement %q: %d pods, %d scheduled, %d pending; expected %d, %d, %d",
					who, got[i].Name, got[i].Pods, got[i].Scheduled, got[i].Pending, want[i].Pods, want[i].Scheduled, want[i].Pending))
			}
		}
	}
	sort.Strings(bad)
	return bad
}
