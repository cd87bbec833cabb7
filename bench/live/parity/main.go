// Command parity places the same probe pods with kube-scheduler and with kube-wasm-scheduler, live on one API
// server, and with kube-wasm-scheduler's simulator offline, and reports where their decisions differ.
//
// Per seed: a random cluster (nodes with zones, labels, taints, images; services; a background of pods bound by
// spec.nodeName) is written to the API server, both schedulers are started on it (default profile, each under its
// own schedulerName), and each probe is placed by each scheduler twice, one pod at a time (created, seen bound or
// unschedulable, deleted with grace 0, seen gone), so no probe sees another. Scores can tie, and both schedulers
// break ties at random: a scheduler whose runs differ has a tie for that probe, which is reported apart and left
// out of the comparison. When both are consistent but disagree, each is run a few more times before the probe
// counts as a divergence, so a tie that happened to fall the same way twice is not taken for one; when only one
// scheduler's runs differ, the steady one is run more, and a tie on one side only is a divergence. The simulator
// gets the same cluster and probe as a file, with two tie-breaking seeds (more on a disagreement).
//
// Exit status: 0 when every comparable probe is alike, 1 on any divergence, 2 on bad flags or a failed run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	kubeName = "parity-kube-scheduler"
	oursName = "parity-kube-wasm-scheduler"
	simName  = "parity-simulator"
)

type options struct {
	kubeconfig, kubeScheduler, ours, out string
	kubeFlags, oursFlags                 string
	seeds                                []int64
	probes, nodes, background, confirm   int
	confirmTies                          int
	timeout, settle                      time.Duration
	sim                                  bool
	scenarios                            string
}

// parseSeeds reads "5" (seeds 1..5), "3-7" or "1,4,9"; "0" is none (scenarios only).
func parseSeeds(s string) ([]int64, error) {
	var out []int64
	if n, err := strconv.Atoi(s); err == nil && !strings.ContainsAny(s, ",-") {
		if n < 0 {
			return nil, fmt.Errorf("--seeds %q: want 0 or more", s)
		}
		for i := 1; i <= n; i++ {
			out = append(out, int64(i))
		}
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %q is not a seed", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds %q: %q is not a range", s, part)
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

func parseFlags() (options, error) {
	var o options
	var seeds string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (required)")
	flag.StringVar(&o.kubeScheduler, "kube-scheduler", "", "kube-scheduler binary (required)")
	flag.StringVar(&o.ours, "ours", "", "kube-wasm-scheduler binary (required)")
	flag.StringVar(&o.out, "out", "", "directory for configs, logs, cluster files and results.json (required)")
	flag.StringVar(&seeds, "seeds", "5", `seeds: a count N (1..N, 0 for none), a range "3-7" or a list "1,4,9"`)
	flag.StringVar(&o.scenarios, "scenarios", "", "directory of scenario files (*.yaml, see scenarios.go), run before the seeds")
	flag.IntVar(&o.probes, "probes", 80, "probe pods per seed")
	flag.IntVar(&o.nodes, "nodes", 40, "nodes per seed (below 100 both schedulers score every feasible node; from 100 on they sample, and the simulator comparison is off)")
	flag.IntVar(&o.background, "background", 0, "background pods per seed (default 3 per node)")
	flag.IntVar(&o.confirm, "confirm", 4, "extra runs per scheduler before a disagreement counts as a divergence")
	flag.IntVar(&o.confirmTies, "confirm-ties", 8, "when only one side's runs differ, both run up to 2+N times before the probe counts as a divergence (a tie on one side only) or a stray run")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long one placement may take")
	flag.DurationVar(&o.settle, "settle", 200*time.Millisecond, "pause before each kube-scheduler placement, for the previous placement's deletion to reach its cache")
	flag.StringVar(&o.kubeFlags, "kube-scheduler-flags", "", `extra flags for kube-scheduler, space-separated (e.g. "-v=10" logs every plugin's score)`)
	flag.StringVar(&o.oursFlags, "ours-flags", "", "extra flags for kube-wasm-scheduler, space-separated")
	flag.BoolVar(&o.sim, "sim", true, "also compare the simulator's decision with kube-scheduler's")
	// Bad flags are one line, not the usage; -h prints the usage.
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	if err := flag.CommandLine.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			flag.CommandLine.SetOutput(os.Stdout)
			flag.Usage()
			os.Exit(0)
		}
		return o, err
	}
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	for name, v := range map[string]string{"kubeconfig": o.kubeconfig, "kube-scheduler": o.kubeScheduler, "ours": o.ours, "out": o.out} {
		if v == "" {
			return o, fmt.Errorf("--%s is required", name)
		}
	}
	var err error
	if o.seeds, err = parseSeeds(seeds); err != nil {
		return o, err
	}
	if len(o.seeds) == 0 && o.scenarios == "" {
		return o, fmt.Errorf("--seeds 0 and no --scenarios: nothing to compare")
	}
	if o.probes < 1 || o.nodes < 1 || o.nodes > 5000 {
		return o, fmt.Errorf("--probes must be at least 1 and --nodes between 1 and 5000 (got %d, %d)", o.probes, o.nodes)
	}
	if o.nodes >= 100 && o.sim {
		// From 100 nodes on, both schedulers stop after enough feasible nodes, starting where the previous cycle
		// stopped (percentageOfNodesToScore); the simulator starts afresh on every file, so it cannot agree.
		fmt.Fprintf(os.Stderr, "parity: warning: %d nodes: the simulator comparison is off (node sampling starts where the live scheduler's previous cycle stopped)\n", o.nodes)
		o.sim = false
	}
	if o.background == 0 {
		o.background = 3 * o.nodes
	}
	return o, nil
}

// verdict of one probe for one comparison.
const (
	alike     = "alike"
	divergent = "divergent"
	tie       = "tie"
	stray     = "stray"
)

type probeResult struct {
	Seed    int64    `json:"seed"`
	Probe   int      `json:"probe"`
	Summary string   `json:"summary"`
	Kube    []string `json:"kubeScheduler"`
	Ours    []string `json:"ours"`
	Sim     []string `json:"simulator,omitempty"`
	Live    string   `json:"live"`            // alike, divergent, tie, stray
	TieBy   string   `json:"tieBy,omitempty"` // both (a tie on one side only is a divergence)
	SimVs   string   `json:"simVsLive,omitempty"`
	Message string   `json:"kubeSchedulerMessage,omitempty"`
	OursMsg string   `json:"oursMessage,omitempty"`
	SimMsg  string   `json:"simulatorMessage,omitempty"`
	// Messages: for a probe every scheduler found unschedulable, whether the PodScheduled=False messages
	// ("0/40 nodes are available: ...") are the same, live and in the simulator.
	Messages string `json:"messages,omitempty"`
	File     string `json:"clusterFile,omitempty"`
	Note     string `json:"note,omitempty"`
	SimNote  string `json:"simulatorNote,omitempty"`
}

func names(os []outcome) []string {
	var s []string
	for _, o := range os {
		s = append(s, o.String())
	}
	return s
}

func consistent(os []outcome) bool {
	for _, o := range os[1:] {
		if o.node != os[0].node {
			return false
		}
	}
	return true
}

type tally struct {
	compared, alike, ties int
	divergences, strays   []probeResult
}

func (t *tally) line(what string) string {
	pct := 100.0
	if t.compared > 0 {
		pct = 100 * float64(t.alike) / float64(t.compared)
	}
	return fmt.Sprintf("%s: %d/%d comparable probes alike (%.1f%%), %d divergent; excluded: %d ties, %d stray runs",
		what, t.alike, t.compared, pct, len(t.divergences), t.ties, len(t.strays))
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintf(os.Stderr, "parity: error: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "parity: error: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(ctx context.Context, o options) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return 0, err
	}
	fmt.Printf("parity: kube-scheduler %s vs kube-wasm-scheduler %s, seeds %v, %d probes, %d nodes, %d background pods per seed\n",
		o.kubeScheduler, o.ours, o.seeds, o.probes, o.nodes, o.background)
	fmt.Println("parity: ties: since v1.36 kube-scheduler draws no random tie-breaker unless an extender scored the node (the node" +
		" its heap keeps on top wins, as ours), but its Filter collects feasible nodes in parallel, so their order, and with it" +
		" a tie, can still vary; a probe whose runs differ for both is a tie and is excluded.")
	fmt.Println("parity: and in timing: kube-scheduler handles deleted (assigned) and new (pending) pods in separate event handlers," +
		" so under load it can schedule a probe before the previous placement's deletion has reached its cache (a pause before" +
		" each of its placements makes that rare); up to two such stray runs of a probe are reported apart and excluded.")
	var all []probeResult
	var live, sim, msgs tally
	var scenarios []scenarioResult
	if o.scenarios != "" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return 0, err
		}
		if scenarios, err = runAllScenarios(ctx, newScenarioEnv(client, dyn, o.timeout), o); err != nil {
			return 0, err
		}
		for _, r := range scenarios {
			count(&live, r.Live, probeResult{Summary: "scenario " + r.Scenario + " pod " + r.Pod, Kube: r.Kube, Ours: r.Ours, Sim: r.Sim, Note: r.Note, Message: r.Message, OursMsg: r.OursMsg, SimMsg: r.SimMsg, File: r.File, Probe: -1})
			if o.sim {
				count(&sim, r.SimVs, probeResult{Summary: "scenario " + r.Scenario + " pod " + r.Pod, Kube: r.Kube, Ours: r.Ours, Sim: r.Sim, SimNote: r.Note, File: r.File, Probe: -1})
				count(&msgs, r.Messages, probeResult{Summary: "scenario " + r.Scenario + " pod " + r.Pod, Message: r.Message, OursMsg: r.OursMsg, SimMsg: r.SimMsg, Probe: -1})
			}
			fmt.Printf("parity: scenario %-40s %-22s live %-9s kube-scheduler %v, kube-wasm-scheduler %v, simulator %v\n",
				r.Scenario, r.Pod, r.Live, r.Kube, r.Ours, r.Sim)
		}
		b, _ := json.MarshalIndent(scenarios, "", "  ")
		if err := os.WriteFile(filepath.Join(o.out, "scenarios.json"), b, 0o644); err != nil {
			return 0, err
		}
	}
	for _, seed := range o.seeds {
		res, err := runSeed(ctx, client, o, seed)
		if err != nil {
			return 0, fmt.Errorf("seed %d: %w", seed, err)
		}
		var sl, ss tally
		for _, r := range res {
			count(&sl, r.Live, r)
			count(&live, r.Live, r)
			if o.sim {
				count(&ss, r.SimVs, r)
				count(&sim, r.SimVs, r)
				count(&msgs, r.Messages, r)
			}
		}
		fmt.Printf("parity: seed %d: %s\n", seed, sl.line("live, kube-wasm-scheduler vs kube-scheduler"))
		if o.sim {
			fmt.Printf("parity: seed %d: %s\n", seed, ss.line("simulator vs kube-scheduler live"))
		}
		all = append(all, res...)
	}
	b, _ := json.MarshalIndent(all, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "results.json"), b, 0o644); err != nil {
		return 0, err
	}
	fmt.Println()
	for _, r := range all {
		if r.Live == tie {
			fmt.Printf("tie       seed %d probe %d: kube-scheduler %v, kube-wasm-scheduler %v\n", r.Seed, r.Probe, r.Kube, r.Ours)
		}
	}
	for _, r := range append(append([]probeResult{}, live.strays...), sim.strays...) {
		note := r.Note
		if r.Live != stray {
			note = r.SimNote
		}
		if r.Probe < 0 {
			fmt.Printf("stray     %s: %s\n", r.Summary, note)
			continue
		}
		fmt.Printf("stray     seed %d probe %d: %s\n", r.Seed, r.Probe, note)
	}
	for _, d := range live.divergences {
		if d.Probe < 0 {
			fmt.Printf("DIVERGENT %s live: kube-scheduler %v, kube-wasm-scheduler %v\n  file: %s\n", d.Summary, d.Kube, d.Ours, d.File)
			if d.Message != "" || d.OursMsg != "" {
				fmt.Printf("  kube-scheduler: %s\n  kube-wasm-scheduler: %s\n", d.Message, d.OursMsg)
			}
			continue
		}
		fmt.Printf("DIVERGENT seed %d probe %d live: kube-scheduler %v, kube-wasm-scheduler %v\n  probe: %s\n  replay: kube-wasm-scheduler simulate --config %s --cluster %s --explain %s\n",
			d.Seed, d.Probe, d.Kube, d.Ours, d.Summary, filepath.Join(o.out, "sim-profile.yaml"), d.File, simPodRef(d))
		if d.Note != "" {
			fmt.Printf("  %s\n", d.Note)
		}
		if d.Message != "" {
			fmt.Printf("  kube-scheduler: %s\n", d.Message)
		}
	}
	for _, d := range msgs.divergences {
		if d.Probe < 0 {
			fmt.Printf("MESSAGE   %s (unschedulable everywhere):\n  kube-scheduler:      %s\n  kube-wasm-scheduler: %s\n  simulator:           %s\n",
				d.Summary, d.Message, d.OursMsg, d.SimMsg)
			continue
		}
		fmt.Printf("MESSAGE   seed %d probe %d (unschedulable everywhere):\n  kube-scheduler:      %s\n  kube-wasm-scheduler: %s\n  simulator:           %s\n",
			d.Seed, d.Probe, d.Message, d.OursMsg, d.SimMsg)
	}
	for _, d := range sim.divergences {
		if d.Probe < 0 {
			fmt.Printf("DIVERGENT %s simulator: kube-scheduler %v, simulator %v\n  file: %s\n", d.Summary, d.Kube, d.Sim, d.File)
			continue
		}
		fmt.Printf("DIVERGENT seed %d probe %d simulator: kube-scheduler %v, simulator %v\n  probe: %s\n  replay: kube-wasm-scheduler simulate --config %s --cluster %s --explain %s\n",
			d.Seed, d.Probe, d.Kube, d.Sim, d.Summary, filepath.Join(o.out, "sim-profile.yaml"), d.File, simPodRef(d))
		if d.SimNote != "" {
			fmt.Printf("  %s\n", d.SimNote)
		}
	}
	fmt.Printf("\nparity: %d seeds x %d probes, %d scenario pods\n", len(o.seeds), o.probes, len(scenarios))
	fmt.Printf("parity: %s\n", live.line("live, kube-wasm-scheduler vs kube-scheduler"))
	if o.sim {
		fmt.Printf("parity: %s\n", sim.line("simulator vs kube-scheduler live"))
	}
	if o.sim {
		fmt.Printf("parity: unschedulable probes, PodScheduled=False messages the same as kube-scheduler's (ours live and the simulator): %d/%d\n",
			msgs.alike, msgs.compared)
	}
	fmt.Printf("parity: results in %s\n", filepath.Join(o.out, "results.json"))
	if len(live.divergences)+len(sim.divergences) > 0 {
		return 1, nil
	}
	return 0, nil
}

func simPodRef(r probeResult) string { return fmt.Sprintf("parity-%d/probe-%03d-sim", r.Seed, r.Probe) }

func count(t *tally, verdict string, r probeResult) {
	switch verdict {
	case alike:
		t.compared++
		t.alike++
	case divergent:
		t.compared++
		t.divergences = append(t.divergences, r)
	case tie:
		t.ties++
	case stray:
		t.strays = append(t.strays, r)
	}
}

// runSeed generates the seed's cluster, writes it, runs both schedulers on it and places every probe.
func runSeed(ctx context.Context, client kubernetes.Interface, o options, seed int64) ([]probeResult, error) {
	start := time.Now()
	cl, g := generateCluster(seed, o.nodes, o.background)
	probes := make([]probe, o.probes)
	for i := range probes {
		probes[i] = g.generateProbe(i)
	}
	dir := filepath.Join(o.out, fmt.Sprintf("seed-%d", seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := clearCluster(ctx, client); err != nil {
		return nil, err
	}
	if err := createCluster(ctx, client, cl); err != nil {
		return nil, err
	}
	base, err := clusterFile(cl)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), base, 0o644); err != nil {
		return nil, err
	}
	simProfile := filepath.Join(o.out, "sim-profile.yaml")
	if err := schedulerConfig(simProfile, "", simName); err != nil {
		return nil, err
	}
	w, err := watchPods(client, cl.namespace)
	if err != nil {
		return nil, err
	}
	defer close(w.stop)

	// Started after the cluster is in place: each lists it whole, in the API server's order, as its first view.
	stop, err := startBoth(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	fmt.Printf("parity: seed %d: %d nodes, %d background pods, %d probes (schedulers ready in %s)\n",
		seed, len(cl.nodes), len(cl.background), len(probes), time.Since(start).Round(time.Millisecond))

	var results []probeResult
	for _, pr := range probes {
		r, err := compareProbe(ctx, client, w, o, cl, base, dir, simProfile, pr)
		if err != nil {
			return nil, fmt.Errorf("probe %d (%s): %w", pr.index, pr.summary, err)
		}
		results = append(results, r)
		if r.Live == divergent || r.SimVs == divergent {
			fmt.Printf("parity: seed %d probe %d: live %s, simulator %s: kube-scheduler %v, kube-wasm-scheduler %v, simulator %v\n",
				seed, pr.index, r.Live, r.SimVs, r.Kube, r.Ours, r.Sim)
		}
	}
	fmt.Printf("parity: seed %d done in %s\n", seed, time.Since(start).Round(time.Second))
	return results, nil
}

// compareProbe places one probe with both schedulers (twice each, more on a disagreement) and the simulator.
func compareProbe(ctx context.Context, client kubernetes.Interface, w *podWatch, o options, cl *cluster, base []byte, dir, simProfile string, pr probe) (probeResult, error) {
	r := probeResult{Seed: cl.seed, Probe: pr.index, Summary: pr.summary}
	var kube, ours, sim []outcome
	// run places the probe once more with one scheduler ("kube" or "ours") and records where it went.
	run := func(who string) error {
		list, sched := &kube, kubeName
		if who == "ours" {
			list, sched = &ours, oursName
		} else {
			// kube-scheduler takes deleted (assigned) and new (pending) pods through separate event handlers: the
			// pause lets the previous placement's deletion reach its cache before the next probe arrives.
			time.Sleep(o.settle)
		}
		out, err := place(ctx, client, w, pr, fmt.Sprintf("probe-%03d-%s-%d", pr.index, who, len(*list)+1), sched, o.timeout)
		if err != nil {
			return err
		}
		*list = append(*list, out)
		return nil
	}
	// upTo runs who until it has n runs.
	upTo := func(who string, n int) error {
		list := &kube
		if who == "ours" {
			list = &ours
		}
		for len(*list) < n {
			if err := run(who); err != nil {
				return err
			}
		}
		return nil
	}
	simulateOnce := func() error {
		out, err := simulate(o.ours, simProfile, r.File, simPodRef(r), len(sim)+1)
		if err == nil {
			sim = append(sim, out)
		}
		return err
	}
	many := 2 + o.confirmTies
	for i := 0; i < 2; i++ {
		if err := run("kube"); err != nil {
			return r, err
		}
		if err := run("ours"); err != nil {
			return r, err
		}
	}
	if consistent(kube) && consistent(ours) && kube[0].node != ours[0].node {
		// Both steady, yet apart: a tie that fell the same way twice for each, or a real divergence.
		for i := 0; i < o.confirm && consistent(kube) && consistent(ours); i++ {
			if err := run("kube"); err != nil {
				return r, err
			}
			if err := run("ours"); err != nil {
				return r, err
			}
		}
	}
	// Only one side's runs differ: both run more, to tell a tie on one side only (a divergence) from a tie that
	// fell the same way each time, or from one stray run.
	oneSided := func() error {
		if consistent(kube) == consistent(ours) {
			return nil
		}
		if err := upTo("kube", many); err != nil {
			return err
		}
		return upTo("ours", many)
	}
	if err := oneSided(); err != nil {
		return r, err
	}
	if o.sim {
		r.File = filepath.Join(dir, fmt.Sprintf("probe-%03d.yaml", pr.index))
		if err := writeProbeFile(r.File, base, pr, fmt.Sprintf("probe-%03d-sim", pr.index), simName); err != nil {
			return r, err
		}
		for len(sim) < 2 || (len(sim) < 2+o.confirm && consistent(sim) && consistent(kube) && sim[0].node != kube[0].node) {
			if err := simulateOnce(); err != nil {
				return r, err
			}
		}
		if consistent(kube) != consistent(sim) {
			for len(sim) < many {
				if err := simulateOnce(); err != nil {
					return r, err
				}
			}
			if err := upTo("kube", many); err != nil {
				return r, err
			}
			// kube-scheduler may have shown a tie only now: give ours the same number of runs.
			if err := oneSided(); err != nil {
				return r, err
			}
		}
	}
	r.Kube, r.Ours, r.Message, r.OursMsg = names(kube), names(ours), kube[0].message, ours[0].message
	r.Live, r.TieBy, r.Note = classify(kube, ours, "kube-scheduler", "kube-wasm-scheduler")
	if !o.sim {
		return r, nil
	}
	r.Sim, r.SimMsg = names(sim), sim[0].message
	r.SimVs, _, r.SimNote = classify(kube, sim, "kube-scheduler", "the simulator")
	if r.Live == alike && r.SimVs == alike && kube[0].node == "" {
		r.Messages = alike
		if r.OursMsg != r.Message || r.SimMsg != r.Message {
			r.Messages = divergent
		}
	}
	return r, nil
}

// classify compares two series of placements of one probe. Both steady: alike or divergent. Both varying: a tie.
// One varying while the other stays steady: a tie on one side only (divergent) when its minority answers came up
// three times or more; up to two stray runs (the rest agreeing with the steady side) are reported apart:
// kube-scheduler handles deleted and new pods in separate event handlers, so under load a probe can be scheduled
// before the previous placement's deletion has reached its cache (two in a row were seen once).
func classify(a, b []outcome, aName, bName string) (verdict, tieBy, note string) {
	switch {
	case consistent(a) && consistent(b):
		if a[0].node == b[0].node {
			return alike, "", ""
		}
		return divergent, "", ""
	case !consistent(a) && !consistent(b):
		return tie, "both", ""
	}
	v, s, vName, sName := a, b, aName, bName
	if consistent(a) {
		v, s, vName, sName = b, a, bName, aName
	}
	counts := map[string]int{}
	mode := ""
	for _, x := range v {
		counts[x.node]++
		if counts[x.node] > counts[mode] || (counts[x.node] == counts[mode] && x.node < mode) {
			mode = x.node
		}
	}
	if minority := len(v) - counts[mode]; minority >= 3 || mode != s[0].node {
		return divergent, "", fmt.Sprintf("a tie on one side only: %s placed it on %s in all %d runs, %s on %v",
			sName, s[0], len(s), vName, names(v))
	}
	return stray, "", fmt.Sprintf("%d of %d runs of %s went elsewhere (%v); the rest and %s agree", len(v)-counts[mode], len(v), vName, names(v), sName)
}
