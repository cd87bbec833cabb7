package main

// The ops beyond plain pods and nodes, as upstream's scheduler_perf runs them against its API server: churn (objects
// created, and in recreate mode deleted again, on a ticker until the workload ends), createPods with persistent
// volumes (a PVC and a PV bound to each other per pod), createNodes' nodeAllocatableStrategy (the allocatable patch
// and a CSINode per node) and createNamespaces from a namespace template.

import (
	"kube-wasm-scheduler.local/bench-live/kit"

	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// churning is the background churn of a run: stopped (and what it left deleted) when the workload ends.
type churning struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	made   []made // every object a churn op created; the cleanup deletes those still there
}

// churnObject is one template of a churn op: creating an object returns its name, deleting one by name.
type churnObject struct {
	create func(ctx context.Context) (string, error)
	delete func(ctx context.Context, name string) error
}

// churnSchedule is which template slots a churn op's tick touches: in create mode every template is created at
// each tick until number ticks (0: no end); in recreate mode tick k works on slot k%number of each template,
// creating into an empty slot and deleting (and emptying) a full one, as upstream's runChurnOp.
func churnSchedule(mode string, number, tick int) (slot int, more bool) {
	if mode == "create" {
		threshold := number
		if threshold == 0 {
			threshold = math.MaxInt32
		}
		return 0, tick < threshold
	}
	return tick % number, true
}

// churn starts op's churn in the background: upstream's runChurnOp. The templates are the files as they are (no
// text/template), the objects go to the op's namespace (namespace-<index> by default) when namespaced.
func (r *runner) churn(ctx context.Context, i int, op Op) error {
	ns := fmt.Sprintf("namespace-%d", i)
	if op.Namespace != nil {
		ns = *op.Namespace
	}
	// Upstream creates the namespace without making it one the barriers wait for.
	if !r.createdNS[ns] {
		_, err := r.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("unable to create namespace %v: %w", ns, err)
		}
		r.createdNS[ns] = true
	}
	if r.churning == nil {
		r.churning = &churning{}
		var cctx context.Context
		cctx, r.churning.cancel = context.WithCancel(context.Background())
		r.churnCtx = cctx
	}
	ch := r.churning
	if r.churnNS == nil {
		r.churnNS = map[string]bool{}
	}
	r.churnNS[ns] = true
	var objs []churnObject
	for j, path := range op.TemplatePaths {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("unable to parse the %v-th template path: %w", j, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.UnmarshalStrict(b, &obj.Object); err != nil {
			return fmt.Errorf("unable to parse the %v-th template path: %s: %w", j, path, err)
		}
		m, err := r.mapping(obj)
		if err != nil {
			return fmt.Errorf("unable to find GVR for %v: %w", obj.GroupVersionKind(), err)
		}
		var res dynamic.ResourceInterface = r.dynamic.Resource(m.Resource)
		objNS := ""
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			res, objNS = r.dynamic.Resource(m.Resource).Namespace(ns), ns
		}
		o := churnObject{delete: func(ctx context.Context, name string) error {
			return res.Delete(ctx, name, metav1.DeleteOptions{})
		}}
		if m.GroupVersionKind.Group == "" && m.GroupVersionKind.Kind == "Pod" {
			// A pod gets the run's scheduler and its priority as a PriorityClass, as createPods' pods.
			pod := &v1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, pod); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := r.priorityClass(ctx, pod); err != nil {
				return err
			}
			if pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == v1.DefaultSchedulerName {
				pod.Spec.SchedulerName = r.schedulerName
			}
			o.create = func(ctx context.Context) (string, error) {
				live, err := r.client.CoreV1().Pods(ns).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				return live.Name, nil
			}
		} else {
			o.create = func(ctx context.Context) (string, error) {
				live, err := res.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				return live.GetName(), nil
			}
		}
		mapping := m
		create := o.create
		o.create = func(ctx context.Context) (string, error) {
			name, err := create(ctx)
			if err == nil {
				ch.mu.Lock()
				ch.made = append(ch.made, made{mapping: mapping, namespace: objNS, name: name})
				ch.mu.Unlock()
			}
			return name, err
		}
		objs = append(objs, o)
	}
	interval := 500 * time.Millisecond
	if op.IntervalMilliseconds != 0 {
		interval = time.Duration(op.IntervalMilliseconds) * time.Millisecond
	}
	cctx := r.churnCtx
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		// live[j][slot]: the object of template j in a recreate slot ("" when none)
		live := make([][]string, len(objs))
		for j := range live {
			live[j] = make([]string, max(op.Number, 1))
		}
		for tick := 0; ; tick++ {
			slot, more := churnSchedule(op.Mode, op.Number, tick)
			if !more {
				return
			}
			select {
			case <-cctx.Done():
				return
			case <-t.C:
			}
			for j, o := range objs {
				if op.Mode == "recreate" && live[j][slot] != "" {
					// upstream reports a failed delete as a test error and empties the slot either way
					if err := o.delete(cctx, live[j][slot]); err != nil && cctx.Err() == nil && !apierrors.IsNotFound(err) {
						r.churnErr(fmt.Errorf("churn: unable to delete %v: %w", live[j][slot], err))
					}
					live[j][slot] = ""
					continue
				}
				// a failed create is ignored, as upstream's
				name, _ := o.create(cctx)
				if op.Mode == "recreate" {
					live[j][slot] = name
				}
			}
		}
	}()
	return nil
}

// churnedIn is whether a churn op makes objects in one of namespaces (any, when empty).
func (r *runner) churnedIn(namespaces []string) bool {
	if len(namespaces) == 0 {
		return len(r.churnNS) > 0
	}
	for _, ns := range namespaces {
		if r.churnNS[ns] {
			return true
		}
	}
	return false
}

// churnPodsIn counts the pods a churn op made that are still there, in namespaces (any when empty) matching sel.
func (r *runner) churnPodsIn(namespaces []string, sel map[string]string) int {
	if r.churning == nil {
		return 0
	}
	r.churning.mu.Lock()
	var keys []string
	for _, o := range r.churning.made {
		if o.mapping.GroupVersionKind.Group == "" && o.mapping.GroupVersionKind.Kind == "Pod" {
			keys = append(keys, o.namespace+"/"+o.name)
		}
	}
	r.churning.mu.Unlock()
	selected := selecting(namespaces, sel)
	r.cl.mu.Lock()
	defer r.cl.mu.Unlock()
	n := 0
	for _, k := range keys {
		if st := r.cl.pods[k]; st != nil && selected(st) {
			n++
		}
	}
	return n
}

func (r *runner) churnErr(err error) {
	nodesMu.Lock()
	defer nodesMu.Unlock()
	if r.churnFailed == nil {
		r.churnFailed = err
	}
}

// stopChurn ends the churn of the run (upstream: when the workload's context ends) and waits for it.
func (r *runner) stopChurn() error {
	if r.churning == nil {
		return nil
	}
	r.churning.cancel()
	r.churning.wg.Wait()
	nodesMu.Lock()
	defer nodesMu.Unlock()
	return r.churnFailed
}

// deleteChurned deletes what the churn ops made and left.
func (r *runner) deleteChurned(ctx context.Context) error {
	if r.churning == nil {
		return nil
	}
	for _, o := range r.churning.made {
		if err := r.deleteObject(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	r.churning = nil
	return nil
}

// pvTemplates are createPods' persistent volume templates: plain files, strictly decoded, as upstream's
// getPersistentVolumeSpecFromFile and getPersistentVolumeClaimSpecFromFile.
func pvTemplates(op Op) (*v1.PersistentVolume, *v1.PersistentVolumeClaim, error) {
	pv, pvc := &v1.PersistentVolume{}, &v1.PersistentVolumeClaim{}
	for _, f := range []struct {
		path *string
		into any
		what string
	}{{op.PVTemplatePath, pv, "PersistentVolume"}, {op.PVCTemplatePath, pvc, "PersistentVolumeClaim"}} {
		b, err := os.ReadFile(*f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("parsing %s: %w", f.what, err)
		}
		if err := yaml.UnmarshalStrict(b, f.into); err != nil {
			return nil, nil, fmt.Errorf("parsing %s: %s: %w", f.what, *f.path, err)
		}
	}
	return pv, pvc, nil
}

// boundVolume is pod j's claim pvc-<j> and volume <ns>-vol-<j>, bound to each other (claimRef, volumeName, both
// phases Bound), as upstream's getCustomVolumeFactory and CreatePodWithPersistentVolume with bindVolume.
func boundVolume(pvTemplate *v1.PersistentVolume, pvcTemplate *v1.PersistentVolumeClaim, ns string, j int) (*v1.PersistentVolume, *v1.PersistentVolumeClaim) {
	pvcName := fmt.Sprintf("pvc-%d", j)
	pvc := pvcTemplate.DeepCopy()
	pvc.Name = pvcName
	pv := pvTemplate.DeepCopy()
	volumeID := fmt.Sprintf("vol-%d", j)
	pv.Name = volumeID
	if pv.Spec.CSI != nil {
		pv.Spec.CSI.VolumeHandle = volumeID
	} else if pv.Spec.AWSElasticBlockStore != nil {
		pv.Spec.AWSElasticBlockStore.VolumeID = volumeID
	}
	// PVs are cluster-wide: the namespace makes the name unique.
	pv.Name = fmt.Sprintf("%s-%s", ns, pv.Name)
	if pv.Spec.CSI != nil {
		pv.Spec.CSI.VolumeHandle = pv.Name
	}
	pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: pvcName, APIVersion: "v1"}
	pv.Status.Phase = v1.VolumeBound
	pvc.Spec.VolumeName = pv.Name
	pvc.Status.Phase = v1.ClaimBound
	return pv, pvc
}

// withClaim gives the pod the one volume "vol" of claim pvc (replacing the template's volumes, as upstream).
func withClaim(pod *v1.Pod, pvc string) {
	pod.Spec.Volumes = []v1.Volume{{Name: "vol", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}}}
}

// createVolume creates pod j's bound claim and volume and sets their statuses (a create resets them).
func (r *runner) createVolume(ctx context.Context, pvTemplate *v1.PersistentVolume, pvcTemplate *v1.PersistentVolumeClaim, ns string, j int) (string, error) {
	pv, pvc := boundVolume(pvTemplate, pvcTemplate, ns, j)
	created, err := r.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = r.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("error creating PVC: %w", err)
	}
	created.Status = pvc.Status
	if _, err := r.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("error updating PVC status: %w", err)
	}
	createdPV, err := r.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		createdPV, err = r.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("error creating PV: %w", err)
	}
	nodesMu.Lock()
	r.createdPV = append(r.createdPV, pv.Name)
	nodesMu.Unlock()
	createdPV.Status = pv.Status
	if _, err := r.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, createdPV, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("error updating PV status: %w", err)
	}
	return pvc.Name, nil
}

// allocatablePatch is the merge patch upstream's NodeAllocatableStrategy sends for a node: its
// status.allocatable with the strategy's values (sent to the node, not its status: the API server keeps the
// status as it was, there as here).
func allocatablePatch(node *v1.Node, s *nodeAllocatable) []byte {
	changed := map[string]string{}
	for name, value := range s.NodeAllocatable {
		if q, ok := node.Status.Allocatable[name]; ok && q.String() == value {
			continue
		}
		changed[string(name)] = value
	}
	if len(changed) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{"allocatable": changed}})
	return b
}

// csiNode is the CSINode upstream's NodeAllocatableStrategy creates for a node without one.
func csiNode(nodeName string, s *nodeAllocatable) *storagev1.CSINode {
	c := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Annotations: map[string]string{
			v1.MigratedPluginsAnnotationKey: strings.Join(s.MigratedPlugins, ","),
		}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	for driver, allocatable := range s.CsiNodeAllocatable {
		c.Spec.Drivers = append(c.Spec.Drivers, storagev1.CSINodeDriver{Name: driver, Allocatable: allocatable, NodeID: nodeName})
	}
	return c
}

// prepareAllocatable applies the strategy to a created node: the patch, then its CSINode (created, or updated
// with the drivers' allocatable and the annotation when one exists).
func (r *runner) prepareAllocatable(ctx context.Context, node *v1.Node, s *nodeAllocatable) error {
	if p := allocatablePatch(node, s); p != nil {
		if _, err := r.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("error while applying patch %s to Node %v: %w", p, node.Name, err)
		}
	}
	csi := r.client.StorageV1().CSINodes()
	for attempt := 0; ; attempt++ {
		existing, err := csi.Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = csi.Create(ctx, csiNode(node.Name, s), metav1.CreateOptions{})
		case err == nil:
			for driverName, allocatable := range s.CsiNodeAllocatable {
				found := false
				for k := range existing.Spec.Drivers {
					if existing.Spec.Drivers[k].Name == driverName {
						existing.Spec.Drivers[k].Allocatable, found = allocatable, true
						break
					}
				}
				if !found {
					existing.Spec.Drivers = append(existing.Spec.Drivers, storagev1.CSINodeDriver{Name: driverName, Allocatable: allocatable})
				}
			}
			if existing.Annotations == nil {
				existing.Annotations = map[string]string{}
			}
			existing.Annotations[v1.MigratedPluginsAnnotationKey] = strings.Join(s.MigratedPlugins, ",")
			_, err = csi.Update(ctx, existing, metav1.UpdateOptions{})
		}
		if err == nil {
			nodesMu.Lock()
			r.createdCSINodes = append(r.createdCSINodes, node.Name)
			nodesMu.Unlock()
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)) || attempt >= 4 {
			return fmt.Errorf("error while preparing objects for node %s: %w", node.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteVolumesAndCSINodes deletes the run's claims, volumes and CSINodes, their protection finalizers removed
// (no controller here removes them).
func (r *runner) deleteVolumesAndCSINodes(ctx context.Context) error {
	for ns := range r.createdNS {
		claims := r.client.CoreV1().PersistentVolumeClaims(ns)
		list, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing the PVCs in %s: %w", ns, err)
		}
		for _, c := range list.Items {
			if err := claims.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting PVC %s/%s: %w", ns, c.Name, err)
			}
			if _, err := claims.Patch(ctx, c.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the finalizers of PVC %s/%s: %w", ns, c.Name, err)
			}
		}
	}
	pvs := r.client.CoreV1().PersistentVolumes()
	for _, name := range r.createdPV {
		if err := pvs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PV %s: %w", name, err)
		}
		if _, err := pvs.Patch(ctx, name, types.MergePatchType, noFinalizers, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the finalizers of PV %s: %w", name, err)
		}
	}
	r.createdPV = nil
	for _, name := range r.createdCSINodes {
		if err := r.client.StorageV1().CSINodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting CSINode %s: %w", name, err)
		}
	}
	r.createdCSINodes = nil
	return nil
}

// steadily is createPods' steadyState, upstream's createPodsSteadily: count pods created, then each pod seen bound
// in the namespace deleted at once and a new one created (rendered as index 0 of 1, as upstream's strategy for
// one pod), until the op's duration is over; an error when no pod at all got bound.
func (r *runner) steadily(ctx context.Context, ns string, op Op, createOne func(j, count int) error) error {
	d, _ := time.ParseDuration(op.Duration)
	ch := make(chan string, op.Count+1024)
	r.cl.mu.Lock()
	if r.cl.bound == nil {
		r.cl.bound = map[string]chan string{}
	}
	r.cl.bound[ns] = ch
	r.cl.mu.Unlock()
	defer func() {
		r.cl.mu.Lock()
		delete(r.cl.bound, ns)
		r.cl.mu.Unlock()
	}()
	if err := kit.Parallel(ctx, op.Count, r.workers, func(j int) error { return createOne(j, op.Count) }); err != nil {
		return fmt.Errorf("create initial %d pods: %w", op.Count, err)
	}
	end := time.After(d)
	zero := int64(0)
	background := metav1.DeletePropagationBackground
	scheduled := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			if scheduled == 0 {
				return fmt.Errorf("no pod at all got scheduled, either because of a problem or because the test interval was too small")
			}
			return nil
		case name := <-ch:
			scheduled++
			err := r.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete scheduled pod: %w", err)
			}
			if err := createOne(0, 1); err != nil {
				return fmt.Errorf("create next batch of pods: %w", err)
			}
		}
	}
}
