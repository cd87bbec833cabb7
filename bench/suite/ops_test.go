package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

func loadSets(t *testing.T) []Selected {
	dir := writeConfig(t)
	files, _ := configFiles(dir)
	tcs, err := loadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return selectWorkloads(tcs, []string{"nightly"}, nil)
}

// createPodSets unrolls into one createPods per namespace, the ops after it numbered in the unrolled list;
// countMultiplierParam multiplies the count; steadyStateParam resolves.
func TestPodSetsUnrollAndCounts(t *testing.T) {
	sel := loadSets(t)
	if len(sel) != 2 {
		t.Fatalf("selected %s", names(sel))
	}
	two, steady := sel[0], sel[1]
	if two.Unsupported != "" {
		t.Fatalf("Sets/two: %s", two.Unsupported)
	}
	var got []string
	for _, op := range two.Ops {
		ns := ""
		if op.Namespace != nil {
			ns = *op.Namespace
		}
		got = append(got, fmt.Sprintf("%s:%d:%s", op.Opcode, op.Count, ns))
	}
	want := "createNodes:1: createPods:6:init-ns-0 createPods:6:init-ns-1 createPods:2: churn:0: createPods:1:"
	if strings.Join(got, " ") != want {
		t.Errorf("ops %q, want %q", strings.Join(got, " "), want)
	}
	if p := two.Ops[1].PodTemplatePath; p == nil || !strings.HasSuffix(*p, filepath.Join("case", "pod.yaml")) {
		t.Errorf("pod set's pod template %v: want the default one", p)
	}
	if p := two.Ops[3].PVCTemplatePath; p == nil || !filepath.IsAbs(*p) {
		t.Errorf("PVC template %v: want an absolute path", p)
	}
	if p := two.Ops[4].TemplatePaths; len(p) != 1 || !filepath.IsAbs(p[0]) {
		t.Errorf("churn templates %v: want absolute paths", p)
	}
	s := two.Ops[0].NodeAllocatableStrategy
	if s == nil || s.NodeAllocatable["attachable-volumes-csi-ebs.csi.aws.com"] != "39" || s.CsiNodeAllocatable["ebs.csi.aws.com"] == nil ||
		*s.CsiNodeAllocatable["ebs.csi.aws.com"].Count != 39 || len(s.MigratedPlugins) != 1 {
		t.Errorf("nodeAllocatableStrategy %+v", s)
	}
	if last := steady.Ops[len(steady.Ops)-1]; steady.Unsupported != "" || !last.SteadyState || last.Duration != "1s" {
		t.Errorf("Sets/steady: unsupported %q, last op %+v", steady.Unsupported, last)
	}
}

// Create mode ticks until number (0: forever); recreate mode cycles over number slots.
func TestChurnSchedule(t *testing.T) {
	for _, c := range []struct {
		mode         string
		number, tick int
		slot         int
		more         bool
	}{
		{"create", 3, 0, 0, true}, {"create", 3, 2, 0, true}, {"create", 3, 3, 0, false}, {"create", 0, 1 << 20, 0, true},
		{"recreate", 1, 0, 0, true}, {"recreate", 1, 1, 0, true}, {"recreate", 600, 601, 1, true},
	} {
		slot, more := churnSchedule(c.mode, c.number, c.tick)
		if slot != c.slot || more != c.more {
			t.Errorf("%s number %d tick %d: slot %d more %v, want %d %v", c.mode, c.number, c.tick, slot, more, c.slot, c.more)
		}
	}
	for _, op := range []Op{{Mode: "x", TemplatePaths: []string{"a"}}, {Mode: "recreate", TemplatePaths: []string{"a"}},
		{Mode: "create", Number: -1, TemplatePaths: []string{"a"}}, {Mode: "create"}} {
		if validChurn(op) == nil {
			t.Errorf("churn %+v accepted", op)
		}
	}
	if err := validChurn(Op{Mode: "create", TemplatePaths: []string{"a"}}); err != nil {
		t.Error(err)
	}
}

// Claim pvc-<j> and volume <ns>-vol-<j> bound to each other; a CSI volume's handle is its name, an EBS volume's
// ID is vol-<j>.
func TestBoundVolume(t *testing.T) {
	pvc := &v1.PersistentVolumeClaim{}
	csi := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d"}}}}
	pv, claim := boundVolume(csi, pvc, "ns", 3)
	if pv.Name != "ns-vol-3" || pv.Spec.CSI.VolumeHandle != "ns-vol-3" || claim.Name != "pvc-3" || claim.Spec.VolumeName != "ns-vol-3" ||
		pv.Spec.ClaimRef.Name != "pvc-3" || pv.Spec.ClaimRef.Namespace != "ns" || pv.Status.Phase != v1.VolumeBound || claim.Status.Phase != v1.ClaimBound {
		t.Errorf("csi: %+v %+v", pv, claim)
	}
	if csi.Spec.CSI.VolumeHandle != "" || csi.Name != "" {
		t.Error("the template was changed")
	}
	ebs := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "<id>"}}}}
	pv, _ = boundVolume(ebs, pvc, "ns", 0)
	if pv.Name != "ns-vol-0" || pv.Spec.AWSElasticBlockStore.VolumeID != "vol-0" {
		t.Errorf("ebs: %s %s", pv.Name, pv.Spec.AWSElasticBlockStore.VolumeID)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "secret"}}}}
	withClaim(pod, "pvc-3")
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "pvc-3" {
		t.Errorf("volumes %+v", pod.Spec.Volumes)
	}
}

// The allocatable patch names only what differs; the CSINode carries every driver with the node as its ID and the
// migrated plugins.
func TestNodeAllocatable(t *testing.T) {
	n := int32(39)
	s := &nodeAllocatable{NodeAllocatable: map[v1.ResourceName]string{"attachable-volumes-csi-ebs.csi.aws.com": "39", "cpu": "4"},
		CsiNodeAllocatable: map[string]*storagev1.VolumeNodeResources{"ebs.csi.aws.com": {Count: &n}}, MigratedPlugins: []string{"a", "b"}}
	node := &v1.Node{Status: v1.NodeStatus{Allocatable: v1.ResourceList{"cpu": resource.MustParse("4")}}}
	if p := string(allocatablePatch(node, s)); p != `{"status":{"allocatable":{"attachable-volumes-csi-ebs.csi.aws.com":"39"}}}` {
		t.Errorf("patch %s", p)
	}
	node.Status.Allocatable["attachable-volumes-csi-ebs.csi.aws.com"] = resource.MustParse("39")
	if p := allocatablePatch(node, s); p != nil {
		t.Errorf("patch %s, want none", p)
	}
	c := csiNode("node-1", s)
	if c.Name != "node-1" || c.Annotations[v1.MigratedPluginsAnnotationKey] != "a,b" || len(c.Spec.Drivers) != 1 ||
		c.Spec.Drivers[0].NodeID != "node-1" || *c.Spec.Drivers[0].Allocatable.Count != 39 {
		t.Errorf("CSINode %+v", c)
	}
}

// A namespace template is read as it is; its labels go to every namespace of the op.
func TestNamespaceTemplate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "performance-config.yaml")
	ns := filepath.Join(dir, "ns.yaml")
	if err := os.WriteFile(ns, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    team: devops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "- name: N\n  workloadTemplate:\n  - opcode: createNamespaces\n    prefix: a\n    count: 2\n    namespaceTemplatePath: ns.yaml\n  workloads:\n  - name: w\n"
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tcs, err := loadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sel := selectWorkloads(tcs, nil, nil)
	if sel[0].Unsupported != "" || sel[0].Ops[0].NamespaceObject == nil || sel[0].Ops[0].NamespaceObject.Labels["team"] != "devops" {
		t.Errorf("%+v", sel[0])
	}
}

// A measurement a churn op adds pods to compares only how many of its pods the churn did not make.
func TestChurnedExpectationComparesOtherPods(t *testing.T) {
	e := &Expectations{Workloads: map[string][]Expected{"S/x": {{Name: "victim", Pods: 150, Churned: true}}}}
	run := func(pods, sched, churn int) []Result {
		return []Result{{Workload: "S/x", Contender: "ours", Rep: 1, OK: true,
			Measurements: []Measurement{{Name: "victim", Pods: pods, Scheduled: sched, Pending: pods - sched, Churned: true, ChurnPods: churn}}}}
	}
	if bad := e.check(run(155, 55, 5)); len(bad) != 0 {
		t.Errorf("five churn pods reported: %q", bad)
	}
	if bad := e.check(run(157, 50, 6)); len(bad) != 1 {
		t.Errorf("a pod more not reported: %q", bad)
	}
	if got := expectedOf(run(154, 54, 4)[0]); got[0] != (Expected{Name: "victim", Pods: 150, Churned: true}) {
		t.Errorf("recorded %+v", got)
	}
}

// The test case's profile joins the run's: pluginConfig appended, scheduler name kept, plugins refused when the
// run's profile has its own; scheduler-wide fields copied but the connection.
func TestMergeSchedulerConfig(t *testing.T) {
	run := map[string]any{"apiVersion": "kubescheduler.config.k8s.io/v1", "clientConnection": map[string]any{"qps": 5000.0},
		"profiles": []any{map[string]any{"schedulerName": "suite-001", "pluginConfig": []any{map[string]any{"name": "A"}}}}}
	tc := map[string]any{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"qps": 1.0}, "percentageOfNodesToScore": 50.0,
		"profiles": []any{map[string]any{"schedulerName": "default-scheduler", "plugins": map[string]any{"score": nil},
			"pluginConfig": []any{map[string]any{"name": "PodTopologySpread", "args": map[string]any{"defaultingType": "List"}}}}}}
	if err := mergeSchedulerConfig(run, tc); err != nil {
		t.Fatal(err)
	}
	p := run["profiles"].([]any)[0].(map[string]any)
	if p["schedulerName"] != "suite-001" || len(p["pluginConfig"].([]any)) != 2 || p["plugins"] == nil {
		t.Errorf("profile %v", p)
	}
	if run["percentageOfNodesToScore"] != 50.0 || run["clientConnection"].(map[string]any)["qps"] != 5000.0 {
		t.Errorf("config %v", run)
	}
	if err := mergeSchedulerConfig(run, tc); err == nil {
		t.Error("plugins merged over plugins")
	}
}

// The claim of a pod's template claim: generated name (cut in proportion past 57 characters), the pod as its
// controlling owner, the pod-claim-name annotation beside the template's, the template's labels and spec.
func TestClaimFromTemplate(t *testing.T) {
	if n := claimGenerateName("pod-1", "gpu"); n != "pod-1-gpu-" {
		t.Errorf("generateName %q", n)
	}
	long := strings.Repeat("p", 60)
	if n := claimGenerateName(long, "claim"); len(n) > 57 || !strings.HasPrefix(n, "ppp") || !strings.HasSuffix(n, "-clai") {
		t.Errorf("generateName %q (%d)", n, len(n))
	}
	tmpl := &resourcev1.ResourceClaimTemplate{Spec: resourcev1.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"}},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "req"}}}},
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	c := claimFromTemplate(pod, "gpu", tmpl)
	o := c.OwnerReferences
	if c.GenerateName != "p-gpu-" || len(o) != 1 || o[0].Kind != "Pod" || o[0].Name != "p" || o[0].UID != "u" || !*o[0].Controller ||
		c.Annotations[resourcev1.PodResourceClaimAnnotation] != "gpu" || c.Annotations["a"] != "1" || c.Labels["l"] != "1" ||
		c.Spec.Devices.Requests[0].Name != "req" {
		t.Errorf("claim %+v", c)
	}
	if _, ok := tmpl.Spec.ObjectMeta.Annotations[resourcev1.PodResourceClaimAnnotation]; ok {
		t.Error("the template's annotations were changed")
	}
	tn := "t"
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tn}, {Name: "direct"}, {Name: "done", ResourceClaimTemplateName: &tn}}
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "done"}}
	if m := claimsMissing(pod); len(m) != 1 || m[0].Name != "gpu" {
		t.Errorf("missing %+v", m)
	}
}

// The allocator's features follow the workload's gates, else kube-scheduler v1.37.2's defaults; the allocated
// state holds every allocated device, shared ones with their share and consumed capacity.
func TestAllocatorFeaturesAndState(t *testing.T) {
	f := allocatorFeatures(map[string]bool{"DRAConsumableCapacity": false, "DRADeviceCompatibilityGroups": true})
	if !f.PrioritizedList || !f.AdminAccess || !f.DeviceTaints || !f.PartitionableDevices || f.ConsumableCapacity || !f.CompatibilityGroups {
		t.Errorf("features %+v", f)
	}
	share := types.UID("s1")
	claims := []*resourcev1.ResourceClaim{
		{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Driver: "d", Pool: "p", Device: "a"},
			{Driver: "d", Pool: "p", Device: "b", ShareID: &share, ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"bw": resource.MustParse("1G")}},
		}}}}},
		{},
	}
	s := allocatedState(claims)
	if s.AllocatedDevices.Len() != 2 || !s.AllocatedDevices.Has(structured.MakeDeviceID("d", "p", "a")) || s.AllocatedSharedDeviceIDs.Len() != 1 || len(s.AggregatedCapacity) != 1 {
		t.Errorf("state %+v", s)
	}
}
