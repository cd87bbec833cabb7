package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// run is a synthetic result: one measured op of the given throughput (0: no samples), the scheduler's CPU seconds
// and peak RSS.
func run(workload, family string, threshold float64, contender string, rep int, pods, cpu, rss float64) Result {
	samples := 10
	if pods == 0 {
		samples = 0
	}
	return Result{Workload: workload, Family: family, Threshold: threshold, Contender: contender, Rep: rep, OK: true,
		Measurements: []Measurement{{Name: "op 3 createPods", Throughput: Throughput{Samples: samples, Average: pods}}},
		SchedCPUS:    cpu, SchedRSSMiB: rss}
}

// syntheticResults: two families, two repetitions of kube, ours and null. Affinity/5000Nodes (threshold 40) is
// scheduling-bound (kube at 0.2-0.25 of null); Misc/500Nodes<&> is not, ours failed its second repetition there,
// and ours-guests is not applicable to it.
func syntheticResults() []Result {
	const a, m = "Affinity/5000Nodes", "Misc/500Nodes<&>"
	failed := Result{Workload: m, Family: "misc", Contender: "ours", Rep: 2, Error: "op 2 (createPods): timed out"}
	na := func(rep int) Result {
		return Result{Workload: m, Family: "misc", Contender: "ours-guests", Rep: rep, NotApplicable: "gate refused"}
	}
	return []Result{
		run(a, "affinity", 40, "kube", 1, 40, 10, 100), run(a, "affinity", 40, "ours", 1, 100, 2, 60), run(a, "affinity", 40, "null", 1, 200, 1, 20),
		run(a, "affinity", 40, "kube", 2, 50, 10, 100), run(a, "affinity", 40, "ours", 2, 150, 3, 80), run(a, "affinity", 40, "null", 2, 200, 1, 20),
		run(m, "misc", 0, "kube", 1, 100, 4, 100), run(m, "misc", 0, "ours", 1, 110, 4, 120), run(m, "misc", 0, "null", 1, 150, 1, 20), na(1),
		run(m, "misc", 0, "kube", 2, 140, 4, 100), failed, run(m, "misc", 0, "null", 2, 150, 1, 20), na(2),
	}
}

// comparisonTable parses the side-by-side table of summary.md into rows of cells by column name, by workload.
func comparisonTable(t *testing.T, md string) map[string]map[string]string {
	t.Helper()
	_, section, ok := strings.Cut(md, "## Side by side")
	if !ok {
		t.Fatalf("no side-by-side section in:\n%s", md)
	}
	var head []string
	out := map[string]map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if head == nil {
			head = cells
			continue
		}
		if len(cells) != len(head) {
			t.Fatalf("row %q has %d cells, the header %d", line, len(cells), len(head))
		}
		row := map[string]string{}
		for i, c := range cells {
			row[head[i]] = c
		}
		out[cells[0]] = row
	}
	return out
}

// number is the leading number of a cell ("2.75", "0.92†", "3.12 met").
func number(t *testing.T, cell string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimRight(strings.Fields(cell + " x")[0], "†"), 64)
	if err != nil {
		t.Fatalf("cell %q: %v", cell, err)
	}
	return f
}

// The comparison's ratios are medians of per-repetition ratios where the repetitions pair up, ratios of medians
// where a run failed; the target follows kube-scheduler's share of the null binder's rate; failed and not
// applicable runs are named, not counted.
func TestComparisonRatiosAndTargets(t *testing.T) {
	md := markdown(syntheticResults(), nil)
	tab := comparisonTable(t, md)
	a, m := tab["Affinity/5000Nodes"], tab["Misc/500Nodes<&>"]
	if a == nil || m == nil {
		t.Fatalf("rows missing: %v", tab)
	}
	near := func(what, cell string, want float64) {
		t.Helper()
		if got := number(t, cell); math.Abs(got-want) > 0.006 {
			t.Errorf("%s = %q, want %.3f", what, cell, want)
		}
	}
	// paired: 100/40 and 150/50 → 2.75 (the ratio of the medians, 125/45, would be 2.78)
	near("affinity ours/kube", a["ours/kube"], 2.75)
	if strings.Contains(a["ours/kube"], "†") {
		t.Errorf("affinity ours/kube %q marked as a ratio of medians", a["ours/kube"])
	}
	near("affinity kube/null", a["kube/null"], 0.225)
	near("affinity ours/threshold", a["ours/threshold (≥3)"], 125.0/40)
	near("affinity CPU", a["CPU ours/kube (≤0.5)"], 0.25)
	near("affinity RSS", a["peak RSS ours/kube (≤1)"], 0.7)
	for col, want := range map[string]string{"family": "affinity", "threshold": "40", "kube": "45.0", "ours": "125.0",
		"target": "2×", "met": "met", "ours/threshold (≥3)": "3.12 met", "CPU ours/kube (≤0.5)": "0.25 met",
		"peak RSS ours/kube (≤1)": "0.70 met", "measured op": "op 3 createPods"} {
		if a[col] != want {
			t.Errorf("affinity %s = %q, want %q", col, a[col], want)
		}
	}
	// ours has only repetition 1: the ratio of medians, 110/120
	near("misc ours/kube", m["ours/kube"], 110.0/120)
	if !strings.HasSuffix(m["ours/kube"], "†") {
		t.Errorf("misc ours/kube %q not marked as a ratio of medians", m["ours/kube"])
	}
	near("misc kube/null", m["kube/null"], 0.8)
	for col, want := range map[string]string{"family": "misc", "threshold": "–", "ours": "110.0 (1 error)",
		"ours-guests": "2 not applicable", "target": "1×", "met": "not met", "ours/threshold (≥3)": "–",
		"peak RSS ours/kube (≤1)": "1.20† not met"} {
		if m[col] != want {
			t.Errorf("misc %s = %q, want %q", col, m[col], want)
		}
	}
	if !strings.Contains(md, "a † marks a ratio of the medians") {
		t.Error("the table does not say how its ratios are taken")
	}
}

// Without the null binder no throughput target is assumed, and the table says so.
func TestComparisonWithoutNull(t *testing.T) {
	var rs []Result
	for _, r := range syntheticResults() {
		if r.Contender != "null" {
			rs = append(rs, r)
		}
	}
	md := markdown(rs, nil)
	a := comparisonTable(t, md)["Affinity/5000Nodes"]
	if _, ok := a["kube/null"]; ok {
		t.Error("a kube/null column without the null binder")
	}
	if a["target"] != "–" || a["met"] != "–" {
		t.Errorf("target %q, met %q without the null binder, want –", a["target"], a["met"])
	}
	if !strings.Contains(md, "no throughput target is assumed") {
		t.Error("the table does not say no target is assumed")
	}
}

// svgText decodes every token of an SVG, failing the test on malformed XML, and returns its character data.
func svgText(t *testing.T, name, svg string) string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v\n%s", name, err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteString("\n")
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", name, root)
	}
	return text.String()
}

// One plot per family, well-formed, naming each of its workloads, with the threshold markers where there is one.
func TestPlotsPerFamily(t *testing.T) {
	svgs := plots(syntheticResults())
	if len(svgs) != 2 || svgs["plot-affinity.svg"] == "" || svgs["plot-misc.svg"] == "" {
		t.Fatalf("plots %v, want plot-affinity.svg and plot-misc.svg", keys(svgs))
	}
	a := svgText(t, "plot-affinity.svg", svgs["plot-affinity.svg"])
	for _, want := range []string{"Affinity/5000Nodes", "threshold 40", "3× threshold 120", "125.0", "45.0", "kube", "ours", "null"} {
		if !strings.Contains(a, want) {
			t.Errorf("plot-affinity.svg does not say %q:\n%s", want, a)
		}
	}
	m := svgText(t, "plot-misc.svg", svgs["plot-misc.svg"])
	for _, want := range []string{"Misc/500Nodes<&>", "110.0 (1 error)", "2 not applicable"} {
		if !strings.Contains(m, want) {
			t.Errorf("plot-misc.svg does not say %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "threshold 0") || strings.Contains(svgs["plot-misc.svg"], thresholdColour) {
		t.Error("plot-misc.svg marks a threshold the workload does not have")
	}
	if plotFile("dra/extendedresource") != "plot-dra-extendedresource.svg" {
		t.Errorf("plotFile(dra/extendedresource) = %q", plotFile("dra/extendedresource"))
	}
}

// keys lists a map's keys, for a failure message.
func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The axis ends at a round value at or past the largest bar or 3× threshold marker.
func TestNiceAxis(t *testing.T) {
	for _, c := range []struct{ top, end, step float64 }{{150, 150, 50}, {163, 200, 50}, {7.2, 8, 2}, {0, 1, 0.2}, {1240, 1250, 250}} {
		if end, step := niceAxis(c.top); end != c.end || step != c.step {
			t.Errorf("niceAxis(%g) = %g, %g; want %g, %g", c.top, end, step, c.end, c.step)
		}
	}
}

// --report merges the results.json of two run directories: a workload in both gets the second one's repetitions
// numbered after the first's (its contenders still paired), one in a single directory keeps its numbers, and a
// workload one run did not run but the other did is no longer listed as not run.
func TestReportMergesRuns(t *testing.T) {
	dirA, dirB, out := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "merged")
	const w, x = "Affinity/5000Nodes", "Misc/500Nodes"
	writeAll(dirA, []Result{run(w, "affinity", 40, "kube", 1, 40, 10, 100), run(w, "affinity", 40, "ours", 1, 100, 2, 60)},
		[]Unsupported{{Workload: x, Reason: "skipped (--skip)"}, {Workload: "Gone/1", Reason: "not supported yet: op foo"}})
	writeAll(dirB, []Result{run(w, "affinity", 40, "ours", 1, 150, 3, 80), run(w, "affinity", 40, "kube", 1, 50, 10, 100),
		run(x, "misc", 0, "kube", 1, 100, 4, 100)}, nil)
	if err := report([]string{dirA, filepath.Join(dirB, "results.json")}, out, ""); err != nil {
		t.Fatal(err)
	}
	f, err := readResults(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range f.Results {
		got = append(got, r.Workload+" "+r.Contender+" "+strconv.Itoa(r.Rep))
	}
	want := []string{w + " kube 1", w + " ours 1", w + " ours 2", w + " kube 2", x + " kube 1"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("merged runs %q, want %q", got, want)
	}
	if len(f.NotRun) != 1 || f.NotRun[0].Workload != "Gone/1" {
		t.Errorf("not run %+v, want only Gone/1", f.NotRun)
	}
	md, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if r := comparisonTable(t, string(md))[w]; number(t, r["ours/kube"]) != 2.75 {
		t.Errorf("merged ours/kube %q, want the paired 2.75", r["ours/kube"])
	}
	for _, name := range []string{"plot-affinity.svg", "plot-misc.svg"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
}

// Results written before family and threshold were recorded still read; --perf-dir fills them in from the
// configuration files, a map threshold resolved for the family's topic.
func TestReportFillsOldResults(t *testing.T) {
	perf := t.TempDir()
	cfg := `
- name: SchedulingWithResourceClaimTemplate
  workloadTemplate: [{opcode: createNodes, count: 1}]
  workloads:
  - name: 5000pods_500nodes
    threshold:
      dra: 56
    params: {}
  - name: fast
    threshold: 120
`
	if err := os.MkdirAll(filepath.Join(perf, "dra"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(perf, "dra", "performance-config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	old := `{"notRun": null, "results": [{"workload": "SchedulingWithResourceClaimTemplate/5000pods_500nodes", "contender": "kube", "rep": 1, "ok": true, "measurements": [{"name": "m", "namespaces": null, "throughput": {"samples": 3, "average": 60}}]}]}`
	dir, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "results.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report([]string{dir}, out, perf); err != nil {
		t.Fatal(err)
	}
	f, err := readResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Results[0]; r.Family != "dra" || r.Threshold != 56 {
		t.Errorf("filled in family %q threshold %g, want dra 56", r.Family, r.Threshold)
	}
	if _, err := os.Stat(filepath.Join(out, "plot-dra.svg")); err != nil {
		t.Error(err)
	}
	if got := thresholdOf(json.RawMessage(`{"topologyspreading": 460}`), "topology_spreading"); got != 460 {
		t.Errorf("thresholdOf for topology_spreading = %g, want its topic's 460", got)
	}
	if got := thresholdOf(json.RawMessage(`{"dra_experimental": 9}`), "dra"); got != 0 {
		t.Errorf("thresholdOf another topic's = %g, want 0", got)
	}
}
