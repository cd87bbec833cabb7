package main

// Running one workload's ops against the API server while one contender schedules, and undoing what it made.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"kube-wasm-scheduler.local/bench-live/kit"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// podState is what the run knows of one pod from its watch.
type podState struct {
	ns        string
	labels    map[string]string
	bound     bool
	attempted bool   // bound, or marked PodScheduled=False by a scheduler
	why       string // the last PodScheduled=False condition's reason and message
	node      string
}

// cluster follows every pod of the API server and counts, per namespace, the pods seen bound since the run began
// (a pod counts once, when first seen with spec.nodeName; as upstream, an add already bound counts).
type cluster struct {
	mu         sync.Mutex
	pods       map[string]*podState
	collectors map[*collector]bool // counting the pods bound from now on
	// bound: per namespace, where the names of its pods newly seen bound go (createPods' steadyState)
	bound map[string]chan string
}

func (c *cluster) on(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.pods[key]
	if st == nil {
		st = &podState{ns: pod.Namespace}
		c.pods[key] = st
	}
	st.labels = pod.Labels
	st.node = pod.Spec.NodeName
	if pod.Spec.NodeName != "" && !st.bound {
		st.bound = true
		if ch := c.bound[pod.Namespace]; ch != nil {
			select {
			case ch <- pod.Name:
			default:
			}
		}
		for col := range c.collectors {
			if col.matches(pod.Namespace, pod.Labels) {
				col.scheduled++
			}
		}
	}
	st.attempted = st.bound
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
			st.attempted = true
			st.why = cond.Reason + ": " + cond.Message
		}
	}
}

func (c *cluster) gone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		c.mu.Lock()
		delete(c.pods, pod.Namespace+"/"+pod.Name)
		c.mu.Unlock()
	}
}

// count returns the pods in namespaces (all when empty) matching sel: how many exist, are bound and attempted.
func (c *cluster) count(namespaces []string, sel map[string]string) (total, bound, attempted int) {
	selected := selecting(namespaces, sel)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.pods {
		if !selected(st) {
			continue
		}
		total++
		if st.bound {
			bound++
		}
		if st.attempted {
			attempted++
		}
	}
	return
}

// selecting is whether a pod is in one of namespaces (any when empty) and matches sel, both read once: the waits
// ask every 200 ms over every pod of the run.
func selecting(namespaces []string, sel map[string]string) func(*podState) bool {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	selector := labels.SelectorFromSet(sel)
	return func(st *podState) bool {
		return (len(in) == 0 || in[st.ns]) && selector.Matches(labels.Set(st.labels))
	}
}

// pending names up to max pods in namespaces matching sel that are not bound, each with why it was last
// refused (or "never attempted"), so a wait that times out says which pods it waited for.
func (c *cluster) pending(namespaces []string, sel map[string]string, max int) string {
	selected := selecting(namespaces, sel)
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for key, st := range c.pods {
		if st.bound || !selected(st) {
			continue
		}
		why := st.why
		if why == "" {
			why = "never attempted"
		}
		out = append(out, fmt.Sprintf("%s (%s)", key, why))
	}
	sort.Strings(out)
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("and %d more", len(out)-max))
	}
	return strings.Join(out, "; ")
}

// placement counts the bound pods per node and namespace ("node: ns=n ns=n; ..."), when at most max nodes hold
// pods: how a small workload's pods were spread, to compare contenders whose placements differ.
func (c *cluster) placement(max int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	per := map[string]map[string]int{}
	for _, st := range c.pods {
		if st.node == "" {
			continue
		}
		if per[st.node] == nil {
			per[st.node] = map[string]int{}
		}
		per[st.node][st.ns]++
	}
	if len(per) == 0 || len(per) > max {
		return ""
	}
	var out []string
	for node, byNS := range per {
		var parts []string
		for ns, n := range byNS {
			parts = append(parts, fmt.Sprintf("%s=%d", ns, n))
		}
		sort.Strings(parts)
		out = append(out, node+": "+strings.Join(parts, " "))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// watchCluster starts the pod informer of a run.
func watchCluster(client kubernetes.Interface, stop <-chan struct{}) *cluster {
	c := &cluster{pods: map[string]*podState{}, collectors: map[*collector]bool{}}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", "", fieldsEverything())
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.on, UpdateFunc: func(_, o any) { c.on(o) }, DeleteFunc: c.gone,
	})
	go inf.Run(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced)
	return c
}

// collector samples SchedulingThroughput of the pods in some namespaces matching a label selector, every second
// until stopped. As upstream's, it counts the pods that become bound after it started (under the cluster's lock).
type collector struct {
	name       string
	namespaces []string
	selector   map[string]string
	scheduled  int
	stopCh     chan struct{}
	done       chan struct{}
	s          sampler
}

func (col *collector) matches(ns string, lbls map[string]string) bool {
	in := len(col.namespaces) == 0
	for _, n := range col.namespaces {
		in = in || n == ns
	}
	return in && labels.SelectorFromSet(col.selector).Matches(labels.Set(lbls))
}

func (c *cluster) startCollector(name string, namespaces []string, sel map[string]string) *collector {
	col := &collector{name: name, namespaces: namespaces, selector: sel, stopCh: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.collectors[col] = true
	c.mu.Unlock()
	go func() {
		defer close(col.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-col.stopCh:
				c.mu.Lock()
				delete(c.collectors, col)
				c.mu.Unlock()
				return
			case now := <-t.C:
				c.mu.Lock()
				n := col.scheduled
				c.mu.Unlock()
				col.s.tick(now, n)
			}
		}
	}()
	return col
}

func (col *collector) stop() Throughput {
	close(col.stopCh)
	<-col.done
	return summarize(col.s.samples)
}

// Measurement is one measured op (a createPods with collectMetrics, or start/stopCollectingMetrics).
type Measurement struct {
	Name       string            `json:"name"`
	Namespaces []string          `json:"namespaces"`
	Selector   map[string]string `json:"labelSelector,omitempty"`
	Throughput Throughput        `json:"throughput"`
	Pods       int               `json:"pods"`      // pods in the measured namespaces at the end of the measurement
	Scheduled  int               `json:"scheduled"` // of them, bound
	Pending    int               `json:"pending"`   // of them, not bound
	Seconds    float64           `json:"seconds"`
	// Churned: a churn op creates pods in the measured namespaces at its own pace, ChurnPods of the measured
	// pods. How many there are depends on how long the workload ran, and since a createPods waits for as many
	// bound pods in its namespace as it created, churn pods counting (upstream's), how many of its own pods are
	// bound when the measurement ends is a race too: only the count of the other pods is comparable between runs.
	Churned   bool `json:"churned,omitempty"`
	ChurnPods int  `json:"churnPods,omitempty"`
}

// runner runs one workload's ops.
type runner struct {
	client        kubernetes.Interface
	cl            *cluster
	schedulerName string
	timeout       time.Duration // how long to wait for pods to be scheduled
	workers       int

	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	made    []made // by createAny, deleted at cleanup

	createdNodes []string
	createdNS    map[string]bool
	createdPods  map[string]int // per namespace, still there
	createdPC    map[string]bool
	// volumes and CSINodes of createPods' persistent volumes and createNodes' nodeAllocatableStrategy
	createdPV       []string
	createdCSINodes []string
	churning        *churning
	churnCtx        context.Context
	churnFailed     error
	churnNS         map[string]bool // namespaces a churn op creates objects in
	gates           map[string]bool // the workload's feature gates
	measurements    []Measurement
	open            *collector // from startCollectingMetrics
	openStart       time.Time
	measuredFrom    time.Time
	measuredTo      time.Time
}

func (r *runner) nsCreated(ctx context.Context, ns string, lbls map[string]string) error {
	if r.createdNS[ns] {
		return nil
	}
	_, err := r.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lbls}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	r.createdNS[ns] = true
	return nil
}

// run executes the ops in order; the first failure ends the workload.
func (r *runner) run(ctx context.Context, ops []Op) error {
	for i, op := range ops {
		if err := r.op(ctx, i, op); err != nil {
			// What was measured until the failure is reported, with the pods it left pending.
			if r.open != nil {
				r.stopCollecting()
			}
			_ = r.stopChurn()
			return fmt.Errorf("op %d (%s): %w", i, op.Opcode, err)
		}
	}
	if r.open != nil {
		r.stopCollecting()
	}
	// The churn goes on until the workload's last op is done, as upstream's (its context ends with the workload).
	return r.stopChurn()
}

func (r *runner) op(ctx context.Context, i int, op Op) error {
	switch op.Opcode {
	case "createNodes":
		return r.createNodes(ctx, i, op)
	case "createNamespaces":
		var lbls map[string]string
		if op.NamespaceObject != nil {
			lbls = op.NamespaceObject.Labels
		}
		for j := 0; j < op.Count; j++ {
			ns := fmt.Sprintf("%s-%d", op.Prefix, j)
			if err := r.nsCreated(ctx, ns, lbls); err != nil {
				return err
			}
			// a namespace the barriers without namespaces wait on, as upstream's
			r.createdPods[ns] += 0
		}
	case "churn":
		return r.churn(ctx, i, op)
	case "createPods":
		return r.createPods(ctx, i, op)
	case "barrier":
		return r.barrier(ctx, op.Namespaces, op.LabelSelector, op.StageRequirement == "Attempted")
	case "sleep":
		d, _ := time.ParseDuration(op.Duration)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	case "deletePods":
		return r.deletePods(ctx, op)
	case "createAny":
		return r.createAny(ctx, op)
	case "updateAny":
		return r.updateAny(ctx, op)
	case "createPodGroups":
		return r.createPodGroups(ctx, op)
	case "allocResourceClaims":
		return r.allocResourceClaims(ctx, op)
	case "startCollectingMetrics":
		if r.open != nil {
			return fmt.Errorf("metrics are already being collected")
		}
		r.open, r.openStart = r.cl.startCollector(op.Name, op.Namespaces, op.LabelSelector), time.Now()
		r.mark(r.openStart)
	case "stopCollectingMetrics":
		if r.open == nil {
			return fmt.Errorf("no startCollectingMetrics before")
		}
		r.stopCollecting()
	}
	// startCollectingProfile, stopCollectingProfile: upstream profiles its own Go process; nothing to do here.
	return nil
}

// mark widens the measured window (the scheduler's CPU during measured ops is read over it).
func (r *runner) mark(t time.Time) {
	if r.measuredFrom.IsZero() || t.Before(r.measuredFrom) {
		r.measuredFrom = t
	}
	if t.After(r.measuredTo) {
		r.measuredTo = t
	}
}

func (r *runner) stopCollecting() {
	col := r.open
	r.open = nil
	r.finish(col, r.openStart)
}

func (r *runner) finish(col *collector, start time.Time) {
	tp := col.stop()
	total, bound, _ := r.cl.count(col.namespaces, col.selector)
	r.mark(time.Now())
	r.measurements = append(r.measurements, Measurement{Name: col.name, Namespaces: col.namespaces, Selector: col.selector, Throughput: tp,
		Pods: total, Scheduled: bound, Pending: total - bound, Seconds: time.Since(start).Seconds(),
		Churned: r.churnedIn(col.namespaces), ChurnPods: r.churnPodsIn(col.namespaces, col.selector)})
}

func (r *runner) createNodes(ctx context.Context, i int, op Op) error {
	prefix := fmt.Sprintf("node-%d-", i)
	return kit.Parallel(ctx, op.Count, r.workers, func(j int) error {
		node := &v1.Node{}
		if op.NodeTemplatePath != nil {
			if err := render(*op.NodeTemplatePath, j, op.Count, op.TemplateParams, node); err != nil {
				return err
			}
		} else {
			res := v1.ResourceList{
				v1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
				v1.ResourceCPU:    resource.MustParse("4"),
				v1.ResourceMemory: resource.MustParse("32Gi"),
			}
			node.GenerateName = prefix
			node.Status = v1.NodeStatus{Capacity: res, Allocatable: res, Phase: v1.NodeRunning,
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}
		}
		// The driver draws a generated name itself (the hostname label and a unique label carry it); five random
		// characters collide about once in 5,000 nodes, where the API server would draw again, so it draws again
		// on AlreadyExists too.
		generated := node.Name == ""
		name := func() {
			if generated {
				node.Name = node.GenerateName + rand.String(5)
			}
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels["kubernetes.io/hostname"] = node.Name
			if s := op.LabelNodePrepareStrategy; s != nil && len(s.LabelValues) > 0 {
				node.Labels[s.LabelKey] = s.LabelValues[j%len(s.LabelValues)]
			}
			if s := op.UniqueNodeLabelStrategy; s != nil {
				node.Labels[s.LabelKey] = fmt.Sprintf("%s-%d", node.Name, j)
			}
		}
		name()
		var created *v1.Node
		if err := kit.Retry(ctx, func() error {
			var err error
			created, err = r.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			for draws := 0; err != nil && generated && apierrors.IsAlreadyExists(err) && draws < 10; draws++ {
				name()
				created, err = r.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			}
			if err != nil {
				return fmt.Errorf("creating node %s: %w", node.Name, err)
			}
			r.addNode(created.Name)
			return nil
		}); err != nil {
			return err
		}
		if op.NodeAllocatableStrategy != nil && created != nil {
			return r.prepareAllocatable(ctx, created, op.NodeAllocatableStrategy)
		}
		return nil
	})
}

var nodesMu sync.Mutex

// priorityClass turns a pod template's spec.priority into a PriorityClass of that value: upstream's test API server
// runs without the Priority admission plugin, which rejects a priority given in the pod spec; ours has it on. The
// scheduler sees the same priority either way.
func (r *runner) priorityClass(ctx context.Context, pod *v1.Pod) error {
	if pod.Spec.Priority == nil || pod.Spec.PriorityClassName != "" {
		return nil
	}
	name, err := r.priorityClassOf(ctx, *pod.Spec.Priority)
	if err != nil {
		return err
	}
	pod.Spec.PriorityClassName, pod.Spec.Priority = name, nil
	return nil
}

// priorityClassOf is the name of the run's PriorityClass of value, created when needed.
func (r *runner) priorityClassOf(ctx context.Context, value int32) (string, error) {
	name := fmt.Sprintf("suite-priority-%d", value)
	nodesMu.Lock()
	defer nodesMu.Unlock()
	if !r.createdPC[name] {
		_, err := r.client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating PriorityClass %s: %w", name, err)
		}
		if err := r.awaitPriorityAdmission(ctx, name); err != nil {
			return "", err
		}
		r.createdPC[name] = true
	}
	return name, nil
}

// awaitPriorityAdmission waits until the API server's Priority admission plugin, which reads PriorityClasses from
// an informer, knows class name: an object naming it right after its creation is refused ("no PriorityClass with
// name ... was found") on a busy machine. A dry-run pod naming the class goes through admission and writes nothing.
func (r *runner) awaitPriorityAdmission(ctx context.Context, name string) error {
	probe := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "priority-probe-"},
		Spec:       v1.PodSpec{PriorityClassName: name, Containers: []v1.Container{{Name: "c", Image: "pause"}}},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := r.client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !apierrors.IsForbidden(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PriorityClass %s: still unknown to admission after 30s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *runner) addNode(name string) {
	nodesMu.Lock()
	r.createdNodes = append(r.createdNodes, name)
	nodesMu.Unlock()
}

func defaultPod() *v1.Pod {
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-"}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "pause", Image: "registry.k8s.io/pause:3.10.2", Ports: []v1.ContainerPort{{ContainerPort: 80}},
		Resources: v1.ResourceRequirements{Limits: q, Requests: q},
	}}}}
}

func (r *runner) createPods(ctx context.Context, i int, op Op) error {
	ns := fmt.Sprintf("namespace-%d", i)
	if op.Namespace != nil {
		ns = *op.Namespace
	}
	if err := r.nsCreated(ctx, ns, nil); err != nil {
		return err
	}
	var col *collector
	start := time.Now()
	if op.CollectMetrics {
		col = r.cl.startCollector(fmt.Sprintf("op %d createPods", i), []string{ns}, nil)
		r.mark(start)
	}
	var pvTemplate *v1.PersistentVolume
	var pvcTemplate *v1.PersistentVolumeClaim
	if op.PVCTemplatePath != nil {
		var err error
		if pvTemplate, pvcTemplate, err = pvTemplates(op); err != nil {
			return err
		}
	}
	// createOne creates pod j of count (upstream's pod strategy for one index)
	createOne := func(j, count int) error {
		pod := defaultPod()
		if op.PodTemplatePath != nil {
			pod = &v1.Pod{}
			if err := render(*op.PodTemplatePath, j, count, op.TemplateParams, pod); err != nil {
				return err
			}
		}
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["signature"] = fmt.Sprintf("signature-label-%d", j/op.SignatureBatchSize)
		if err := r.priorityClass(ctx, pod); err != nil {
			return err
		}
		// Only the contender of this run schedules the suite's pods (a stray default-scheduler would not).
		if pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == v1.DefaultSchedulerName {
			pod.Spec.SchedulerName = r.schedulerName
		}
		if pvcTemplate != nil {
			claim, err := r.createVolume(ctx, pvTemplate, pvcTemplate, ns, j)
			if err != nil {
				return err
			}
			withClaim(pod, claim)
		}
		return kit.Retry(ctx, func() error {
			_, err := r.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating pod in %s: %w", ns, err)
			}
			return nil
		})
	}
	if op.SteadyState {
		err := r.steadily(ctx, ns, op, createOne)
		if col != nil {
			r.finish(col, start)
		}
		return err
	}
	err := kit.Parallel(ctx, op.Count, r.workers, func(j int) error { return createOne(j, op.Count) })
	if err != nil {
		if col != nil {
			col.stop()
		}
		return err
	}
	r.createdPods[ns] += op.Count
	if !op.SkipWaitToCompletion {
		// upstream's waitUntilPodsScheduledInNamespace: as many pods of the namespace bound as the op created
		err = r.waitBound(ctx, ns, op.Count)
	}
	if col != nil {
		r.finish(col, start)
	}
	return err
}

// waitBound waits until want pods of namespace ns are bound, or the timeout.
func (r *runner) waitBound(ctx context.Context, ns string, want int) error {
	deadline := time.Now().Add(r.timeout)
	for {
		_, bound, _ := r.cl.count([]string{ns}, nil)
		if bound >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods in %s scheduled after %s; pending: %s", bound, want, ns, r.timeout, r.cl.pending([]string{ns}, nil, 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitScheduled waits until every pod the run created in namespaces is bound (upstream's
// waitUntilPodsScheduledInNamespace), or the timeout.
func (r *runner) waitScheduled(ctx context.Context, namespaces []string, sel map[string]string) error {
	deadline := time.Now().Add(r.timeout)
	for {
		total, bound, _ := r.cl.count(namespaces, sel)
		want := 0
		for _, ns := range namespaces {
			want += r.createdPods[ns]
		}
		if sel != nil {
			want = total
		}
		if bound >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods in %s scheduled after %s; pending: %s", bound, want,
				strings.Join(namespaces, ","), r.timeout, r.cl.pending(namespaces, sel, 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *runner) barrier(ctx context.Context, namespaces []string, sel map[string]string, attempted bool) error {
	if len(namespaces) == 0 {
		for ns := range r.createdPods {
			namespaces = append(namespaces, ns)
		}
	}
	if !attempted {
		return r.waitScheduled(ctx, namespaces, sel)
	}
	deadline := time.Now().Add(r.timeout)
	for {
		// upstream's waitUntilPodsAttempted: as many pods bound or refused as the run created in the namespaces
		// (pods a churn op added there count among the attempted, not the wanted)
		total, _, att := r.cl.count(namespaces, sel)
		want := total
		if sel == nil {
			want = 0
			for _, ns := range namespaces {
				want += r.createdPods[ns]
			}
		}
		if att >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods attempted after %s", att, want, r.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *runner) deletePods(ctx context.Context, op Op) error {
	ns := ""
	if op.Namespace != nil {
		ns = *op.Namespace
	}
	pods, err := r.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(op.LabelSelector).String()})
	if err != nil {
		return err
	}
	zero := int64(0)
	var every time.Duration
	if op.DeletePodsPerSecond > 0 {
		every = time.Second / time.Duration(op.DeletePodsPerSecond)
	}
	del := func() error {
		for _, p := range pods.Items {
			if err := r.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if every > 0 {
				time.Sleep(every)
			}
		}
		return nil
	}
	r.createdPods[ns] -= len(pods.Items)
	if op.SkipWaitToCompletion {
		go func() { _ = del() }()
		return nil
	}
	return del()
}

// noFinalizers is the merge patch that drops an object's finalizers: no controller here would ever remove them.
var noFinalizers = []byte(`{"metadata":{"finalizers":null}}`)

// deleteAllPods deletes every pod of ns at once. One DeleteCollection of tens of thousands of pods can outlast the API
// server's request timeout (a minute), which ends the request but keeps what it deleted, so it is sent again until
// one completes.
func (r *runner) deleteAllPods(ctx context.Context, ns string) error {
	zero := int64(0)
	var err error
	for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
		err = r.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("deleting pods in %s: %w", ns, err)
}

// cleanup deletes what the run made: its pods (at once: no kubelet confirms a graceful deletion), then its
// namespaces (finalized here: the throwaway control plane runs no namespace controller) and nodes, and waits until
// they are gone so the next run starts from the same empty cluster.
func (r *runner) cleanup(ctx context.Context) error {
	for ns := range r.createdNS {
		if err := r.deleteAllPods(ctx, ns); err != nil {
			return err
		}
		_ = r.client.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		// Pods with finalizers (SchedulingDeletedPodsWithFinalizers) stay until someone removes them: here.
		pods, err := r.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing pods in %s: %w", ns, err)
		}
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				_, err := r.client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("removing the finalizers of %s/%s: %w", ns, p.Name, err)
				}
			}
		}
	}
	if err := r.deleteMade(ctx); err != nil {
		return err
	}
	_ = r.stopChurn()
	if err := r.deleteChurned(ctx); err != nil {
		return err
	}
	if err := r.deleteVolumesAndCSINodes(ctx); err != nil {
		return err
	}
	// Claims a scheduler made (DRA extended resources) or left allocated: without a namespace controller they would
	// outlive their namespace and keep their devices from the next run.
	for ns := range r.createdNS {
		claims := r.client.ResourceV1().ResourceClaims(ns)
		if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the ResourceClaims in %s: %w", ns, err)
		}
		left, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("listing the ResourceClaims in %s: %w", ns, err)
		}
		if left == nil {
			continue
		}
		for _, c := range left.Items {
			_, err := claims.Patch(ctx, c.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the finalizers of ResourceClaim %s/%s: %w", ns, c.Name, err)
			}
		}
	}
	for ns := range r.createdNS {
		if err := r.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns, err)
		}
		n, err := r.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil && len(n.Spec.Finalizers) > 0 {
			n.Spec.Finalizers = nil
			if _, err := r.client.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("finalizing namespace %s: %w", ns, err)
			}
		}
	}
	if err := kit.Parallel(ctx, len(r.createdNodes), r.workers, func(i int) error {
		err := r.client.CoreV1().Nodes().Delete(ctx, r.createdNodes[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("deleting nodes: %w", err)
	}
	for name := range r.createdPC {
		if err := r.client.SchedulingV1().PriorityClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PriorityClass %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := 0
		for ns := range r.createdNS {
			if _, err := r.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				left++
			}
		}
		total, _, _ := r.cl.count(nil, nil)
		if left == 0 && total == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cleanup: %d namespaces and %d pods left after 2 minutes", left, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
