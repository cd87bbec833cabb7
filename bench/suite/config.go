package main

// Loading kube-scheduler's scheduler_perf configurations (test/integration/scheduler_perf/**/performance-config.yaml
// in the k8s.io/kubernetes module, read where `go mod download` put it, never copied) and choosing workloads.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// TestCase is one entry of a performance-config.yaml.
type TestCase struct {
	Name                   string            `json:"name"`
	FeatureGates           map[string]bool   `json:"featureGates"`
	WorkloadTemplate       []json.RawMessage `json:"workloadTemplate"`
	Workloads              []Workload        `json:"workloads"`
	SchedulerConfigPath    string            `json:"schedulerConfigPath"`
	DefaultPodTemplatePath *string           `json:"defaultPodTemplatePath"`
	Labels                 []string          `json:"labels"`
	// File is the configuration file the test case came from; template paths are relative to its directory.
	File string `json:"-"`
}

// Workload is one parameterisation of a test case.
type Workload struct {
	Name         string          `json:"name"`
	Params       map[string]any  `json:"params"`
	Labels       []string        `json:"labels"`
	Threshold    json.RawMessage `json:"threshold"`
	FeatureGates map[string]bool `json:"featureGates"`
}

// Op is one step of a workload template, with the fields of the opcodes the suite runs; Raw keeps the whole op.
type Op struct {
	Opcode string `json:"opcode"`
	Count  int    `json:"count"`
	// CountParam is "$name": the count is that workload parameter.
	CountParam               string            `json:"countParam"`
	CountMultiplierParam     string            `json:"countMultiplierParam"`
	NodeTemplatePath         *string           `json:"nodeTemplatePath"`
	PodTemplatePath          *string           `json:"podTemplatePath"`
	NamespaceTemplatePath    *string           `json:"namespaceTemplatePath"`
	PVTemplatePath           *string           `json:"persistentVolumeTemplatePath"`
	PVCTemplatePath          *string           `json:"persistentVolumeClaimTemplatePath"`
	LabelNodePrepareStrategy *labelStrategy    `json:"labelNodePrepareStrategy"`
	UniqueNodeLabelStrategy  *labelStrategy    `json:"uniqueNodeLabelStrategy"`
	NodeAllocatableStrategy  *nodeAllocatable  `json:"nodeAllocatableStrategy"`
	TemplateParams           map[string]any    `json:"templateParams"`
	Prefix                   string            `json:"prefix"`
	Namespace                *string           `json:"namespace"`
	Namespaces               []string          `json:"namespaces"`
	LabelSelector            map[string]string `json:"labelSelector"`
	CollectMetrics           bool              `json:"collectMetrics"`
	SkipWaitToCompletion     bool              `json:"skipWaitToCompletion"`
	SteadyState              bool              `json:"steadyState"`
	SteadyStateParam         string            `json:"steadyStateParam"`
	StageRequirement         string            `json:"stageRequirement"`
	Duration                 string            `json:"duration"`
	DurationParam            string            `json:"durationParam"`
	SignatureBatchSize       int               `json:"signatureBatchSize"`
	SignatureBatchSizeParam  string            `json:"signatureBatchSizeParam"`
	DeletePodsPerSecond      int               `json:"deletePodsPerSecond"`
	TemplatePath             *string           `json:"templatePath"`
	UpdatePerSecond          int               `json:"updatePerSecond"`
	Subresources             []string          `json:"subresources"`
	Name                     string            `json:"name"`
	// churn
	Mode                 string   `json:"mode"`
	Number               int      `json:"number"`
	IntervalMilliseconds int64    `json:"intervalMilliseconds"`
	TemplatePaths        []string `json:"templatePaths"`
	// createPodSets (unrolled by resolveOps into createPods ops)
	NamespacePrefix string          `json:"namespacePrefix"`
	CreatePodsOp    json.RawMessage `json:"createPodsOp"`
	// Namespace is the namespace object of createNamespaces' namespaceTemplatePath, read by resolveOps.
	NamespaceObject *v1.Namespace `json:"-"`
	// ClaimTemplate: a createAny of a ResourceClaimTemplate (the run starts its resourceclaim controller).
	ClaimTemplate bool `json:"-"`
	// APIVersion replaces the template's apiVersion: createPodGroups decodes its template into the
	// scheduling.k8s.io/v1beta1 PodGroup whatever version it names, as upstream's.
	APIVersion string          `json:"-"`
	Raw        json.RawMessage `json:"-"`
}

// nodeAllocatable is createNodes' nodeAllocatableStrategy (upstream's NodeAllocatableStrategy): every node gets
// the allocatable patch and a CSINode with the drivers' allocatable and the migrated-plugins annotation.
type nodeAllocatable struct {
	NodeAllocatable    map[v1.ResourceName]string                `json:"nodeAllocatable"`
	CsiNodeAllocatable map[string]*storagev1.VolumeNodeResources `json:"csiNodeAllocatable"`
	MigratedPlugins    []string                                  `json:"migratedPlugins"`
}

type labelStrategy struct {
	LabelKey    string   `json:"labelKey"`
	LabelValues []string `json:"labelValues"`
}

// Selected is a workload chosen to run, its ops resolved against its parameters.
type Selected struct {
	TestCase, Workload string
	File               string
	FeatureGates       map[string]bool // the test case's, overridden by the workload's
	// SchedulerConfig is the test case's schedulerConfigPath, absolute ("" when none).
	SchedulerConfig string
	Ops             []Op
	// Unsupported says why the suite cannot run this workload ("" when it can).
	Unsupported string
	// Family is the directory of the configuration file below the scheduler_perf root (affinity, misc,
	// dra/extendedresource...): upstream runs and reports each directory as its own benchmark.
	Family string
	// Threshold is upstream's CI floor for the workload's SchedulingThroughput average (0: none), resolved for
	// the family by inFamily; threshold keeps the workload's raw value until then.
	Threshold float64
	threshold json.RawMessage
}

// Name is TestCase/Workload, as upstream names its sub-tests.
func (s Selected) Name() string { return s.TestCase + "/" + s.Workload }

// configFiles lists every performance-config.yaml below dir, sorted.
func configFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "performance-config.yaml" {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// loadFile reads the test cases of one configuration file.
func loadFile(path string) ([]TestCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tcs []TestCase
	if err := yaml.Unmarshal(b, &tcs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range tcs {
		tcs[i].File = path
	}
	return tcs, nil
}

// familyOf is the family of a configuration file: its directory relative to the scheduler_perf root perfDir,
// with "/" separators ("scheduler_perf" for a file at the root itself).
func familyOf(perfDir, file string) string {
	rel, err := filepath.Rel(perfDir, filepath.Dir(file))
	if err != nil || rel == "." {
		return "scheduler_perf"
	}
	return filepath.ToSlash(rel)
}

// thresholdOf is upstream's threshold for a workload of family: a plain number, or from a map of topic to number
// (the dra workloads' `threshold: {dra: 56}`) the entry of the topic the family's benchmark passes. Upstream's
// topics are the directory names, joined with "_" (dra_extendedresource) or their last element (gangscheduling),
// some without their own "_" (topologyspreading); a map naming none of them has no threshold for the family, as
// upstream's thresholds.Get returns 0 then.
func thresholdOf(raw json.RawMessage, family string) float64 {
	if len(raw) == 0 {
		return 0
	}
	var v float64
	if json.Unmarshal(raw, &v) == nil {
		return v
	}
	var byTopic map[string]float64
	if json.Unmarshal(raw, &byTopic) != nil {
		return 0
	}
	joined, last := strings.ReplaceAll(family, "/", "_"), filepath.Base(family)
	for _, topic := range []string{joined, last, strings.ReplaceAll(joined, "_", ""), strings.ReplaceAll(last, "_", "")} {
		if v, ok := byTopic[topic]; ok {
			return v
		}
	}
	return 0
}

// inFamily sets the family of workloads selected from one configuration file, and their thresholds for it.
func inFamily(sel []Selected, family string) []Selected {
	for i := range sel {
		sel[i].Family = family
		sel[i].Threshold = thresholdOf(sel[i].threshold, family)
	}
	return sel
}

// suiteLabels maps SUITE to the labels a workload must all carry (upstream's -perf-scheduling-label-filter).
func suiteLabels(suite string) ([]string, error) {
	switch suite {
	case "", "short":
		return []string{"performance", "short"}, nil
	case "all":
		return []string{"performance"}, nil
	case "integration":
		return []string{"integration-test", "short"}, nil
	}
	return nil, fmt.Errorf("SUITE=%q: want short, all or integration", suite)
}

// hasAll reports whether labels (a test case's and its workload's together, as upstream merges them) hold every
// wanted label.
func hasAll(labels []string, want []string) bool {
	have := map[string]bool{}
	for _, l := range labels {
		have[l] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// selectWorkloads picks the workloads of tcs carrying every label of want whose TestCase/Workload matches filter
// (nil: all), and resolves their ops.
func selectWorkloads(tcs []TestCase, want []string, filter *regexp.Regexp) []Selected {
	var out []Selected
	for _, tc := range tcs {
		for _, w := range tc.Workloads {
			if !hasAll(append(append([]string{}, tc.Labels...), w.Labels...), want) {
				continue
			}
			s := Selected{TestCase: tc.Name, Workload: w.Name, File: tc.File, FeatureGates: map[string]bool{}, threshold: w.Threshold}
			if filter != nil && !filter.MatchString(s.Name()) {
				continue
			}
			for k, v := range tc.FeatureGates {
				s.FeatureGates[k] = v
			}
			for k, v := range w.FeatureGates {
				s.FeatureGates[k] = v
			}
			ops, err := resolveOps(tc, w)
			s.Ops = ops
			if err != nil {
				s.Unsupported = err.Error()
			} else if tc.SchedulerConfigPath != "" {
				s.SchedulerConfig = tc.SchedulerConfigPath
				if !filepath.IsAbs(s.SchedulerConfig) {
					s.SchedulerConfig = filepath.Join(filepath.Dir(tc.File), s.SchedulerConfig)
				}
				if _, err := loadSchedulerConfig(s.SchedulerConfig); err != nil {
					s.Unsupported = "schedulerConfigPath: " + err.Error()
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// supported are the opcodes the suite runs; the others make the workload unsupported, with the reason listed.
var supported = map[string]bool{
	"createNodes": true, "createNamespaces": true, "createPods": true, "barrier": true, "sleep": true,
	"deletePods": true, "createAny": true, "updateAny": true, "startCollectingMetrics": true, "stopCollectingMetrics": true,
	"churn": true, "createPodGroups": true, "allocResourceClaims": true,
	// profiles are about the Go process of the integration test; there is nothing of ours to profile that way
	"startCollectingProfile": true, "stopCollectingProfile": true,
}

// unroll replaces each createPodSets op by its createPodsOp once per namespace <namespacePrefix>-<i>, i < count,
// as upstream's unrollWorkloadTemplate: the ops after it are numbered in the unrolled list (their default
// namespace-<index> and node-<index>- names count the unrolled ops).
func unroll(tc TestCase, w Workload) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for i, raw := range tc.WorkloadTemplate {
		var op Op
		if err := json.Unmarshal(raw, &op); err != nil {
			return nil, fmt.Errorf("%s: %s op %d: %v", tc.File, tc.Name, i, err)
		}
		if op.Opcode != "createPodSets" {
			out = append(out, raw)
			continue
		}
		count := op.Count
		if op.CountParam != "" {
			var err error
			if count, err = intParam(w.Params, op.CountParam); err != nil {
				return nil, fmt.Errorf("%s: %s/%s op %d (createPodSets): %v", tc.File, tc.Name, w.Name, i, err)
			}
		}
		var inner map[string]any
		if err := json.Unmarshal(op.CreatePodsOp, &inner); err != nil || inner == nil {
			return nil, fmt.Errorf("%s: %s/%s op %d (createPodSets): createPodsOp: %v", tc.File, tc.Name, w.Name, i, err)
		}
		inner["opcode"] = "createPods"
		for j := 0; j < count; j++ {
			inner["namespace"] = fmt.Sprintf("%s-%d", op.NamespacePrefix, j)
			b, err := json.Marshal(inner)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// resolveOps decodes the test case's template ops for workload w: createPodSets unrolled, $params substituted,
// template paths made absolute (relative to the configuration file, as upstream), the default pod template
// applied. An error names what the suite cannot run.
func resolveOps(tc TestCase, w Workload) ([]Op, error) {
	dir := filepath.Dir(tc.File)
	abs := func(p *string) *string {
		if p == nil || filepath.IsAbs(*p) {
			return p
		}
		a := filepath.Join(dir, *p)
		return &a
	}
	raws, err := unroll(tc, w)
	if err != nil {
		return nil, err
	}
	var ops []Op
	var why []string
	for i, raw := range raws {
		var op Op
		if err := json.Unmarshal(raw, &op); err != nil {
			return nil, fmt.Errorf("%s: %s op %d: %v", tc.File, tc.Name, i, err)
		}
		op.Raw = raw
		if !supported[op.Opcode] {
			why = append(why, "op "+op.Opcode)
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s: %s/%s op %d (%s): %s", tc.File, tc.Name, w.Name, i, op.Opcode, fmt.Sprintf(format, a...))
		}
		if op.CountParam != "" {
			if op.Count, err = intParam(w.Params, op.CountParam); err != nil {
				return nil, fail("%v", err)
			}
		}
		if op.CountMultiplierParam != "" {
			m, err := intParam(w.Params, op.CountMultiplierParam)
			if err != nil {
				return nil, fail("countMultiplierParam: %v", err)
			}
			op.Count *= m
		}
		if op.SignatureBatchSizeParam != "" {
			if op.SignatureBatchSize, err = intParam(w.Params, op.SignatureBatchSizeParam); err != nil {
				return nil, fail("%v", err)
			}
		}
		if op.SignatureBatchSize == 0 {
			op.SignatureBatchSize = 1
		}
		if op.DurationParam != "" {
			v, ok := w.Params[strings.TrimPrefix(op.DurationParam, "$")].(string)
			if !ok {
				return nil, fail("durationParam %s: no string parameter", op.DurationParam)
			}
			op.Duration = v
		}
		if op.SteadyStateParam != "" {
			v, ok := w.Params[strings.TrimPrefix(op.SteadyStateParam, "$")].(bool)
			if !ok {
				return nil, fail("steadyStateParam %s: no boolean parameter", op.SteadyStateParam)
			}
			op.SteadyState = v
		}
		if op.Opcode == "sleep" {
			if _, err := time.ParseDuration(op.Duration); err != nil {
				return nil, fail("duration %q: %v", op.Duration, err)
			}
		}
		op.TemplateParams = resolveTemplateParams(op.TemplateParams, w.Params)
		if op.Opcode == "createPods" && op.PodTemplatePath == nil {
			op.PodTemplatePath = tc.DefaultPodTemplatePath
		}
		op.PodTemplatePath, op.NodeTemplatePath, op.NamespaceTemplatePath = abs(op.PodTemplatePath), abs(op.NodeTemplatePath), abs(op.NamespaceTemplatePath)
		op.TemplatePath, op.PVTemplatePath, op.PVCTemplatePath = abs(op.TemplatePath), abs(op.PVTemplatePath), abs(op.PVCTemplatePath)
		for j := range op.TemplatePaths {
			op.TemplatePaths[j] = *abs(&op.TemplatePaths[j])
		}
		if (op.Opcode == "createAny" || op.Opcode == "updateAny" || op.Opcode == "createPodGroups") && op.TemplatePath == nil {
			return nil, fail("no templatePath")
		}
		if op.Opcode == "createPodGroups" {
			if op.Namespace == nil || *op.Namespace == "" || op.Count < 1 {
				return nil, fail("namespace must be set and count greater than 0")
			}
			op.APIVersion = "scheduling.k8s.io/v1beta1"
		}
		if op.Opcode == "createAny" {
			if b, err := os.ReadFile(*op.TemplatePath); err == nil && strings.Contains(string(b), "kind: ResourceClaimTemplate") {
				// Pods naming a template wait for kube-controller-manager's resourceclaim controller to create their
				// claims; upstream's test runs that controller, this control plane runs none: the run does (claims.go).
				op.ClaimTemplate = true
			}
		}
		if op.Opcode == "churn" {
			if err := validChurn(op); err != nil {
				return nil, fail("%v", err)
			}
		}
		if op.Opcode == "createNamespaces" && op.NamespaceTemplatePath != nil {
			// upstream's namespacePreparer: the file as it is (no template), strictly decoded
			b, err := os.ReadFile(*op.NamespaceTemplatePath)
			if err != nil {
				return nil, fail("%v", err)
			}
			op.NamespaceObject = &v1.Namespace{}
			if err := yaml.UnmarshalStrict(b, op.NamespaceObject); err != nil {
				return nil, fail("%s: %v", *op.NamespaceTemplatePath, err)
			}
		}
		if op.Opcode == "createPods" {
			switch {
			case op.SteadyState && op.SkipWaitToCompletion:
				return nil, fail("skipWaitToCompletion and steadyState cannot be true at the same time")
			case op.SteadyState:
				if d, err := time.ParseDuration(op.Duration); err != nil || d <= 0 {
					return nil, fail("when creating pods in a steady state, the test duration must be > 0")
				}
			case op.PVCTemplatePath != nil && op.PVTemplatePath == nil:
				return nil, fail("persistentVolumeClaimTemplatePath without persistentVolumeTemplatePath")
			}
		}
		ops = append(ops, op)
	}
	if len(why) > 0 {
		return ops, fmt.Errorf("not supported yet: %s", strings.Join(dedupe(why), ", "))
	}
	return ops, nil
}

// validChurn is upstream's churnOp.isValid.
func validChurn(op Op) error {
	switch {
	case op.Mode != "recreate" && op.Mode != "create":
		return fmt.Errorf("invalid mode: %v. must be one of [recreate create]", op.Mode)
	case op.Number < 0:
		return fmt.Errorf("number (%v) cannot be negative", op.Number)
	case op.Mode == "recreate" && op.Number == 0:
		return fmt.Errorf("number cannot be 0 when mode is recreate")
	case len(op.TemplatePaths) == 0:
		return fmt.Errorf("at least one template spec file needs to be specified")
	}
	return nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// intParam is the workload parameter "$name" as an integer (YAML numbers decode as float64, as upstream's).
func intParam(params map[string]any, ref string) (int, error) {
	if !strings.HasPrefix(ref, "$") {
		return 0, fmt.Errorf("parameter reference %q does not start with $", ref)
	}
	v, ok := params[ref[1:]]
	if !ok {
		return 0, fmt.Errorf("parameter %s is not set", ref)
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("parameter %s is %T, want a number", ref, v)
	}
	return int(f), nil
}

// resolveTemplateParams replaces string values "$name" or "$name|default" with the workload parameter (or the
// default when the workload does not set it), as upstream's resolveTemplateParams.
func resolveTemplateParams(tp map[string]any, params map[string]any) map[string]any {
	if len(tp) == 0 {
		return tp
	}
	out := make(map[string]any, len(tp))
	for k, v := range tp {
		out[k] = v
		s, ok := v.(string)
		if !ok || !strings.HasPrefix(s, "$") {
			continue
		}
		key, def, hasDef := strings.Cut(s[1:], "|")
		if pv, found := params[key]; found {
			out[k] = pv
		} else if hasDef {
			out[k] = def
		}
	}
	return out
}

// apiServerFlags are the kube-apiserver flags the selected workloads need, as upstream's test server gets them
// (mustSetupCluster): every feature gate some workload turns on, and the API versions DynamicResourceAllocation and
// GenericWorkload serve beyond the defaults. The suite shares one API server between workloads, so a gate one
// workload turns on is on for all of them there; the schedulers still get each workload's own gates.
func apiServerFlags(sel []Selected) []string {
	on := map[string]bool{}
	for _, s := range sel {
		for g, v := range s.FeatureGates {
			if v {
				on[g] = true
			}
		}
	}
	if len(on) == 0 {
		return nil
	}
	var gates, runtime []string
	for g := range on {
		gates = append(gates, g+"=true")
	}
	sort.Strings(gates)
	if on["DynamicResourceAllocation"] {
		runtime = append(runtime, "resource.k8s.io/v1=true", "resource.k8s.io/v1beta2=true", "resource.k8s.io/v1beta1=true", "resource.k8s.io/v1alpha3=true")
	}
	if on["GenericWorkload"] {
		runtime = append(runtime, "scheduling.k8s.io/v1beta1=true")
	}
	flags := []string{"--feature-gates=" + strings.Join(gates, ",")}
	if len(runtime) > 0 {
		flags = append(flags, "--runtime-config="+strings.Join(runtime, ","))
	}
	return flags
}
