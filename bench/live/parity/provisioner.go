package main

// A stand-in for the external provisioner and the PersistentVolume controller, neither of which runs in the parity
// control plane: a claim of the run's namespace that a scheduler gave a node (volume.kubernetes.io/selected-node)
// gets a volume there, and both are marked bound, so the scheduler's PreBind (which waits for exactly that) ends
// and the pod binds. The volume is a CSI volume of the class's provisioner, as big as the claim asks, with node
// affinity to the selected node's hostname label.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annBindCompleted = "pv.kubernetes.io/bind-completed"
)

// provisionClaims polls the run's claims until the returned stop is called; volumes it makes join made (deleted
// with the run).
func (env *scenarioEnv) provisionClaims(ns, run string, made *[]created) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var mine []created
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			claims, err := env.client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range claims.Items {
					if c, ok := env.provisionOne(ctx, &claims.Items[i], run); ok {
						mu.Lock()
						mine = append(mine, c)
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		*made = append(*made, mine...)
	}
}

// provisionOne provisions and binds pvc when a scheduler selected its node and it is not bound yet.
func (env *scenarioEnv) provisionOne(ctx context.Context, pvc *v1.PersistentVolumeClaim, run string) (created, bool) {
	node := pvc.Annotations[annSelectedNode]
	if node == "" || pvc.Spec.VolumeName != "" || pvc.Spec.StorageClassName == nil {
		return created{}, false
	}
	class, err := env.client.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return created{}, false
	}
	size := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(pvc.UID), Labels: map[string]string{scenarioLabel: run}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: class.Provisioner, VolumeHandle: string(pvc.UID)},
			},
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace,
				Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	pv, err = env.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "parity: warning: provisioning %s/%s: %v\n", pvc.Namespace, pvc.Name, err)
		return created{}, false
	}
	c := created{res: env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}), name: pv.Name, kind: "PersistentVolume"}
	pv.Status.Phase = v1.VolumeBound
	if _, err := env.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "parity: warning: volume %s status: %v\n", pv.Name, err)
	}
	pvc = pvc.DeepCopy()
	pvc.Spec.VolumeName = pv.Name
	pvc.Annotations[annBindCompleted] = "yes"
	pvc, err = env.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "parity: warning: binding %s: %v\n", pv.Name, err)
		return c, true
	}
	pvc.Status.Phase = v1.ClaimBound
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: size}
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	if _, err := env.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "parity: warning: claim %s status: %v\n", pvc.Name, err)
	}
	return c, true
}
