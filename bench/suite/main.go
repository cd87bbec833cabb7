// Command suite runs kube-scheduler's own benchmark workloads (test/integration/scheduler_perf in the
// k8s.io/kubernetes module, read in place) against a real API server for each contender in turn — kube-scheduler,
// kube-wasm-scheduler, and optionally ours with the sample guests or the null binder — and reports upstream's
// SchedulingThroughput (average and percentiles of per-second samples over the measured ops) beside the
// scheduler's CPU seconds, peak RSS, the API server's CPU and the measured pods scheduled and left pending.
// It writes results.json, summary.md and a plot per workload family (report.go); --report writes them again from
// earlier runs' results.json, merged, starting nothing.
// bench/suite/run.sh (make bench-suite) starts the control plane and builds it; see docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"kube-wasm-scheduler.local/bench-live/kit"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func fieldsEverything() fields.Selector { return fields.Everything() }

// Result is one run: one workload, one contender, one repetition.
type Result struct {
	Workload string `json:"workload"`
	// Family is the workload's directory below scheduler_perf (affinity, misc, dra...), which the report and the
	// plots group by; Threshold is upstream's SchedulingThroughput floor for it (0: none). Both are absent from
	// results written before they were recorded.
	Family       string          `json:"family,omitempty"`
	Threshold    float64         `json:"threshold,omitempty"`
	Contender    string          `json:"contender"`
	Rep          int             `json:"rep"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	OK           bool            `json:"ok"`
	Error        string          `json:"error,omitempty"`
	// NotApplicable says why this contender cannot run the workload (a feature gate it refuses).
	NotApplicable string `json:"notApplicable,omitempty"`
	// Placement counts the bound pods per node and namespace when at most 8 nodes hold pods.
	Placement    string        `json:"placement,omitempty"`
	Measurements []Measurement `json:"measurements"`
	// Every pod the run made, at the end of its ops (before the cleanup): how many, bound, not bound.
	Pods      int `json:"pods"`
	Scheduled int `json:"scheduled"`
	Pending   int `json:"pending"`
	// Over the whole run, from the scheduler's start to its stop.
	Seconds     float64 `json:"seconds"`
	SchedCPUS   float64 `json:"schedCPUSeconds"`
	SchedRSSMiB float64 `json:"schedPeakRSSMiB"`
	APICPUS     float64 `json:"apiServerCPUSeconds"`
}

// Unsupported is a selected workload the suite does not run, and why.
type Unsupported struct {
	Workload string `json:"workload"`
	File     string `json:"file"`
	Reason   string `json:"reason"`
}

type options struct {
	cpDir, out, perfDir, suite, filter string
	skip                               string
	contenders                         []kit.Contender
	reps, workers                      int
	bins                               kit.Binaries
	timeout                            time.Duration
	list, apiFlags                     bool
	record, expect                     string
	report                             string
}

// usage prints a one-line error and exits 2 (bad input).
func usage(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "suite: "+format+"\n", a...)
	os.Exit(2)
}

func main() {
	var o options
	var contenders string
	flag.StringVar(&o.cpDir, "control-plane", "", "scripts/control-plane.sh's directory (kubeconfig, pids, ports)")
	flag.StringVar(&o.out, "out", "", "output directory (results.json, summary.md, runs/)")
	flag.StringVar(&o.perfDir, "perf-dir", "", "test/integration/scheduler_perf of the k8s.io/kubernetes module")
	flag.StringVar(&o.suite, "suite", "short", "short (performance+short), all (performance) or integration (integration-test+short)")
	flag.StringVar(&o.filter, "filter", "", "regexp on TestCase/Workload")
	flag.StringVar(&o.skip, "skip", "", "regexp on TestCase/Workload: selected workloads not to run (listed as skipped)")
	flag.StringVar(&contenders, "contenders", "kube ours", "contenders in the order they take turns: kube ours ours-guests null")
	flag.IntVar(&o.reps, "reps", 1, "repetitions (contenders take turns within each workload, reversed every other one)")
	flag.IntVar(&o.workers, "workers", 16, "concurrent create calls")
	flag.StringVar(&o.bins.KubeScheduler, "kube-scheduler", "", "kube-scheduler binary")
	flag.StringVar(&o.bins.Ours, "ours", "", "kube-wasm-scheduler binary")
	flag.StringVar(&o.bins.NullBinder, "null-binder", "", "null binder binary")
	flag.StringVar(&o.bins.GuestsDir, "guests", "", "directory of the sample guests (ours-guests)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long a createPods or barrier waits for its pods")
	flag.StringVar(&o.record, "record", "", "write kube-scheduler's (the first contender's) scheduled/pending counts per workload to this JSON file")
	flag.StringVar(&o.expect, "expect", "", "compare every run's scheduled/pending counts with this JSON file (written by --record); exit 3 on a difference")
	flag.BoolVar(&o.apiFlags, "apiserver-flags", false, "print the kube-apiserver flags the selected workloads need (feature gates, API versions) and exit")
	flag.BoolVar(&o.list, "list", false, "list the selected workloads and what is not supported, run nothing")
	flag.StringVar(&o.report, "report", "", "DIR[,DIR...]: merge these runs' results.json into summary.md, results.json and plot-<family>.svg in --out, run nothing (--perf-dir, if given, fills in the family and threshold of older results)")
	flag.Parse()
	o.bins.NullWorkers = 90
	if o.report != "" {
		if o.out == "" {
			usage("--report needs --out")
		}
		if err := report(strings.Split(o.report, ","), o.out, o.perfDir); err != nil {
			fmt.Fprintf(os.Stderr, "suite: %v\n", err)
			os.Exit(1)
		}
		return
	}

	want, err := suiteLabels(o.suite)
	if err != nil {
		usage("%v", err)
	}
	var filter *regexp.Regexp
	if o.filter != "" {
		if filter, err = regexp.Compile(o.filter); err != nil {
			usage("--filter %q: %v", o.filter, err)
		}
	}
	for _, name := range strings.Fields(contenders) {
		c, ok := kit.Contenders[name]
		if !ok || c.JSON {
			usage("--contenders: %q: want kube, ours, ours-guests or null", name)
		}
		o.contenders = append(o.contenders, c)
	}
	if o.perfDir == "" {
		usage("--perf-dir is required")
	}
	files, err := configFiles(o.perfDir)
	if err != nil {
		usage("--perf-dir: %v", err)
	}
	if len(files) == 0 {
		usage("--perf-dir %s: no performance-config.yaml below it", o.perfDir)
	}
	var sel []Selected
	for _, f := range files {
		tcs, err := loadFile(f)
		if err != nil {
			usage("%v", err)
		}
		sel = append(sel, inFamily(selectWorkloads(tcs, want, filter), familyOf(o.perfDir, f))...)
	}
	var skip *regexp.Regexp
	if o.skip != "" {
		if skip, err = regexp.Compile(o.skip); err != nil {
			usage("--skip %q: %v", o.skip, err)
		}
	}
	var runnable []Selected
	var unsupported []Unsupported
	for _, s := range sel {
		if s.Unsupported == "" && skip != nil && skip.MatchString(s.Name()) {
			s.Unsupported = "skipped (--skip)"
		}
		if s.Unsupported != "" {
			rel, _ := filepath.Rel(o.perfDir, s.File)
			unsupported = append(unsupported, Unsupported{Workload: s.Name(), File: rel, Reason: s.Unsupported})
		} else {
			runnable = append(runnable, s)
		}
	}
	fmt.Fprintf(os.Stderr, "suite: %d workloads selected (SUITE=%s, FILTER=%q): %d to run, %d not supported\n", len(sel), o.suite, o.filter, len(runnable), len(unsupported))
	for _, u := range unsupported {
		fmt.Fprintf(os.Stderr, "suite: not run: %s (%s): %s\n", u.Workload, u.File, u.Reason)
	}
	if o.apiFlags {
		fmt.Println(strings.Join(apiServerFlags(runnable), " "))
		return
	}
	if o.list {
		for _, s := range runnable {
			fmt.Println(s.Name())
		}
		return
	}
	if o.cpDir == "" || o.out == "" {
		usage("--control-plane and --out are required")
	}
	_, _, apiPort, err := kit.ControlPlane(o.cpDir)
	if err != nil {
		usage("--control-plane: %v", err)
	}
	apiPID, _, _, _ := kit.ControlPlane(o.cpDir)
	kubeconfig := filepath.Join(o.cpDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		usage("%s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var expect *Expectations
	if o.expect != "" {
		if expect, err = loadExpectations(o.expect); err != nil {
			usage("%v", err)
		}
	}
	var results []Result
	run := 0
	for _, s := range runnable {
		for rep := 1; rep <= o.reps; rep++ {
			for _, c := range kit.InTurn(o.contenders, rep) {
				run++
				r := runOne(ctx, client, dyn, o, kubeconfig, apiPID, apiPort, run, s, c, rep)
				results = append(results, r)
				fmt.Fprintf(os.Stderr, "suite: %s %s rep %d: %s\n", s.Name(), c.Name, rep, brief(r))
				write(o.out, results, unsupported)
				if ctx.Err() != nil {
					os.Exit(130)
				}
			}
		}
	}
	write(o.out, results, unsupported)
	if o.record != "" {
		// The module directory (k8s.io/kubernetes@vX.Y.Z) names the version the workloads came from.
		module := filepath.Dir(filepath.Dir(filepath.Dir(o.perfDir)))
		rel, _ := filepath.Rel(module, o.perfDir)
		if err := record(o.record, o.contenders[0].Name, filepath.Base(module)+"/"+rel, results); err != nil {
			fmt.Fprintf(os.Stderr, "suite: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "suite: recorded %s's outcomes in %s\n", o.contenders[0].Name, o.record)
	}
	if expect != nil {
		bad := expect.check(results)
		for _, b := range bad {
			fmt.Fprintf(os.Stderr, "suite: unexpected: %s\n", b)
		}
		if len(bad) > 0 {
			os.Exit(3)
		}
		fmt.Fprintf(os.Stderr, "suite: all %d runs ended as recorded (%s)\n", len(results), expect.RecordedFrom)
		return
	}
	for _, r := range results {
		if !r.OK && r.NotApplicable == "" {
			os.Exit(1)
		}
	}
}

func brief(r Result) string {
	where := ""
	if r.Placement != "" {
		where = " [placed: " + r.Placement + "]"
	}
	switch {
	case r.NotApplicable != "":
		return "not applicable: " + r.NotApplicable
	case !r.OK:
		return "error: " + r.Error + where
	}
	var parts []string
	for _, m := range r.Measurements {
		parts = append(parts, fmt.Sprintf("%d/%d scheduled, %.1f pods/s", m.Scheduled, m.Pods, m.Throughput.Average))
	}
	return strings.Join(parts, "; ") + where
}

func runOne(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, o options, kubeconfig string, apiPID, apiPort, run int, s Selected, c kit.Contender, rep int) (r Result) {
	r = Result{Workload: s.Name(), Family: s.Family, Threshold: s.Threshold, Contender: c.Name, Rep: rep, FeatureGates: s.FeatureGates}
	dir := filepath.Join(o.out, "runs", fmt.Sprintf("%03d-%s-%s-%d", run, strings.ReplaceAll(s.Name(), "/", "_"), c.Name, rep))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	if len(s.FeatureGates) > 0 && c.Kind != "null" {
		var gates []string
		for k, v := range s.FeatureGates {
			gates = append(gates, fmt.Sprintf("%s=%t", k, v))
		}
		sort.Strings(gates)
		c.Args = []string{"--feature-gates=" + strings.Join(gates, ",")}
	}
	stop := make(chan struct{})
	defer close(stop)
	cl := watchCluster(client, stop)
	// The claim controller stops before the cleanup: claims it made after the cleanup deleted the claims would
	// outlive the run.
	var claims *claimController
	claimsStop := make(chan struct{})
	for _, op := range s.Ops {
		if op.ClaimTemplate {
			claims = startClaimController(client, dyn, s.FeatureGates["DRAWorkloadResourceClaims"] && s.FeatureGates["GenericWorkload"], claimsStop, 4)
			break
		}
	}
	name := fmt.Sprintf("suite-%03d", run)
	rn := &runner{client: client, dynamic: dyn, cl: cl, schedulerName: name, timeout: o.timeout, workers: o.workers,
		createdNS: map[string]bool{}, createdPods: map[string]int{}, createdPC: map[string]bool{}, gates: s.FeatureGates}
	defer func() {
		close(claimsStop)
		if claims != nil {
			claims.wg.Wait()
		}
		r.Placement = cl.placement(8)
		if err := rn.cleanup(context.Background()); err != nil {
			r.OK = false
			r.Error = strings.TrimPrefix(r.Error+"; ", "; ") + err.Error()
		}
	}()
	api0, _ := kit.CPUSeconds(apiPID)
	p, err := startContender(c, o.bins, dir, kubeconfig, name, s.SchedulerConfig)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
		p.Stop()
		if c.Kind == "ours" && s.SchedulerConfig != "" {
			// ours refuses a plugin or argument of the test case's profile (or a gate)
			r.NotApplicable = fmt.Sprintf("schedulerConfigPath %s %s (%s): %s", filepath.Base(s.SchedulerConfig), strings.Join(c.Args, " "), err, lastLine(filepath.Join(dir, "scheduler.log")))
		} else if c.Kind == "ours" && len(c.Args) > 0 {
			r.NotApplicable = fmt.Sprintf("%s (%s): %s", strings.Join(c.Args, " "), err, lastLine(filepath.Join(dir, "scheduler.log")))
		} else {
			r.Error = fmt.Sprintf("%v; see %s", err, filepath.Join(dir, "scheduler.log"))
		}
		return r
	}
	err = rn.run(ctx, s.Ops)
	r.Measurements = rn.measurements
	var nss []string
	for ns := range rn.createdNS {
		nss = append(nss, ns)
	}
	if len(nss) > 0 {
		r.Pods, r.Scheduled, _ = cl.count(nss, nil)
		r.Pending = r.Pods - r.Scheduled
	}
	r.Seconds = time.Since(p.Started).Seconds()
	r.SchedCPUS, _ = kit.CPUSeconds(p.PID)
	if st, e := kit.StatusFields(p.PID, "VmHWM"); e == nil {
		r.SchedRSSMiB = float64(st["VmHWM"]) / 1024
	}
	api1, _ := kit.CPUSeconds(apiPID)
	r.APICPUS = api1 - api0
	if p.Stop() {
		err = fmt.Errorf("%s exited during the run (%v); see %s", c.Name, p.WaitErr, filepath.Join(dir, "scheduler.log"))
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.OK = true
	return r
}

// lastLine is the last non-empty line of a file (a scheduler's reason for exiting).
func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
