package main

// Scenarios: hand-written clusters, one YAML file each, that show one upstream feature deciding a placement (a DRA
// device taint, a volume's capacity, a node's declared features...). Random probes rarely reach such objects; a
// scenario puts them in front of both schedulers on purpose.
//
// A scenario file is a stream of Kubernetes objects, any kind the API server serves. Every `__RUN__` in it is
// replaced by a run id, so each run of each scheduler gets a world of its own (name nodes `node-a-__RUN__`, and
// point ResourceSlices, PVs and node affinities at those names). Namespaced objects go to the run's namespace. The
// pods not bound by spec.nodeName are the probes: created one at a time, in file order, for the scheduler of the run, each waited for (bound
// or unschedulable) before the next, and left in place, so a later pod sees the earlier ones. After the run
// everything it created is deleted (finalizers cleared: no controller runs here) and its nodes are seen gone by
// both schedulers before the next run starts. Each scheduler runs each scenario twice, the simulator too on the
// same objects as one file; a pod whose runs differ on both sides is a tie, as for the random probes.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// scenarioLabel marks every object a scenario run created, with the run's id.
const scenarioLabel = "parity.kube-wasm-scheduler.io/scenario-run"

// scenarioResult is one probe pod of one scenario, compared as a random probe is.
type scenarioResult struct {
	Scenario string   `json:"scenario"`
	Pod      string   `json:"pod"`
	Kube     []string `json:"kubeScheduler"`
	Ours     []string `json:"ours"`
	Sim      []string `json:"simulator,omitempty"`
	Live     string   `json:"live"`
	SimVs    string   `json:"simVsLive,omitempty"`
	Messages string   `json:"messages,omitempty"`
	Message  string   `json:"kubeSchedulerMessage,omitempty"`
	OursMsg  string   `json:"oursMessage,omitempty"`
	SimMsg   string   `json:"simulatorMessage,omitempty"`
	Note     string   `json:"note,omitempty"`
	File     string   `json:"file"`
}

// scenarioFiles lists dir's *.yaml files in name order.
func scenarioFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("--scenarios %s: no *.yaml files", dir)
	}
	sort.Strings(files)
	return files, nil
}

// readScenario parses path with run substituted for __RUN__: its objects in file order.
func readScenario(path, run string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(bytes.ReplaceAll(raw, []byte("__RUN__"), []byte(run))), 4096)
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]interface{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", path, i)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no objects", path)
	}
	return objs, nil
}

// scenarioNamespace is the namespace of one run of a scenario.
func scenarioNamespace(file, run string) string {
	ns := "scn-" + run + "-" + strings.ToLower(scenarioName(file))
	if len(ns) > 63 {
		ns = strings.TrimRight(ns[:63], "-")
	}
	return ns
}

// scenarioName is the file's base name without .yaml.
func scenarioName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".yaml")
}

// scenarioEnv is what every scenario run needs: the typed and dynamic clients and the API's kinds.
type scenarioEnv struct {
	client  kubernetes.Interface
	dyn     dynamic.Interface
	mapper  meta.RESTMapper
	timeout time.Duration
}

// created is one object a run created, to delete afterwards.
type created struct {
	res        dynamic.ResourceInterface
	name, kind string
}

// runAllScenarios starts both schedulers (logs and configs under out/scenarios) and runs every scenario.
func runAllScenarios(ctx context.Context, env *scenarioEnv, o options) ([]scenarioResult, error) {
	dir := filepath.Join(o.out, "scenarios")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	stop, err := startBoth(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	return runScenarios(ctx, env, o, o.scenarios)
}

// runScenarios runs every scenario in dir with both (already started) schedulers and the simulator.
func runScenarios(ctx context.Context, env *scenarioEnv, o options, dir string) ([]scenarioResult, error) {
	files, err := scenarioFiles(dir)
	if err != nil {
		return nil, err
	}
	simProfile := filepath.Join(o.out, "sim-profile.yaml")
	if err := schedulerConfig(simProfile, "", simName); err != nil {
		return nil, err
	}
	var all []scenarioResult
	for n, f := range files {
		name := scenarioName(f)
		runs := map[string][][]outcome{} // who -> runs -> outcome per probe
		var pods []string
		for i := 1; i <= 2; i++ {
			for _, who := range []string{"kube", "ours"} {
				sched := kubeName
				if who == "ours" {
					sched = oursName
				}
				run := fmt.Sprintf("r%d%s%d", n+1, who[:1], i)
				names, outs, err := env.runOnce(ctx, f, run, sched)
				if err != nil {
					return nil, fmt.Errorf("scenario %s, %s run %d: %w", name, who, i, err)
				}
				pods = names
				runs[who] = append(runs[who], outs)
			}
		}
		var sims [][]outcome
		simFile := filepath.Join(o.out, "scenario-"+name+".yaml")
		if o.sim {
			if err := writeScenarioFile(f, simFile, fmt.Sprintf("r%ds", n+1)); err != nil {
				return nil, err
			}
			for i := 1; i <= 2; i++ {
				outs, err := simulateScenario(o.ours, simProfile, simFile, fmt.Sprintf("r%ds", n+1), pods, i)
				if err != nil {
					return nil, fmt.Errorf("scenario %s: %w", name, err)
				}
				sims = append(sims, outs)
			}
		}
		for p, pod := range pods {
			column := func(rs [][]outcome) []outcome {
				var c []outcome
				for _, r := range rs {
					c = append(c, r[p])
				}
				return c
			}
			kube, ours := column(runs["kube"]), column(runs["ours"])
			r := scenarioResult{Scenario: name, Pod: pod, File: f, Kube: names(kube), Ours: names(ours),
				Message: kube[0].message, OursMsg: ours[0].message}
			r.Live, _, r.Note = classify(kube, ours, "kube-scheduler", "kube-wasm-scheduler")
			if o.sim {
				sim := column(sims)
				r.Sim, r.SimMsg = names(sim), sim[0].message
				r.SimVs, _, _ = classify(kube, sim, "kube-scheduler", "the simulator")
				if r.Live == alike && r.SimVs == alike && kube[0].node == "" {
					r.Messages = alike
					if r.OursMsg != r.Message || r.SimMsg != r.Message {
						r.Messages = divergent
					}
				}
			}
			all = append(all, r)
		}
		fmt.Printf("parity: scenario %s: %d pods placed twice by each scheduler\n", name, len(pods))
	}
	return all, nil
}

// runOnce creates the scenario's world for run, places its pods one at a time with sched, records where each
// went (node names with the run id taken out) and deletes the world again.
func (env *scenarioEnv) runOnce(ctx context.Context, file, run, sched string) ([]string, []outcome, error) {
	objs, err := readScenario(file, run)
	if err != nil {
		return nil, nil, err
	}
	ns := scenarioNamespace(file, run)
	nsObj := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{scenarioLabel: run}}}
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	w, err := watchPods(env.client, ns)
	if err != nil {
		return nil, nil, err
	}
	defer close(w.stop)
	var made []created
	defer func() { env.cleanUp(context.Background(), w, ns, made) }()

	stopProvisioner := env.provisionClaims(ns, run, &made)
	defer stopProvisioner()

	var probes []*unstructured.Unstructured
	for _, u := range objs {
		if isProbe(u) {
			probes = append(probes, u)
			continue
		}
		c, err := env.create(ctx, u, ns, run)
		if err != nil {
			return nil, nil, err
		}
		made = append(made, c)
	}
	var pods []string
	var outs []outcome
	for _, u := range probes {
		if err := unstructured.SetNestedField(u.Object, sched, "spec", "schedulerName"); err != nil {
			return nil, nil, err
		}
		name := u.GetName()
		c, err := env.create(ctx, u, ns, run)
		if err != nil {
			return nil, nil, err
		}
		made = append(made, c)
		p, err := w.wait(ctx, name, env.timeout, func(p *v1.Pod) bool {
			return p != nil && (p.Spec.NodeName != "" || unschedulable(p) != "")
		})
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s for %s neither bound nor unschedulable: %w", name, sched, err)
		}
		pods = append(pods, strings.ReplaceAll(name, run, "__RUN__"))
		outs = append(outs, outcome{node: strings.ReplaceAll(p.Spec.NodeName, run, "__RUN__"), message: unschedulable(p)})
	}
	return pods, outs, nil
}

// isProbe says whether u is a probe: a pod not already bound by spec.nodeName (a bound pod is part of the world,
// as a pod a kubelet runs).
func isProbe(u *unstructured.Unstructured) bool {
	node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	return u.GetAPIVersion() == "v1" && u.GetKind() == "Pod" && node == ""
}

// create writes u (namespaced into ns when its kind is namespaced, labelled with the run) and, when the file gave
// it a status, that status too (the API server drops it on create).
func (env *scenarioEnv) create(ctx context.Context, u *unstructured.Unstructured, ns, run string) (created, error) {
	gvk := u.GroupVersionKind()
	m, err := env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return created{}, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	var res dynamic.ResourceInterface = env.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		u.SetNamespace(ns)
		res = env.dyn.Resource(m.Resource).Namespace(ns)
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[scenarioLabel] = run
	u.SetLabels(labels)
	status, hasStatus := u.Object["status"]
	out, err := res.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return created{}, fmt.Errorf("creating %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	// A probe's status is the scheduler's to write; a running pod's (an in-place resize in progress) is the file's.
	if hasStatus && !isProbe(u) {
		out.Object["status"] = status
		if _, err := res.UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			return created{}, fmt.Errorf("setting status of %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	return created{res: res, name: u.GetName(), kind: gvk.Kind}, nil
}

// cleanUp deletes what a run created, newest first, pods with grace 0 and everything with its finalizers cleared
// (no controller here would ever clear them), and waits until the run's pods and nodes are gone.
func (env *scenarioEnv) cleanUp(ctx context.Context, w *podWatch, ns string, made []created) {
	zero := int64(0)
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	for i := len(made) - 1; i >= 0; i-- {
		c := made[i]
		if c.kind != "Pod" {
			_, _ = c.res.Patch(ctx, c.name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		}
		err := c.res.Delete(ctx, c.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "parity: warning: deleting %s %s: %v\n", c.kind, c.name, err)
		}
		// Objects a scheduler finalized after our patch (a claim it allocated) get another try.
		_, _ = c.res.Patch(ctx, c.name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		if c.kind == "Pod" {
			if _, err := w.wait(ctx, c.name, time.Minute, func(p *v1.Pod) bool { return p == nil }); err != nil {
				fmt.Fprintf(os.Stderr, "parity: warning: pod %s/%s not gone: %v\n", ns, c.name, err)
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, c := range made {
		if c.kind != "Node" {
			continue
		}
		for {
			_, err := env.client.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Both schedulers see the deletions through their watches; a short pause lets them land in their caches before
	// the next run's objects arrive (as the random probes' settle pause).
	time.Sleep(500 * time.Millisecond)
}

// writeScenarioFile writes the scenario for the simulator: run id "sim", every namespaced object in one
// namespace, the pods for the simulator's scheduler name, each created a second after the one before it so the
// queue takes them in file order.
func writeScenarioFile(src, dst, run string) error {
	objs, err := readScenario(src, run)
	if err != nil {
		return err
	}
	ns := scenarioNamespace(src, run)
	var buf bytes.Buffer
	doc := func(m map[string]interface{}) error { return writeDoc(&buf, m) }
	if err := doc(map[string]interface{}{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": ns}}); err != nil {
		return err
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	for _, u := range objs {
		if namespaced(u) {
			u.SetNamespace(ns)
		}
		if isProbe(u) {
			if err := unstructured.SetNestedField(u.Object, simName, "spec", "schedulerName"); err != nil {
				return err
			}
			u.SetCreationTimestamp(metav1.NewTime(base.Add(time.Duration(i) * time.Second)))
			i++
		}
		if err := doc(u.Object); err != nil {
			return err
		}
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// namespacedKinds are the kinds a scenario writes that are namespaced, "group/Kind" (the live run asks the API
// server instead; the simulator's file needs to know).
var namespacedKinds = map[string]bool{
	"/Pod": true, "/PersistentVolumeClaim": true, "/Service": true, "/ReplicationController": true,
	"apps/ReplicaSet": true, "apps/StatefulSet": true, "policy/PodDisruptionBudget": true,
	"resource.k8s.io/ResourceClaim": true, "resource.k8s.io/ResourceClaimTemplate": true,
	"storage.k8s.io/CSIStorageCapacity": true, "scheduling.k8s.io/Workload": true, "scheduling.k8s.io/PodGroup": true,
}

// namespaced says whether the simulator's file puts u in the scenario's namespace.
func namespaced(u *unstructured.Unstructured) bool {
	return namespacedKinds[u.GroupVersionKind().Group+"/"+u.GetKind()]
}

// simulateScenario runs the simulator on the scenario file (run id run) and returns each probe pod's placement,
// in order, with the run id taken out of node names.
func simulateScenario(ours, profile, file, run string, pods []string, seed int) ([]outcome, error) {
	placed, err := simulateAll(ours, profile, file, seed)
	if err != nil {
		return nil, err
	}
	ns := scenarioNamespace(strings.TrimPrefix(filepath.Base(file), "scenario-"), run)
	var outs []outcome
	for _, pod := range pods {
		ref := ns + "/" + strings.ReplaceAll(pod, "__RUN__", run)
		out, ok := placed[ref]
		if !ok {
			return nil, fmt.Errorf("simulate %s: no placement for %s", file, ref)
		}
		out.node = strings.ReplaceAll(out.node, run, "__RUN__")
		outs = append(outs, out)
	}
	return outs, nil
}

// newScenarioEnv builds the dynamic client and a REST mapper from the API server's discovery.
func newScenarioEnv(client kubernetes.Interface, dyn dynamic.Interface, timeout time.Duration) *scenarioEnv {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	return &scenarioEnv{client: client, dyn: dyn, mapper: mapper, timeout: timeout}
}
