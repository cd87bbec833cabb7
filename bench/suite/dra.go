package main

// allocResourceClaims: every unallocated ResourceClaim of the op's namespace (all when none) allocated by the
// structured allocator of k8s.io/dynamic-resource-allocation on a random node that can take it, and the
// allocation written to the claim's status, one claim at a time, as upstream's allocResourceClaimsOp (dra.go):
// claims allocated without a pod, as if by a scheduler that ran before.

import (
	"context"
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// draGateDefaults are kube-scheduler v1.37.2's defaults of the feature gates the allocator is configured by
// (pkg/features): upstream's test reads them from its process's gates, the workload's overriding them.
var draGateDefaults = map[string]bool{
	"DRAPrioritizedList": true, "DRAAdminAccess": true, "DRADeviceTaints": true, "DRAPartitionableDevices": true,
	"DRAConsumableCapacity": true, "DRADeviceCompatibilityGroups": false, "DRAListTypeAttributes": false,
}

// draGate is a gate's value for a workload: its own setting, else the default.
func draGate(gates map[string]bool, name string) bool {
	if v, ok := gates[name]; ok {
		return v
	}
	return draGateDefaults[name]
}

// allocatorFeatures are the structured allocator's features for a workload's gates, the ones upstream sets.
func allocatorFeatures(gates map[string]bool) structured.Features {
	return structured.Features{
		PrioritizedList:      draGate(gates, "DRAPrioritizedList"),
		AdminAccess:          draGate(gates, "DRAAdminAccess"),
		DeviceTaints:         draGate(gates, "DRADeviceTaints"),
		PartitionableDevices: draGate(gates, "DRAPartitionableDevices"),
		ConsumableCapacity:   draGate(gates, "DRAConsumableCapacity"),
		CompatibilityGroups:  draGate(gates, "DRADeviceCompatibilityGroups"),
	}
}

// allocatedState is what the claims' allocations hold: devices, shared device IDs and consumed capacity.
func allocatedState(claims []*resourcev1.ResourceClaim) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			deviceID := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			state.AllocatedDevices.Insert(deviceID)
			if result.ShareID == nil {
				continue
			}
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(deviceID, result.ShareID))
			if result.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(deviceID, result.ConsumedCapacity))
			}
		}
	}
	return state
}

// classLister lists the DeviceClasses read once for the op.
type classLister map[string]*resourcev1.DeviceClass

func (l classLister) List() ([]*resourcev1.DeviceClass, error) {
	out := make([]*resourcev1.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

func (r *runner) allocResourceClaims(ctx context.Context, op Op) error {
	ns := ""
	if op.Namespace != nil {
		ns = *op.Namespace
	}
	res := r.client.ResourceV1()
	todo, err := res.ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	everyClaim, err := res.ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	// The claims as allocated so far (upstream: its claim assume cache), by namespace/name.
	all := map[string]*resourcev1.ResourceClaim{}
	for i := range everyClaim.Items {
		c := &everyClaim.Items[i]
		all[c.Namespace+"/"+c.Name] = c
	}
	classList, err := res.DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list classes: %w", err)
	}
	classes := classLister{}
	for i := range classList.Items {
		classes[classList.Items[i].Name] = &classList.Items[i]
	}
	sliceList, err := res.ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list slices: %w", err)
	}
	slices := make([]*resourcev1.ResourceSlice, 0, len(sliceList.Items))
	for i := range sliceList.Items {
		slices = append(slices, &sliceList.Items[i])
	}
	nodeList, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*v1.Node, 0, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes = append(nodes, &nodeList.Items[i])
	}
	celCache := cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: draGate(r.gates, "DRAConsumableCapacity"),
		EnableListTypeAttributes: draGate(r.gates, "DRAListTypeAttributes"),
	})
	features := allocatorFeatures(r.gates)
claims:
	for i := range todo.Items {
		claim := &todo.Items[i]
		if claim.Status.Allocation != nil {
			continue
		}
		current := make([]*resourcev1.ResourceClaim, 0, len(all))
		for _, c := range all {
			current = append(current, c)
		}
		allocator, err := structured.NewAllocator(ctx, features, allocatedState(current), classes, slices, celCache)
		if err != nil {
			return fmt.Errorf("create allocator: %w", err)
		}
		rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		for _, node := range nodes {
			result, err := allocator.Allocate(ctx, node, []*resourcev1.ResourceClaim{claim})
			if err != nil {
				return fmt.Errorf("allocate claim: %w", err)
			}
			if result != nil {
				claim = claim.DeepCopy()
				claim.Status.Allocation = &result[0]
				updated, err := res.ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
				if err != nil {
					return fmt.Errorf("update claim status with allocation: %w", err)
				}
				all[updated.Namespace+"/"+updated.Name] = updated
				continue claims
			}
		}
		return fmt.Errorf("could not allocate claim %d out of %d", i, len(todo.Items))
	}
	return nil
}
