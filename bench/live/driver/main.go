// Command driver runs the live side-by-side benchmark (make bench-live) on a control plane started by
// scripts/control-plane.sh: for each size (nodes x pods), shape (streaming, backlog) and repetition it runs every
// contender in turn, interleaved (every other repetition in reverse order, so that the machine's drift over a
// pair of repetitions favours no one), each in a fresh namespace with its own schedulerName, and records pods/s,
// creation-to-bound latency seen by its own watch, the scheduler's CPU, peak RSS, threads and connections to the API
// server, and the API server's and etcd's CPU. Results go to OUT/runs.jsonl (one line per run as it ends),
// OUT/runs.json, OUT/runs.csv and OUT/meta.json; bench/live/report.py turns them into tables and a plot.
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"kube-wasm-scheduler.local/bench-live/kit"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// result is one run. JSON names are the columns of runs.csv too.
type result struct {
	Run           int    `json:"run"`
	Nodes         int    `json:"nodes"`
	Pods          int    `json:"pods"`
	Shape         string `json:"shape"`
	Contender     string `json:"contender"`
	Rep           int    `json:"rep"`
	Namespace     string `json:"namespace"`
	SchedulerName string `json:"scheduler_name"`
	OK            bool   `json:"ok"`
	Error         string `json:"error"`
	Bound         int    `json:"bound"`

	// pods/s = bound / window; the window runs from WindowFrom until the last pod was seen bound.
	WindowFrom string  `json:"window_from"`
	WindowS    float64 `json:"window_s"`
	PodsPerS   float64 `json:"pods_per_s"`
	// Scheduler start to /readyz 200 (streaming; the backlog shape does not wait for it).
	ReadyS float64 `json:"ready_s"`
	// How long creating all pods took (first call to last return).
	CreateS float64 `json:"create_s"`
	// Window start to the first pod seen bound.
	FirstBindS float64 `json:"first_bind_s"`

	// Latency per pod: seen bound minus LatencyFrom (streaming: its create call returned; backlog: the scheduler
	// started, since every pod was created before it and its creation time only measures the driver).
	LatencyFrom string  `json:"latency_from"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	// Creation-returned to bound in the backlog shape too, for completeness.
	CreatedP50Ms float64 `json:"created_p50_ms"`
	CreatedP99Ms float64 `json:"created_p99_ms"`

	SchedCPUS        float64 `json:"sched_cpu_s"`        // utime+stime of the scheduler process at the end
	SchedRSSMiB      float64 `json:"sched_rss_mib"`      // VmHWM
	SchedPeakConns   int     `json:"sched_peak_conns"`   // established TCP connections to the API server's port
	SchedPeakThreads int64   `json:"sched_peak_threads"` // Threads in /proc/PID/status
	Samples          int     `json:"samples"`
	APIServerCPUS    float64 `json:"apiserver_cpu_s"` // from just before the scheduler started to just before it stopped
	EtcdCPUS         float64 `json:"etcd_cpu_s"`
	DriverCPUS       float64 `json:"driver_cpu_s"`
	// After the last bind, how long the scheduler took to go quiet (CPU time growing by less than a tick in 500 ms)
	// before the figures above were read.
	DrainS float64 `json:"drain_s"`
	// Scheduled events in the run's namespace once the scheduler had stopped.
	Events  int    `json:"events"`
	Started string `json:"started"`
}

type options struct {
	cpDir, out                    string
	sizes                         [][2]int
	shapes                        []string
	contenders                    []kit.Contender
	reps                          int
	bins                          kit.Binaries
	qps                           float64
	burst                         int
	createWorkers, nodeWorkers    int
	zones                         int
	sampleInterval, settle, limit time.Duration
	drainMax                      time.Duration
}

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "driver: "+format+"\n", a...)
	os.Exit(2)
}

func parseSizes(s string) [][2]int {
	var out [][2]int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, p, ok := strings.Cut(strings.ToLower(f), "x")
		nodes, err1 := strconv.Atoi(n)
		pods, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nodes < 1 || pods < 1 {
			die("size %q: want NODESxPODS, e.g. 500x2000", f)
		}
		out = append(out, [2]int{nodes, pods})
	}
	return out
}

func list(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

func main() {
	var o options
	var sizes, shapes, contenders string
	flag.StringVar(&o.cpDir, "control-plane", "", "directory of a running scripts/control-plane.sh (kubeconfig, pids, ports)")
	flag.StringVar(&o.out, "out", "", "output directory")
	flag.StringVar(&sizes, "sizes", "500x2000,5000x5000", "sizes, NODESxPODS, comma-separated")
	flag.StringVar(&shapes, "shapes", "streaming,backlog", "shapes: streaming (scheduler ready, then pods created), backlog (pods created, then scheduler started)")
	flag.StringVar(&contenders, "contenders", "kube,ours,null,ours-guests", "contenders, in the order they take turns")
	flag.IntVar(&o.reps, "reps", 2, "repetitions of each (size, shape, contender)")
	flag.StringVar(&o.bins.KubeScheduler, "kube-scheduler", "", "kube-scheduler binary")
	flag.StringVar(&o.bins.Ours, "ours", "", "kube-wasm-scheduler binary")
	flag.StringVar(&o.bins.NullBinder, "null-binder", "", "null binder binary")
	flag.IntVar(&o.bins.NullWorkers, "null-workers", 90, "the null binder's --workers: Bindings and Events in flight (0: a goroutine per pod, as kube-scheduler)")
	flag.StringVar(&o.bins.GuestsDir, "guests", "", "directory holding qos-sort.wasm, priority-label.wasm, random-score.wasm")
	flag.Float64Var(&o.qps, "qps", 5000, "clientConnection.qps of every contender")
	flag.IntVar(&o.burst, "burst", 5000, "clientConnection.burst of every contender")
	flag.IntVar(&o.createWorkers, "create-workers", 16, "concurrent pod create calls")
	flag.IntVar(&o.nodeWorkers, "node-workers", 32, "concurrent node create calls")
	flag.IntVar(&o.zones, "zones", 10, "zones the nodes are spread over")
	flag.DurationVar(&o.sampleInterval, "sample-interval", 100*time.Millisecond, "how often the scheduler's connections and threads are sampled")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "pause before each run, for the API server to finish the previous one")
	flag.DurationVar(&o.drainMax, "drain", 15*time.Second, "after the last bind, wait at most this long for the scheduler's CPU time to stop growing")
	flag.DurationVar(&o.limit, "timeout", 0, "give up a run after this long (0: 60 s + 50 ms per pod)")
	flag.Parse()
	if o.cpDir == "" || o.out == "" {
		die("--control-plane and --out are required")
	}
	o.sizes = parseSizes(sizes)
	o.shapes = list(shapes)
	for _, s := range o.shapes {
		if s != "streaming" && s != "backlog" {
			die("shape %q: want streaming or backlog", s)
		}
	}
	for _, name := range list(contenders) {
		c, ok := kit.Contenders[name]
		if !ok {
			die("contender %q: want kube, ours, null or ours-guests", name)
		}
		o.contenders = append(o.contenders, c)
	}
	for _, c := range o.contenders {
		need := map[string]string{"kube": o.bins.KubeScheduler, "ours": o.bins.Ours, "null": o.bins.NullBinder}[c.Kind]
		if st, err := os.Stat(need); err != nil || st.IsDir() {
			die("contender %s: binary %q not found (flags --kube-scheduler, --ours, --null-binder)", c.Name, need)
		}
		if c.Guests {
			for _, g := range []string{"qos-sort", "priority-label", "random-score"} {
				if _, err := os.Stat(filepath.Join(o.bins.GuestsDir, g+".wasm")); err != nil {
					die("contender %s: %v (scripts/build-guests.sh builds it)", c.Name, err)
				}
			}
		}
	}
	if o.reps < 1 {
		die("--reps must be at least 1")
	}
	if err := os.MkdirAll(filepath.Join(o.out, "runs"), 0o755); err != nil {
		die("%v", err)
	}

	kubeconfig := filepath.Join(o.cpDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		die("kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "bench-live-driver"
	client := kubernetes.NewForConfigOrDie(cfg)
	apiPID, etcdPID, apiPort, err := kit.ControlPlane(o.cpDir)
	if err != nil {
		die("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	writeMeta(o, kubeconfig)
	jsonl, err := os.OpenFile(filepath.Join(o.out, "runs.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		die("%v", err)
	}
	defer jsonl.Close()

	total := len(o.sizes) * len(o.shapes) * o.reps * len(o.contenders)
	var results []result
	run := 0
	failed := 0
	stamp := time.Now().Format("150405")
	began := time.Now()
sizes:
	for _, size := range o.sizes {
		nodes, pods := size[0], size[1]
		t := time.Now()
		if err := ensureNodes(ctx, client, nodes, o.zones, o.nodeWorkers); err != nil {
			fmt.Fprintf(os.Stderr, "driver: %v\n", err)
			failed++
			break
		}
		fmt.Fprintf(os.Stderr, "driver: %d nodes ready in %.1f s\n", nodes, time.Since(t).Seconds())
		for _, shape := range o.shapes {
			for rep := 1; rep <= o.reps; rep++ {
				for _, c := range kit.InTurn(o.contenders, rep) {
					run++
					r := runOne(ctx, client, o, kubeconfig, apiPID, etcdPID, apiPort, run, stamp, nodes, pods, shape, rep, c)
					results = append(results, r)
					line, _ := json.Marshal(r)
					_, _ = jsonl.Write(append(line, '\n'))
					status := "ok"
					if !r.OK {
						status = "FAILED: " + r.Error
						failed++
					}
					elapsed := time.Since(began)
					eta := time.Duration(float64(elapsed) / float64(run) * float64(total-run)).Round(time.Second)
					fmt.Fprintf(os.Stderr, "[%d/%d] %dx%d %-9s rep %d %-11s %5d bound %7.1f pods/s  p50 %7.0f ms  p99 %7.0f ms  cpu %6.2f s  rss %6.1f MiB  api cpu %6.2f s  conns %4d  threads %4d  events %d  %s  (eta %s)\n",
						run, total, nodes, pods, shape, rep, c.Name, r.Bound, r.PodsPerS, r.P50Ms, r.P99Ms, r.SchedCPUS, r.SchedRSSMiB,
						r.APIServerCPUS, r.SchedPeakConns, r.SchedPeakThreads, r.Events, status, eta)
					if ctx.Err() != nil {
						break sizes
					}
				}
			}
		}
	}
	writeResults(o.out, results)
	fmt.Fprintf(os.Stderr, "driver: %d runs in %s, results in %s\n", len(results), time.Since(began).Round(time.Second), o.out)
	if ctx.Err() != nil {
		os.Exit(130)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "driver: %d runs failed\n", failed)
		os.Exit(1)
	}
}

func runOne(ctx context.Context, client kubernetes.Interface, o options, kubeconfig string, apiPID, etcdPID, apiPort, run int,
	stamp string, nodes, pods int, shape string, rep int, c kit.Contender) (r result) {
	ns := fmt.Sprintf("bl-%s-%03d-%s", stamp, run, c.Name)
	r = result{Run: run, Nodes: nodes, Pods: pods, Shape: shape, Contender: c.Name, Rep: rep, Namespace: ns,
		SchedulerName: ns, Started: time.Now().UTC().Format(time.RFC3339)}
	dir := filepath.Join(o.out, "runs", fmt.Sprintf("%03d-%dx%d-%s-%s-%d", run, nodes, pods, shape, c.Name, rep))
	fail := func(format string, a ...interface{}) result {
		r.Error = fmt.Sprintf(format, a...)
		return r
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("%v", err)
	}
	if err := createNamespace(ctx, client, ns); err != nil {
		return fail("namespace: %v", err)
	}
	defer func() {
		// Leave the nodes empty for the next run, even after a failure (not after Ctrl-C: the control plane goes).
		if ctx.Err() == nil {
			if err := emptyNamespace(ctx, client, ns); err != nil && r.Error == "" {
				r.OK = false
				r.Error = "cleanup: " + err.Error()
			}
		}
	}()
	w := watchPods(client, ns, pods)
	defer w.stop()
	limit := o.limit
	if limit == 0 {
		limit = 60*time.Second + time.Duration(pods)*50*time.Millisecond
	}

	var created []time.Time
	var firstCreate time.Time
	if shape == "backlog" {
		var err error
		firstCreate, created, err = createPods(ctx, client, ns, ns, pods, o.createWorkers)
		if err != nil {
			return fail("%v", err)
		}
		r.CreateS = lastOf(created).Sub(firstCreate).Seconds()
		select {
		case <-w.allSeen:
		case <-time.After(time.Minute):
			return fail("the watch saw %d of %d pods a minute after they were created", w.seenCount(), pods)
		case <-ctx.Done():
			return fail("interrupted")
		}
	}
	sleep(ctx, o.settle)

	api0, _ := kit.CPUSeconds(apiPID)
	etcd0, _ := kit.CPUSeconds(etcdPID)
	self0, _ := kit.CPUSeconds(os.Getpid())
	p, err := kit.StartContender(c, o.bins, dir, kubeconfig, ns, o.qps, o.burst)
	if err != nil {
		return fail("%v", err)
	}
	smp := kit.StartSampler(p.PID, apiPort, o.sampleInterval)
	stopped := false
	defer func() {
		if !stopped {
			smp.Finish(p.PID, apiPort)
			p.Stop()
		}
	}()

	var windowStart time.Time
	if shape == "streaming" {
		if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
			return fail("%s: %v; see %s", c.Name, err, filepath.Join(dir, "scheduler.log"))
		}
		r.ReadyS = time.Since(p.Started).Seconds()
		r.WindowFrom = "first pod creation"
		r.LatencyFrom = "create returned"
		var err error
		firstCreate, created, err = createPods(ctx, client, ns, ns, pods, o.createWorkers)
		windowStart = firstCreate
		if err != nil {
			return fail("%v", err)
		}
		r.CreateS = lastOf(created).Sub(firstCreate).Seconds()
	} else {
		windowStart = p.Started
		r.WindowFrom = "scheduler start"
		r.LatencyFrom = "scheduler start"
	}

	timedOut := ""
	select {
	case <-w.allBound:
	case <-p.Exited:
		timedOut = fmt.Sprintf("%s exited (%v) with %d of %d pods bound; see %s", c.Name, p.WaitErr, w.boundCount(), pods,
			filepath.Join(dir, "scheduler.log"))
	case <-time.After(time.Until(windowStart.Add(limit))):
		timedOut = fmt.Sprintf("%d of %d pods bound after %s", w.boundCount(), pods, limit)
	case <-ctx.Done():
		timedOut = "interrupted"
	}

	// Let the scheduler finish what the last bindings started (Scheduled events, responses in flight) so its CPU
	// and the API server's include them: wait until its CPU time stops growing.
	if timedOut == "" {
		r.DrainS = kit.Drain(ctx, p, o.drainMax)
	}
	// Read everything before stopping the scheduler.
	r.SchedPeakConns, r.SchedPeakThreads, r.Samples = smp.Finish(p.PID, apiPort)
	r.SchedCPUS, _ = kit.CPUSeconds(p.PID)
	if st, err := kit.StatusFields(p.PID, "VmHWM"); err == nil {
		r.SchedRSSMiB = float64(st["VmHWM"]) / 1024
	}
	api1, _ := kit.CPUSeconds(apiPID)
	etcd1, _ := kit.CPUSeconds(etcdPID)
	self1, _ := kit.CPUSeconds(os.Getpid())
	r.APIServerCPUS, r.EtcdCPUS, r.DriverCPUS = api1-api0, etcd1-etcd0, self1-self0
	stopped = true
	p.Stop()

	r.Events = scheduledEvents(ctx, client, ns)

	bound, last := w.snapshot()
	r.Bound = len(bound)
	if r.Bound > 0 {
		r.WindowS = last.Sub(windowStart).Seconds()
		if r.WindowS > 0 {
			r.PodsPerS = float64(r.Bound) / r.WindowS
		}
		first := last
		var lat, fromCreated []float64
		for i := 0; i < pods; i++ {
			t, ok := bound[podName(i)]
			if !ok {
				continue
			}
			if t.Before(first) {
				first = t
			}
			from := created[i]
			if shape == "backlog" {
				from = p.Started
			}
			lat = append(lat, ms(t.Sub(from)))
			fromCreated = append(fromCreated, ms(t.Sub(created[i])))
		}
		r.FirstBindS = first.Sub(windowStart).Seconds()
		sort.Float64s(lat)
		sort.Float64s(fromCreated)
		r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs = kit.Quantile(lat, .5), kit.Quantile(lat, .9), kit.Quantile(lat, .99), lat[len(lat)-1]
		r.CreatedP50Ms, r.CreatedP99Ms = kit.Quantile(fromCreated, .5), kit.Quantile(fromCreated, .99)
	}
	if timedOut != "" {
		return fail("%s", timedOut)
	}
	r.OK = true
	return r
}

// scheduledEvents counts the Scheduled events in ns (core/v1 and events.k8s.io/v1 are one resource).
func scheduledEvents(ctx context.Context, c kubernetes.Interface, ns string) int {
	l, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		return -1
	}
	return len(l.Items)
}

// ms is a duration in milliseconds, 0 when negative (the watch can see a bind before the create call's response is
// read).
func ms(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond)
}

func lastOf(ts []time.Time) time.Time {
	var last time.Time
	for _, t := range ts {
		if t.After(last) {
			last = t
		}
	}
	return last
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func writeResults(out string, results []result) {
	b, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "runs.json"), append(b, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "driver: %v\n", err)
	}
	f, err := os.Create(filepath.Join(out, "runs.csv"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver: %v\n", err)
		return
	}
	defer f.Close()
	cw := csv.NewWriter(f)
	t := reflect.TypeOf(result{})
	var header []string
	for i := 0; i < t.NumField(); i++ {
		header = append(header, t.Field(i).Tag.Get("json"))
	}
	_ = cw.Write(header)
	for _, r := range results {
		v := reflect.ValueOf(r)
		var row []string
		for i := 0; i < v.NumField(); i++ {
			row = append(row, fmt.Sprint(v.Field(i).Interface()))
		}
		_ = cw.Write(row)
	}
	cw.Flush()
}

// writeMeta records the machine, the kit.Binaries' versions and the parameters in OUT/meta.json.
func writeMeta(o options, kubeconfig string) {
	version := func(bin string, args ...string) string {
		if bin == "" {
			return ""
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(string(out))
	}
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if st, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.TrimSpace(strings.SplitN(string(st), "\n", 2)[0])
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var sizes []string
	for _, s := range o.sizes {
		sizes = append(sizes, fmt.Sprintf("%dx%d", s[0], s[1]))
	}
	var names []string
	for _, c := range o.contenders {
		names = append(names, c.Name)
	}
	sha := func(path string) string {
		out, err := exec.Command("sha256sum", path).Output()
		if err != nil {
			return ""
		}
		return strings.Fields(string(out))[0]
	}
	meta := map[string]interface{}{
		"started":          time.Now().UTC().Format(time.RFC3339),
		"cpus":             runtime.NumCPU(),
		"cpu_model":        cpu,
		"memory":           mem,
		"kernel":           strings.TrimSpace(string(kernel)),
		"sizes":            sizes,
		"shapes":           o.shapes,
		"contenders":       names,
		"reps":             o.reps,
		"qps":              o.qps,
		"burst":            o.burst,
		"create_workers":   o.createWorkers,
		"zones":            o.zones,
		"sample_interval":  o.sampleInterval.String(),
		"kube_scheduler":   map[string]string{"path": o.bins.KubeScheduler, "version": version(o.bins.KubeScheduler, "--version")},
		"ours":             map[string]string{"path": o.bins.Ours, "version": version(o.bins.Ours, "--version"), "sha256": sha(o.bins.Ours)},
		"null_binder":      o.bins.NullBinder,
		"null_workers":     o.bins.NullWorkers,
		"guests":           o.bins.GuestsDir,
		"control_plane":    o.cpDir,
		"kubeconfig":       kubeconfig,
		"go":               runtime.Version(),
		"pods_per_s":       "bound pods / (last pod seen bound - window start); window start: first pod creation (streaming), scheduler process start (backlog)",
		"latency":          "client-side, watch saw spec.nodeName set minus: create call returned (streaming), scheduler process start (backlog)",
		"apiserver_cpu_s":  "kube-apiserver utime+stime from just before the scheduler starts to just before it is stopped",
		"sched_peak_conns": "peak of the scheduler's established TCP connections to the API server port, sampled every sample_interval (less often while one sample costs more than a thirtieth of it)",
	}
	b, _ := json.MarshalIndent(meta, "", "  ")
	_ = os.WriteFile(filepath.Join(o.out, "meta.json"), append(b, '\n'), 0o644)
}
