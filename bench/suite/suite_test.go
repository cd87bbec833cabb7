package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const testConfig = `
- name: Basic
  defaultPodTemplatePath: ../templates/pod.yaml
  featureGates:
    A: true
  labels: [performance]
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
    templateParams:
      size: $size|7
      fixed: 3
  workloads:
  - name: small
    labels: [integration-test, short]
    featureGates:
      A: false
    params: {initNodes: 5, measurePods: 10}
  - name: big
    labels: [short]
    params: {initNodes: 500, measurePods: 1000, size: 9}
- name: Churny
  workloadTemplate:
  - opcode: churn
  - opcode: createPods
    count: 1
  workloads:
  - name: any
    labels: [performance, short]
- name: Sets
  labels: [nightly]
  defaultPodTemplatePath: pod.yaml
  workloadTemplate:
  - opcode: createNodes
    count: 1
    nodeAllocatableStrategy:
      nodeAllocatable:
        attachable-volumes-csi-ebs.csi.aws.com: "39"
      csiNodeAllocatable:
        ebs.csi.aws.com:
          count: 39
      migratedPlugins: ["kubernetes.io/aws-ebs"]
  - opcode: createPodSets
    countParam: $sets
    namespacePrefix: init-ns
    createPodsOp:
      opcode: createPods
      countParam: $perSet
      countMultiplierParam: $times
  - opcode: createPods
    count: 2
    persistentVolumeTemplatePath: pv.yaml
    persistentVolumeClaimTemplatePath: pvc.yaml
  - opcode: churn
    mode: recreate
    number: 2
    templatePaths: [pod.yaml]
  - opcode: createPods
    count: 1
    steadyStateParam: $steady
    duration: 1s
  workloads:
  - name: two
    labels: [nightly]
    params: {sets: 2, perSet: 3, times: 2, steady: false}
  - name: steady
    labels: [nightly]
    params: {sets: 1, perSet: 1, times: 1, steady: true}
`

func writeConfig(t *testing.T) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "case", "performance-config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, suite, filter string) []Selected {
	dir := writeConfig(t)
	files, err := configFiles(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("configFiles = %v, %v", files, err)
	}
	tcs, err := loadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	want, err := suiteLabels(suite)
	if err != nil {
		t.Fatal(err)
	}
	var re *regexp.Regexp
	if filter != "" {
		re = regexp.MustCompile(filter)
	}
	return selectWorkloads(tcs, want, re)
}

func names(s []Selected) string {
	var n []string
	for _, x := range s {
		n = append(n, x.Name())
	}
	return strings.Join(n, " ")
}

// Labels are the test case's and the workload's together; every wanted label must be there.
func TestSelectionByLabelsAndFilter(t *testing.T) {
	for _, c := range []struct{ suite, filter, want string }{
		{"short", "", "Basic/small Basic/big Churny/any"},
		{"integration", "", "Basic/small"},
		{"all", "big", "Basic/big"},
		{"short", "^Churny/", "Churny/any"},
	} {
		if got := names(load(t, c.suite, c.filter)); got != c.want {
			t.Errorf("SUITE=%s FILTER=%q: %q, want %q", c.suite, c.filter, got, c.want)
		}
	}
	if _, err := suiteLabels("nightly"); err == nil {
		t.Error("SUITE=nightly accepted")
	}
}

// $params become counts, template params resolve with their defaults, the default pod template applies relative
// to the configuration file, and the workload's feature gates override the test case's.
func TestParamsAndTemplatesResolve(t *testing.T) {
	sel := load(t, "short", "^Basic/")
	small, big := sel[0], sel[1]
	if small.Unsupported != "" || big.Unsupported != "" {
		t.Fatalf("unsupported: %q %q", small.Unsupported, big.Unsupported)
	}
	if small.Ops[0].Count != 5 || small.Ops[1].Count != 10 || big.Ops[0].Count != 500 || big.Ops[1].Count != 1000 {
		t.Errorf("counts: small %d,%d big %d,%d", small.Ops[0].Count, small.Ops[1].Count, big.Ops[0].Count, big.Ops[1].Count)
	}
	if small.Ops[1].TemplateParams["size"] != "7" || big.Ops[1].TemplateParams["size"] != 9.0 || big.Ops[1].TemplateParams["fixed"] != 3.0 {
		t.Errorf("template params: small %v big %v", small.Ops[1].TemplateParams, big.Ops[1].TemplateParams)
	}
	if p := small.Ops[1].PodTemplatePath; p == nil || !strings.HasSuffix(*p, filepath.Join("templates", "pod.yaml")) || strings.Contains(*p, "case") {
		t.Errorf("pod template %v: want <dir>/templates/pod.yaml", p)
	}
	if small.FeatureGates["A"] || !big.FeatureGates["A"] {
		t.Errorf("feature gates: small %v big %v", small.FeatureGates, big.FeatureGates)
	}
	churny := load(t, "short", "Churny")[0]
	if !strings.Contains(churny.Unsupported, "invalid mode") {
		t.Errorf("Churny/any: unsupported %q, want it to refuse churn's empty mode, as upstream's isValid", churny.Unsupported)
	}
}

func TestMissingParamIsAnError(t *testing.T) {
	if _, err := intParam(map[string]any{"a": 1.0}, "$b"); err == nil {
		t.Error("$b accepted")
	}
	if n, err := intParam(map[string]any{"a": 4.0}, "$a"); n != 4 || err != nil {
		t.Errorf("$a = %d, %v", n, err)
	}
}

// As upstream: the first tick with a scheduled pod starts the clock; ticks with nothing new are skipped and the
// next rate is repeated for them; percentiles are at ceil(n*p/100)-1.
func TestThroughputSamplesAsUpstream(t *testing.T) {
	var s sampler
	t0 := time.Unix(1000, 0)
	s.tick(t0, 0)                     // nothing yet
	s.tick(t0.Add(1*time.Second), 5)  // starts the clock
	s.tick(t0.Add(2*time.Second), 15) // 10/s
	s.tick(t0.Add(3*time.Second), 15) // skipped
	s.tick(t0.Add(4*time.Second), 55) // 40 over 2 s: 20/s, twice
	want := []float64{10, 20, 20}
	if len(s.samples) != len(want) {
		t.Fatalf("samples %v, want %v", s.samples, want)
	}
	for i := range want {
		if s.samples[i] != want[i] {
			t.Fatalf("samples %v, want %v", s.samples, want)
		}
	}
	tp := summarize([]float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10})
	if tp.Average != 5.5 || tp.Perc50 != 5 || tp.Perc90 != 9 || tp.Perc95 != 10 || tp.Perc99 != 10 || tp.Samples != 10 {
		t.Errorf("summary %+v", tp)
	}
	if summarize(nil).Samples != 0 {
		t.Error("empty summary")
	}
}

// Templates render with Index, Count, params and upstream's arithmetic functions.
func TestRenderTemplate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pod.yaml")
	tmpl := "metadata:\n  name: pod-{{.Index}}-of-{{.Count}}\n  labels:\n    zone: z{{Mod .Index 3}}\n    size: \"{{AddInt .size 1}}\"\n"
	if err := os.WriteFile(p, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := render(p, 4, 9, map[string]any{"size": 2.0}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Metadata.Name != "pod-4-of-9" || out.Metadata.Labels["zone"] != "z1" || out.Metadata.Labels["size"] != "3" {
		t.Errorf("rendered %+v", out.Metadata)
	}
}

// A run whose counts differ from the recorded ones, one that failed and one with no record are each reported;
// a run that matches is not.
func TestExpectationsCheck(t *testing.T) {
	e := &Expectations{Workloads: map[string][]Expected{
		"A/x": {{Name: "m", Pods: 10, Scheduled: 10}},
		"B/y": {{Name: "m", Pods: 20, Scheduled: 19, Pending: 1}},
	}}
	m := func(pods, sched int) []Measurement {
		return []Measurement{{Name: "m", Pods: pods, Scheduled: sched, Pending: pods - sched}}
	}
	results := []Result{
		{Workload: "A/x", Contender: "ours", Rep: 1, OK: true, Measurements: m(10, 10)},
		{Workload: "B/y", Contender: "ours", Rep: 1, OK: true, Measurements: m(20, 20)},
		{Workload: "C/z", Contender: "ours", Rep: 1, OK: true, Measurements: m(1, 1)},
		{Workload: "A/x", Contender: "ours", Rep: 2, Error: "op 1 (createPods): 9 of 10 pods scheduled"},
	}
	bad := e.check(results)
	if len(bad) != 3 {
		t.Fatalf("want 3 differences, got %d: %q", len(bad), bad)
	}
	for i, want := range []string{"did not complete", "20 pods, 20 scheduled, 0 pending; expected 20, 19, 1", "no expectation"} {
		if !strings.Contains(bad[i], want) {
			t.Errorf("difference %d = %q, want it to say %q", i, bad[i], want)
		}
	}
	if bad := e.check(results[:1]); len(bad) != 0 {
		t.Errorf("a matching run reported: %q", bad)
	}
}

// --record writes the first repetition of the recording contender's runs, and names a run that failed.
func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "expected.json")
	results := []Result{
		{Workload: "A/x", Contender: "kube", Rep: 1, OK: true, Measurements: []Measurement{{Name: "m", Pods: 4, Scheduled: 3, Pending: 1}}},
		{Workload: "A/x", Contender: "ours", Rep: 1, OK: true, Measurements: []Measurement{{Name: "m", Pods: 4, Scheduled: 4}}},
		{Workload: "B/y", Contender: "kube", Rep: 1, Error: "timed out"},
	}
	err := record(path, "kube", "kubernetes@v9/test", results)
	if err == nil || !strings.Contains(err.Error(), "B/y failed for kube") {
		t.Fatalf("record: want the failed workload named, got %v", err)
	}
	e, err := loadExpectations(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Workloads["A/x"]; len(got) != 1 || got[0] != (Expected{Name: "m", Pods: 4, Scheduled: 3, Pending: 1}) {
		t.Errorf("recorded %+v, want kube's counts", got)
	}
	if _, ok := e.Workloads["B/y"]; ok {
		t.Error("a failed run was recorded")
	}
}
