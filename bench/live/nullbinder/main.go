// Command nullbinder is the live benchmark's ceiling: a "scheduler" with no scheduling logic. It watches the pods
// that name its schedulerName and are not bound yet, posts a Binding for each to the next node in round-robin order
// and records a Scheduled event (events.k8s.io/v1, as kube-scheduler). What it costs is what any scheduler pays
// just to talk to the API server: informers, one Binding and one Event per pod.
//
// It uses client-go like kube-scheduler (shared informers on the same selection of pods, protobuf, HTTP/2), but
// keeps at most --workers Bindings in flight on one HTTP/2 connection, and at most --workers Events on a second
// one, written after each pod's Binding without holding up the next Binding (kube-scheduler's events are
// asynchronous too). The API server serves 100 streams per connection by default; past that client-go dials a new
// TLS connection per request: with a goroutine per pod, as kube-scheduler binds (--workers 0), a backlog of 2,000
// pods made it dial up to ~2,000 connections and roughly halved the null binder's throughput.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
)

// scheduled is a bound pod whose Scheduled event is to be written.
type scheduled struct {
	pod  *v1.Pod
	note string
}

// nodeRing is the round-robin list of node names, kept sorted so the order does not depend on informer timing.
type nodeRing struct {
	mu    sync.RWMutex
	names []string
	next  atomic.Uint64
}

func (r *nodeRing) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.SearchStrings(r.names, name)
	if i < len(r.names) && r.names[i] == name {
		return
	}
	r.names = append(r.names, "")
	copy(r.names[i+1:], r.names[i:])
	r.names[i] = name
}

func (r *nodeRing) remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.SearchStrings(r.names, name)
	if i < len(r.names) && r.names[i] == name {
		r.names = append(r.names[:i], r.names[i+1:]...)
	}
}

func (r *nodeRing) pick() (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.names) == 0 {
		return "", false
	}
	return r.names[(r.next.Add(1)-1)%uint64(len(r.names))], true
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	schedulerName := flag.String("scheduler-name", "null-binder", "bind the pods whose spec.schedulerName is this")
	qps := flag.Float64("qps", 5000, "client QPS (as clientConnection.qps)")
	burst := flag.Int("burst", 5000, "client burst (as clientConnection.burst)")
	workers := flag.Int("workers", 90, "Bindings in flight on one connection, and Events in flight on another "+
		"(90 and the two watches stay within the API server's default 100 HTTP/2 streams per connection); "+
		"0: a goroutine per pod and events through client-go's broadcaster, as kube-scheduler")
	readyAddress := flag.String("ready-address", "", "host:port serving /readyz over plain HTTP once the informers have synced (empty: none)")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nullbinder: kubeconfig %s: %v\n", *kubeconfig, err)
		os.Exit(2)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "nullbinder"
	client := kubernetes.NewForConfigOrDie(cfg)
	// Events on a connection of their own: a Proxy function makes client-go build a transport that it does not share.
	eventsCfg := rest.CopyConfig(cfg)
	eventsCfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	eventClient := kubernetes.NewForConfigOrDie(eventsCfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var ready atomic.Bool
	if *readyAddress != "" {
		ln, err := net.Listen("tcp", *readyAddress)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nullbinder: listen %s: %v\n", *readyAddress, err)
			os.Exit(1)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready.Load() {
				http.Error(w, "informers not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		go func() { _ = http.Serve(ln, mux) }()
	}

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "nullbinder: events: %v\n", err)
		os.Exit(1)
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, *schedulerName)
	hostname, _ := os.Hostname()

	// Nodes first, so that no pod arrives before there is a node to bind it to.
	ring := &nodeRing{}
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	_, _ = nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*v1.Node); ok {
				ring.add(n.Name)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				ring.remove(n.Name)
			}
		},
	})
	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.HasSynced) {
		os.Exit(1)
	}

	// The pods kube-scheduler's informer watches (not finished), filtered here by schedulerName and nodeName, as
	// kube-scheduler does: the same watch path through the API server's watch cache.
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "status.phase!=" + string(v1.PodSucceeded) + ",status.phase!=" + string(v1.PodFailed)
		}))
	podInformer := podFactory.Core().V1().Pods().Informer()
	var inFlight sync.Map // pod UID -> struct{}: one binding per pod, however many updates arrive
	var bound, failed atomic.Int64
	var wg sync.WaitGroup
	var callsMu sync.Mutex
	var calls []time.Duration // how long each successful Binding call took, reported at exit
	eventQueue := make(chan scheduled, 1<<16)
	recordEvent := func(e scheduled) {
		now := time.Now()
		pod := e.pod
		_, err := eventClient.EventsV1().Events(pod.Namespace).Create(ctx, &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: *schedulerName,
			ReportingInstance:   *schedulerName + "-" + hostname,
			Action:              "Binding",
			Reason:              "Scheduled",
			Regarding: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
				UID: pod.UID, ResourceVersion: pod.ResourceVersion},
			Note: e.note,
			Type: v1.EventTypeNormal,
		}, metav1.CreateOptions{})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "nullbinder: event for %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
	}
	bind := func(pod *v1.Pod) {
		defer wg.Done()
		for attempt := 0; ; attempt++ {
			node, ok := ring.pick()
			if !ok {
				fmt.Fprintf(os.Stderr, "nullbinder: no nodes for %s/%s\n", pod.Namespace, pod.Name)
				failed.Add(1)
				return
			}
			start := time.Now()
			err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, &v1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
				Target:     v1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
			if err == nil {
				took := time.Since(start)
				callsMu.Lock()
				calls = append(calls, took)
				callsMu.Unlock()
				bound.Add(1)
				note := fmt.Sprintf("Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
				if *workers == 0 {
					recorder.Eventf(pod, nil, v1.EventTypeNormal, "Scheduled", "Binding", "%s", note)
				} else {
					eventQueue <- scheduled{pod, note}
				}
				return
			}
			if ctx.Err() != nil || attempt >= 2 {
				fmt.Fprintf(os.Stderr, "nullbinder: binding %s/%s to %s: %v\n", pod.Namespace, pod.Name, node, err)
				failed.Add(1)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	queue := make(chan *v1.Pod, 1<<16) // more than any benchmark's pods: the informer's handler does not wait
	onPod := func(obj interface{}) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.SchedulerName != *schedulerName || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			return
		}
		if _, loaded := inFlight.LoadOrStore(pod.UID, struct{}{}); loaded {
			return
		}
		if *workers == 0 {
			wg.Add(1)
			go bind(pod)
			return
		}
		queue <- pod
	}
	for i := 0; i < *workers; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				select {
				case pod := <-queue:
					wg.Add(1)
					bind(pod)
				case <-ctx.Done():
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case e := <-eventQueue:
					recordEvent(e)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj interface{}) { onPod(obj) },
	})
	podFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced) {
		os.Exit(1)
	}
	ready.Store(true)
	ring.mu.RLock()
	fmt.Fprintf(os.Stderr, "nullbinder: ready: %d nodes, schedulerName %s\n", len(ring.names), *schedulerName)
	ring.mu.RUnlock()

	<-ctx.Done()
	wg.Wait()
	broadcaster.Shutdown()
	sort.Slice(calls, func(i, j int) bool { return calls[i] < calls[j] })
	q := func(f float64) time.Duration {
		if len(calls) == 0 {
			return 0
		}
		return calls[int(f*float64(len(calls)-1))]
	}
	fmt.Fprintf(os.Stderr, "nullbinder: stopped: %d bound, %d failed; Binding call p50 %s, p99 %s\n",
		bound.Load(), failed.Load(), q(.5).Round(time.Millisecond), q(.99).Round(time.Millisecond))
}
