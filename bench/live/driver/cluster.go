package main

// The driver's side of the API server: nodes, namespaces, pods (created concurrently, the time each create call
// returned recorded) and one watch per run that timestamps the moment each pod is seen bound.

import (
	"context"
	"fmt"
	"kube-wasm-scheduler.local/bench-live/kit"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const (
	benchLabel = "bench.kube-wasm-scheduler.io/live"
	zoneLabel  = "topology.kubernetes.io/zone"
)

func nodeName(i int) string { return fmt.Sprintf("bench-node-%05d", i) }

// ensureNodes makes the cluster hold exactly the benchmark nodes 0..n-1: 8 CPU, 32 GiB, 110 pods each, in zones
// zone-0..zone-(zones-1) round-robin, and a priority.example.com label 0..9 that does not follow the zone.
func ensureNodes(ctx context.Context, c kubernetes.Interface, n, zones, workers int) error {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	have := map[string]bool{}
	var extra []string
	for _, node := range list.Items {
		have[node.Name] = true
		var i int
		if _, err := fmt.Sscanf(node.Name, "bench-node-%d", &i); err != nil || i >= n {
			extra = append(extra, node.Name)
		}
	}
	if err := kit.Parallel(ctx, len(extra), workers, func(i int) error {
		err := c.CoreV1().Nodes().Delete(ctx, extra[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("deleting nodes: %w", err)
	}
	resources := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("8"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	return kit.Parallel(ctx, n, workers, func(i int) error {
		name := nodeName(i)
		if have[name] {
			return nil
		}
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				benchLabel:               "true",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				zoneLabel:                fmt.Sprintf("zone-%d", i%zones),
				kit.PriorityLabel:        strconv.Itoa((i / zones) % 10),
			}},
			Status: v1.NodeStatus{
				Capacity:    resources,
				Allocatable: resources,
				Phase:       v1.NodeRunning,
				Conditions: []v1.NodeCondition{{
					Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: now, LastTransitionTime: now,
				}},
			},
		}
		return kit.Retry(ctx, func() error {
			created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating node %s: %w", name, err)
			}
			// The API server keeps a node's status on create; should a version not, set it through /status.
			if len(created.Status.Allocatable) == 0 {
				created.Status = node.Status
				if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("setting status of node %s: %w", name, err)
				}
			}
			return nil
		})
	})
}

func podName(i int) string { return fmt.Sprintf("pod-%05d", i) }

func newPod(i int, schedulerName string) *v1.Pod {
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(i), Labels: map[string]string{"app": "bench"}},
		Spec: v1.PodSpec{
			SchedulerName:                 schedulerName,
			TerminationGracePeriodSeconds: &zero,
			Containers: []v1.Container{{
				Name:  "pause",
				Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("100m"),
					v1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
	}
}

// createPods creates pods 0..n-1 in ns with workers concurrent calls and returns, per pod, when its create call
// returned (the API server had stored it), and when the first call was made.
func createPods(ctx context.Context, c kubernetes.Interface, ns, schedulerName string, n, workers int) (first time.Time, created []time.Time, err error) {
	created = make([]time.Time, n)
	first = time.Now()
	err = kit.Parallel(ctx, n, workers, func(i int) error {
		pod := newPod(i, schedulerName)
		err := kit.Retry(ctx, func() error {
			_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		created[i] = time.Now()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating pod %s/%s: %w", ns, pod.Name, err)
		}
		return nil
	})
	return first, created, err
}

// podWatch follows the pods of one namespace and records when each is first seen with spec.nodeName set.
type podWatch struct {
	target int
	stopCh chan struct{}

	mu        sync.Mutex
	seen      map[string]bool
	bound     map[string]time.Time
	lastBound time.Time
	allSeen   chan struct{}
	allBound  chan struct{}
}

func watchPods(c kubernetes.Interface, ns string, target int) *podWatch {
	w := &podWatch{
		target:   target,
		stopCh:   make(chan struct{}),
		seen:     make(map[string]bool, target),
		bound:    make(map[string]time.Time, target),
		allSeen:  make(chan struct{}),
		allBound: make(chan struct{}),
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Pods(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Pods(ns).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	on := func(obj interface{}) {
		now := time.Now()
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.seen[pod.Name] {
			w.seen[pod.Name] = true
			if len(w.seen) == w.target {
				close(w.allSeen)
			}
		}
		if pod.Spec.NodeName != "" {
			if _, ok := w.bound[pod.Name]; !ok {
				w.bound[pod.Name] = now
				w.lastBound = now
				if len(w.bound) == w.target {
					close(w.allBound)
				}
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj interface{}) { on(obj) },
	})
	go inf.Run(w.stopCh)
	cache.WaitForCacheSync(w.stopCh, inf.HasSynced)
	return w
}

func (w *podWatch) stop() { close(w.stopCh) }

// snapshot returns a copy of the bound times and the last one.
func (w *podWatch) snapshot() (map[string]time.Time, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.bound))
	for k, v := range w.bound {
		out[k] = v
	}
	return out, w.lastBound
}

func (w *podWatch) seenCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func (w *podWatch) boundCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

// emptyNamespace deletes the run's pods at once (grace period 0: no kubelet would confirm a graceful deletion of a
// bound pod) and its events, and waits until no pod is left, so the nodes are empty for the next run.
func emptyNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting pods in %s: %w", ns, err)
	}
	if err := c.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting events in %s: %w", ns, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods still in %s after 2 minutes", ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func createNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{benchLabel: "true"},
	}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
