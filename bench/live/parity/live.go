package main

// The live side: the seed's cluster written to the API server, the two schedulers started on it, and one probe
// placed at a time (created, seen bound or unschedulable, deleted with grace 0 and seen gone).

import (
	"context"
	"fmt"
	"kube-wasm-scheduler.local/bench-live/kit"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// clearCluster deletes every node and pod an earlier seed left (pods with grace 0: no kubelet confirms a graceful
// deletion) and waits until they are gone, so a seed's cluster is exactly what it generated.
func clearCluster(ctx context.Context, c kubernetes.Interface) error {
	zero := int64(0)
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: parityLabel})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		if err := c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting pods in %s: %w", ns.Name, err)
		}
		// Services have no deletecollection: one by one.
		svcs, err := c.CoreV1().Services(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing services in %s: %w", ns.Name, err)
		}
		for _, s := range svcs.Items {
			if err := c.CoreV1().Services(ns.Name).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting service %s/%s: %w", ns.Name, s.Name, err)
			}
		}
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: parityLabel}); err != nil {
		return fmt.Errorf("deleting nodes: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: parityLabel})
		if err != nil {
			return err
		}
		left := len(nodes.Items)
		for _, ns := range nss.Items {
			pods, err := c.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			left += len(pods.Items)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d nodes and pods of earlier seeds still there after 2 minutes", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createCluster writes the seed's namespace, nodes, services and background pods; nodes first, in name order.
func createCluster(ctx context.Context, c kubernetes.Interface, cl *cluster) error {
	for _, ns := range cl.namespaces() {
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	for _, n := range cl.nodes {
		created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		// Should the API server drop a created node's status, write it through /status as a kubelet would.
		if len(created.Status.Allocatable) == 0 || len(created.Status.Images) != len(n.Status.Images) {
			created.Status = n.Status
			if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("setting status of node %s: %w", n.Name, err)
			}
		}
	}
	for _, s := range cl.services {
		if _, err := c.CoreV1().Services(cl.namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating service %s: %w", s.Name, err)
		}
	}
	for _, p := range cl.background {
		if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating background pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// podWatch follows the pods of one namespace: a placement waits on it for its pod to be bound, found
// unschedulable, or gone.
type podWatch struct {
	stop    chan struct{}
	mu      sync.Mutex
	pods    map[string]*v1.Pod
	changed chan struct{} // closed and replaced on every change
}

func watchPods(c kubernetes.Interface, ns string) (*podWatch, error) {
	w := &podWatch{stop: make(chan struct{}), pods: map[string]*v1.Pod{}, changed: make(chan struct{})}
	lw := cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	set := func(name string, p *v1.Pod) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if p == nil {
			delete(w.pods, name)
		} else {
			w.pods[name] = p
		}
		close(w.changed)
		w.changed = make(chan struct{})
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { p := o.(*v1.Pod); set(p.Name, p) },
		UpdateFunc: func(_, o interface{}) { p := o.(*v1.Pod); set(p.Name, p) },
		DeleteFunc: func(o interface{}) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*v1.Pod); ok {
				set(p.Name, nil)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	go inf.Run(w.stop)
	if !cache.WaitForCacheSync(w.stop, inf.HasSynced) {
		return nil, fmt.Errorf("pod watch in %s did not sync", ns)
	}
	return w, nil
}

// wait blocks until cond holds for the named pod (nil when it does not exist) or the timeout passes.
func (w *podWatch) wait(ctx context.Context, name string, timeout time.Duration, cond func(*v1.Pod) bool) (*v1.Pod, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		p, ch := w.pods[name], w.changed
		w.mu.Unlock()
		if cond(p) {
			return p, nil
		}
		select {
		case <-ch:
		case <-deadline:
			return p, fmt.Errorf("timed out after %s", timeout)
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
}

// outcome is where one placement went: a node, or "" with the scheduler's message when it found none.
type outcome struct {
	node    string
	message string
}

func (o outcome) String() string {
	if o.node == "" {
		return "(unschedulable)"
	}
	return o.node
}

// place creates the probe under name for schedulerName, waits until it is bound or reported unschedulable,
// deletes it with grace 0 and waits until it is gone (the schedulers see the deletion before the next probe:
// both follow pods through one watch, in order).
func place(ctx context.Context, c kubernetes.Interface, w *podWatch, pr probe, name, schedulerName string, timeout time.Duration) (outcome, error) {
	pod := pr.pod.DeepCopy()
	pod.Name = name
	pod.Spec.SchedulerName = schedulerName
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return outcome{}, fmt.Errorf("creating probe %s: %w", name, err)
	}
	p, err := w.wait(ctx, name, timeout, func(p *v1.Pod) bool {
		return p != nil && (p.Spec.NodeName != "" || unschedulable(p) != "")
	})
	var out outcome
	if err == nil {
		out = outcome{node: p.Spec.NodeName, message: unschedulable(p)}
	}
	zero := int64(0)
	if derr := c.CoreV1().Pods(pod.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); derr != nil && !apierrors.IsNotFound(derr) {
		return out, fmt.Errorf("deleting probe %s: %w", name, derr)
	}
	if _, gerr := w.wait(ctx, name, time.Minute, func(p *v1.Pod) bool { return p == nil }); gerr != nil {
		return out, fmt.Errorf("probe %s not gone: %w", name, gerr)
	}
	if err != nil {
		return out, fmt.Errorf("probe %s for %s neither bound nor unschedulable: %w", name, schedulerName, err)
	}
	return out, nil
}

// unschedulable is the PodScheduled=False message when the scheduler reported the pod unschedulable.
func unschedulable(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			if c.Message == "" {
				return "unschedulable"
			}
			return c.Message
		}
	}
	return ""
}

// schedulerConfig writes a KubeSchedulerConfiguration v1 with the default profile under schedulerName and
// leader election off (kubeconfig "" leaves clientConnection out: the simulator needs none).
func schedulerConfig(path, kubeconfig, schedulerName string) error {
	conn := ""
	if kubeconfig != "" {
		conn = fmt.Sprintf("clientConnection:\n  kubeconfig: %q\n", kubeconfig)
	}
	body := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n%sleaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: %s\n", conn, schedulerName)
	return os.WriteFile(path, []byte(body), 0o644)
}

// process is a running scheduler.
type process struct {
	*kit.Process
	name    string
	logPath string
}

// startScheduler starts bin with its own config under dir, serving on a free loopback port, its log in
// dir/<name>.log.
func startScheduler(name, bin, dir, kubeconfig, schedulerName string, extra ...string) (*process, error) {
	port, err := kit.FreePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, name+"-config.yaml")
	if err := schedulerConfig(cfg, kubeconfig, schedulerName); err != nil {
		return nil, err
	}
	argv := append([]string{bin, "--config", cfg, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, name+"-certs")}, extra...)
	logPath := filepath.Join(dir, name+".log")
	kp, err := kit.Start(argv, logPath, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
	if err != nil {
		return nil, err
	}
	return &process{Process: kp, name: name, logPath: logPath}, nil
}

// startBoth starts kube-scheduler and ours with their configs and logs under dir and waits until both are ready;
// the function it returns stops them.
func startBoth(ctx context.Context, o options, dir string) (func(), error) {
	kube, err := startScheduler("kube-scheduler", o.kubeScheduler, dir, o.kubeconfig, kubeName, strings.Fields(o.kubeFlags)...)
	if err != nil {
		return nil, err
	}
	ours, err := startScheduler("kube-wasm-scheduler", o.ours, dir, o.kubeconfig, oursName, strings.Fields(o.oursFlags)...)
	if err != nil {
		kube.stop()
		return nil, err
	}
	stop := func() { ours.stop(); kube.stop() }
	for _, p := range []*process{kube, ours} {
		if err := p.waitReady(ctx, 2*time.Minute); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// waitReady polls /readyz until it answers 200 (the scheduler has synced its informers).
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	if err := p.WaitReady(ctx, timeout); err != nil {
		return fmt.Errorf("%s: %w; log %s", p.name, err, p.logPath)
	}
	return nil
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (p *process) stop() { p.Stop() }
