package main

// The report of a run: results.json, summary.md (every run, then the contenders side by side per workload against
// the project's targets and upstream's thresholds) and one SVG bar chart per workload family. A run rewrites it
// after every workload; --report writes it from the results.json of earlier runs, merged, starting nothing.

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// resultsFile is results.json: every run, and the selected workloads that were not run and why.
type resultsFile struct {
	Results []Result      `json:"results"`
	NotRun  []Unsupported `json:"notRun"`
}

// write stores results.json, summary.md and the plots in out. A run calls it after every workload, so a failure is
// only reported: the next call may succeed, and the run goes on.
func write(out string, results []Result, unsupported []Unsupported) {
	if err := writeAll(out, results, unsupported); err != nil {
		fmt.Fprintf(os.Stderr, "suite: %v\n", err)
	}
}

// writeAll stores results.json, summary.md and plot-<family>.svg in out, writing every file it can and returning
// what failed.
func writeAll(out string, results []Result, unsupported []Unsupported) error {
	b, err := json.MarshalIndent(resultsFile{Results: results, NotRun: unsupported}, "", "  ")
	if err != nil {
		return err
	}
	errs := []error{
		os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644),
		os.WriteFile(filepath.Join(out, "summary.md"), []byte(markdown(results, unsupported)), 0o644),
	}
	svgs := plots(results)
	names := make([]string, 0, len(svgs))
	for name := range svgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		errs = append(errs, os.WriteFile(filepath.Join(out, name), []byte(svgs[name]), 0o644))
	}
	return errors.Join(errs...)
}

// markdown is summary.md: one row per run and measured op, the workloads not run, and the side-by-side comparison.
func markdown(results []Result, unsupported []Unsupported) string {
	var b strings.Builder
	b.WriteString("| workload | contender | rep | measured op | pods/s avg | p50 | p90 | p95 | p99 | samples | measured pods | scheduled | pending | all pods scheduled/pending | sched CPU s | sched peak RSS MiB | API server CPU s | outcome |\n")
	b.WriteString("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range results {
		outcome := "ok"
		if r.NotApplicable != "" {
			outcome = "not applicable: " + r.NotApplicable
		} else if !r.OK {
			outcome = "error: " + r.Error
		}
		outcome = mdCell(outcome)
		if len(r.Measurements) == 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | – | | | | | | | | | | %d/%d | %.2f | %.0f | %.2f | %s |\n", r.Workload, r.Contender, r.Rep, r.Scheduled, r.Pending, r.SchedCPUS, r.SchedRSSMiB, r.APICPUS, outcome)
		}
		for _, m := range r.Measurements {
			t := m.Throughput
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %d | %d | %d/%d | %.2f | %.0f | %.2f | %s |\n",
				r.Workload, r.Contender, r.Rep, m.Name, t.Average, t.Perc50, t.Perc90, t.Perc95, t.Perc99, t.Samples,
				m.Pods, m.Scheduled, m.Pending, r.Scheduled, r.Pending, r.SchedCPUS, r.SchedRSSMiB, r.APICPUS, outcome)
		}
	}
	if len(unsupported) > 0 {
		b.WriteString("\nNot run (selected, but the suite cannot run them yet):\n\n| workload | file | reason |\n|---|---|---|\n")
		for _, u := range unsupported {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", u.Workload, u.File, mdCell(u.Reason))
		}
	}
	b.WriteString(comparison(results))
	return b.String()
}

// mdCell keeps a text inside its Markdown table cell: a "|" would end the cell, a line break the row.
func mdCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

// contenderOrder is the order of contenders in the comparison and the plots, the baseline first; any other
// contender follows, by name.
var contenderOrder = []string{"kube", "ours", "ours-guests", "null"}

// contendersOf lists the contenders that ran in results, in contenderOrder.
func contendersOf(results []Result) []string {
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Contender] = true
	}
	var out, others []string
	for _, c := range contenderOrder {
		if seen[c] {
			out = append(out, c)
			delete(seen, c)
		}
	}
	for c := range seen {
		others = append(others, c)
	}
	sort.Strings(others)
	return append(out, others...)
}

// reading is one contender's figures for one measured op of one workload, by repetition. Runs that failed, were
// not applicable or ended within one throughput sample are counted, never taken as a figure of 0.
type reading struct {
	throughput map[int]float64 // SchedulingThroughput average
	cpu, rss   map[int]float64 // the scheduler's CPU seconds and peak RSS over the whole run
	errors     int
	notApplic  int
	noSamples  int
}

// add takes measured op i of run r.
func (x *reading) add(r Result, i int) {
	switch {
	case r.NotApplicable != "":
		x.notApplic++
	case !r.OK:
		x.errors++
	case i >= len(r.Measurements) || r.Measurements[i].Throughput.Samples == 0:
		x.noSamples++
	default:
		x.throughput[r.Rep] = r.Measurements[i].Throughput.Average
	}
	if r.OK && r.SchedCPUS > 0 {
		x.cpu[r.Rep] = r.SchedCPUS
	}
	if r.OK && r.SchedRSSMiB > 0 {
		x.rss[r.Rep] = r.SchedRSSMiB
	}
}

// String is the reading as a table cell or bar label: the median throughput, and what failed beside it.
func (x *reading) String() string {
	if x == nil {
		return "not run"
	}
	var notes []string
	plural := func(n int, one, many string) {
		if n == 1 {
			notes = append(notes, "1 "+one)
		} else if n > 1 {
			notes = append(notes, fmt.Sprintf("%d %s", n, many))
		}
	}
	plural(x.errors, "error", "errors")
	plural(x.notApplic, "not applicable", "not applicable")
	plural(x.noSamples, "without samples", "without samples")
	if len(x.throughput) == 0 {
		return strings.Join(notes, ", ")
	}
	s := fmt.Sprintf("%.1f", median(x.throughput))
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

// row is one measured op of one workload and every contender's reading of it.
type row struct {
	workload, op, family string
	// several: the workload has more than one measured op, so the op is named beside it in the plots.
	several   bool
	threshold float64
	by        map[string]*reading
}

// label names the row in a plot.
func (x row) label() string {
	if x.several {
		return x.workload + " · " + x.op
	}
	return x.workload
}

// rows groups results by workload (in the order they first ran) and measured op (by position: the ops of one
// workload are the same for every contender).
func rows(results []Result) []row {
	var order []string
	byWorkload := map[string][]Result{}
	for _, r := range results {
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	var out []row
	for _, w := range order {
		n := 1
		for _, r := range byWorkload[w] {
			n = max(n, len(r.Measurements))
		}
		for i := 0; i < n; i++ {
			out = append(out, rowOf(w, i, n > 1, byWorkload[w]))
		}
	}
	return out
}

// rowOf is measured op i of workload w over its runs rs.
func rowOf(w string, i int, several bool, rs []Result) row {
	x := row{workload: w, op: "–", several: several, by: map[string]*reading{}}
	for _, r := range rs {
		if x.family == "" {
			x.family = r.Family
		}
		if x.threshold == 0 {
			x.threshold = r.Threshold
		}
		if x.op == "–" && i < len(r.Measurements) && r.Measurements[i].Name != "" {
			x.op = r.Measurements[i].Name
		}
		if x.by[r.Contender] == nil {
			x.by[r.Contender] = &reading{throughput: map[int]float64{}, cpu: map[int]float64{}, rss: map[int]float64{}}
		}
		x.by[r.Contender].add(r, i)
	}
	return x
}

// median of the values of m (0 when empty).
func median(m map[int]float64) float64 {
	v := make([]float64, 0, len(m))
	for _, f := range m {
		v = append(v, f)
	}
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// ratio is a/b over repetitions: the median of the per-repetition ratios when both have a figure for the same
// repetitions (the contenders took turns within each, so a pair shares the machine's state of the moment),
// else the ratio of the medians (paired false). ok is false when either has no figure.
func ratio(a, b map[int]float64) (v float64, paired, ok bool) {
	if len(a) == 0 || len(b) == 0 {
		return 0, false, false
	}
	per := map[int]float64{}
	for rep, av := range a {
		if bv, found := b[rep]; found && bv > 0 {
			per[rep] = av / bv
		}
	}
	if len(per) == len(a) && len(per) == len(b) {
		return median(per), true, true
	}
	if mb := median(b); mb > 0 {
		return median(a) / mb, false, true
	}
	return 0, false, false
}

// ratioCell formats ratio(a, b): two decimals, a † when it is a ratio of medians, "–" without one.
func ratioCell(a, b map[int]float64) string {
	v, paired, ok := ratio(a, b)
	if !ok {
		return "–"
	}
	if !paired {
		return fmt.Sprintf("%.2f†", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Targets of the project against kube-scheduler (the issue's): throughput at least targetBound× kube-scheduler's
// where kube-scheduler is scheduling-bound (below boundBelow of the null binder's rate), else at least targetOther×;
// at least targetThreshold× upstream's CI threshold; CPU and peak RSS at most the given multiples of
// kube-scheduler's.
const (
	boundBelow      = 0.5
	targetBound     = 2.0
	targetOther     = 1.0
	targetThreshold = 3.0
	targetCPU       = 0.5
	targetRSS       = 1.0
)

// get is the throughput, CPU or RSS figures of a contender in x, nil when it did not run.
func (x row) get(contender string, what func(*reading) map[int]float64) map[int]float64 {
	if r := x.by[contender]; r != nil {
		return what(r)
	}
	return nil
}

// throughputOf, cpuOf and rssOf pick one kind of figure of a reading, for get.
func throughputOf(r *reading) map[int]float64 { return r.throughput }

// cpuOf: see throughputOf.
func cpuOf(r *reading) map[int]float64 { return r.cpu }

// rssOf: see throughputOf.
func rssOf(r *reading) map[int]float64 { return r.rss }

// target is the throughput multiple of kube-scheduler's that ours must reach on x, known only when the null binder
// ran it: how far kube-scheduler is below the binder's rate says whether the workload is scheduling-bound.
func (x row) target() (float64, bool) {
	kn, _, ok := ratio(x.get("kube", throughputOf), x.get("null", throughputOf))
	if !ok {
		return 0, false
	}
	if kn < boundBelow {
		return targetBound, true
	}
	return targetOther, true
}

// metWord is how the comparison says whether a target is met.
func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// verdict is a ratio v (a † when a ratio of medians, as ratioCell) and whether it meets its target: at least the
// target (atLeast), or at most.
func verdict(v float64, paired bool, target float64, atLeast bool) string {
	mark := ""
	if !paired {
		mark = "†"
	}
	return fmt.Sprintf("%.2f%s %s", v, mark, metWord((atLeast && v >= target) || (!atLeast && v <= target)))
}

// comparison is the side-by-side section of summary.md: per workload and measured op, each contender's median
// throughput and ours against kube-scheduler, the null binder and upstream's threshold, with the targets' verdicts.
func comparison(results []Result) string {
	rs := rows(results)
	if len(rs) == 0 {
		return ""
	}
	cs := contendersOf(results)
	hasNull := false
	for _, c := range cs {
		hasNull = hasNull || c == "null"
	}
	var b strings.Builder
	b.WriteString("\n## Side by side\n\n")
	b.WriteString(comparisonIntro(hasNull))
	head := append([]string{"workload", "measured op", "family", "threshold"}, cs...)
	head = append(head, "ours/kube")
	if hasNull {
		head = append(head, "kube/null")
	}
	head = append(head, "target", "met", fmt.Sprintf("ours/threshold (≥%g)", targetThreshold),
		fmt.Sprintf("CPU ours/kube (≤%g)", targetCPU), fmt.Sprintf("peak RSS ours/kube (≤%g)", targetRSS))
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	for _, x := range rs {
		b.WriteString("| " + strings.Join(comparisonCells(x, cs, hasNull), " | ") + " |\n")
	}
	return b.String()
}

// comparisonIntro says how to read the table.
func comparisonIntro(hasNull bool) string {
	s := "Per workload and measured op: each contender's median over repetitions of SchedulingThroughput's average " +
		"(pods/s); runs that failed, were not applicable or ended within one sample are named, never counted as " +
		"figures. Ratios are the median of the per-repetition ratios (the contenders took turns within each " +
		"repetition); a † marks a ratio of the medians instead, where the contenders' repetitions do not pair up. " +
		fmt.Sprintf("Targets: ours ≥ %g× kube-scheduler's throughput where kube-scheduler is below %g× the null "+
			"binder's rate (scheduling-bound), else ≥ %g×; ours ≥ %g× upstream's threshold where the workload has "+
			"one; the scheduler's CPU ≤ %g× and peak RSS ≤ %g× kube-scheduler's, over the whole run.",
			targetBound, boundBelow, targetOther, targetThreshold, targetCPU, targetRSS)
	if !hasNull {
		s += " The null binder did not run, so whether a workload is scheduling-bound is not known and no " +
			"throughput target is assumed (–)."
	}
	return s + "\n\n"
}

// comparisonCells are the cells of x's row, in comparison's column order.
func comparisonCells(x row, cs []string, hasNull bool) []string {
	thr := "–"
	if x.threshold > 0 {
		thr = fmt.Sprintf("%g", x.threshold)
	}
	cells := []string{mdCell(x.workload), mdCell(x.op), x.family, thr}
	for _, c := range cs {
		cells = append(cells, x.by[c].String())
	}
	ours, kube := x.get("ours", throughputOf), x.get("kube", throughputOf)
	cells = append(cells, ratioCell(ours, kube))
	if hasNull {
		cells = append(cells, ratioCell(kube, x.get("null", throughputOf)))
	}
	target, met := "–", "–"
	if t, ok := x.target(); ok {
		target = fmt.Sprintf("%g×", t)
		if v, _, ok := ratio(ours, kube); ok {
			met = metWord(v >= t)
		}
	}
	overThreshold := "–"
	if x.threshold > 0 && len(ours) > 0 {
		overThreshold = verdict(median(ours)/x.threshold, true, targetThreshold, true)
	}
	cpu, rss := "–", "–"
	if v, paired, ok := ratio(x.get("ours", cpuOf), x.get("kube", cpuOf)); ok {
		cpu = verdict(v, paired, targetCPU, false)
	}
	if v, paired, ok := ratio(x.get("ours", rssOf), x.get("kube", rssOf)); ok {
		rss = verdict(v, paired, targetRSS, false)
	}
	return append(cells, target, met, overThreshold, cpu, rss)
}

// report merges the results.json of earlier runs (their directories, or the files) and writes summary.md,
// results.json and the plots into out, starting nothing. perfDir, when set, gives results written before the
// family and threshold were recorded theirs, from the workloads' configuration files.
func report(paths []string, out, perfDir string) error {
	var runs [][]Result
	var notRun []Unsupported
	for _, p := range paths {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		f, err := readResults(p)
		if err != nil {
			return err
		}
		runs = append(runs, f.Results)
		notRun = append(notRun, f.NotRun...)
	}
	if len(runs) == 0 {
		return fmt.Errorf("--report: no results.json named")
	}
	results := mergeRuns(runs)
	if perfDir != "" {
		if err := fillFamilies(results, perfDir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeAll(out, results, stillNotRun(notRun, results)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "suite: %d runs from %d results.json reported in %s\n", len(results), len(runs), out)
	return nil
}

// readResults reads a results.json, or the one in directory path.
func readResults(path string) (resultsFile, error) {
	var f resultsFile
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "results.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// mergeRuns joins the results of several runs. A workload's repetitions from a later run are numbered after those
// already merged for it, the same shift for all its contenders, so the runs that took turns within one repetition
// still pair up and none collides.
func mergeRuns(runs [][]Result) []Result {
	last := map[string]int{} // workload: its highest repetition merged so far
	var out []Result
	for _, run := range runs {
		shift := map[string]int{}
		for _, r := range run {
			if _, ok := shift[r.Workload]; !ok {
				shift[r.Workload] = last[r.Workload]
			}
		}
		for _, r := range run {
			r.Rep += shift[r.Workload]
			last[r.Workload] = max(last[r.Workload], r.Rep)
			out = append(out, r)
		}
	}
	return out
}

// stillNotRun is the not-run lists of merged runs, each workload once, without those another run did run.
func stillNotRun(notRun []Unsupported, results []Result) []Unsupported {
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Workload] = true
	}
	var out []Unsupported
	for _, u := range notRun {
		if !seen[u.Workload] {
			seen[u.Workload] = true
			out = append(out, u)
		}
	}
	return out
}

// fillFamilies sets the family and threshold of results that have no family (written before they were recorded)
// from the configuration files below perfDir, whatever their labels.
func fillFamilies(results []Result, perfDir string) error {
	files, err := configFiles(perfDir)
	if err != nil {
		return fmt.Errorf("--perf-dir: %w", err)
	}
	type known struct {
		family    string
		threshold float64
	}
	byName := map[string]known{}
	for _, file := range files {
		tcs, err := loadFile(file)
		if err != nil {
			return err
		}
		family := familyOf(perfDir, file)
		for _, tc := range tcs {
			for _, w := range tc.Workloads {
				byName[tc.Name+"/"+w.Name] = known{family, thresholdOf(w.Threshold, family)}
			}
		}
	}
	for i, r := range results {
		if k, ok := byName[r.Workload]; ok && r.Family == "" {
			results[i].Family, results[i].Threshold = k.family, k.threshold
		}
	}
	return nil
}

// Plots: one SVG per workload family, a horizontal grouped bar chart of the median throughput of each contender
// per workload, with upstream's threshold and the project's multiple of it marked. Written by hand with the
// standard library, as the driver's module adds no dependency for it.

// Layout of a plot, in pixels: bars start at plotLeft (the contender names are left of them) and leave plotRight
// for the value printed at their end; 900 wide reads on a documentation page without scaling.
const (
	plotWidth  = 900
	plotLeft   = 112
	plotRight  = 120
	plotTop    = 70
	barHeight  = 14
	barGap     = 3
	groupLabel = 18
	markerRow  = 14
	groupGap   = 12
)

// contenderColours keeps a contender's colour the same in every plot; others get spareColours in turn.
var contenderColours = map[string]string{"kube": "#326ce5", "ours": "#e37400", "ours-guests": "#9334e6", "null": "#80868b"}

// spareColours are for contenders contenderColours does not name, in the order they appear.
var spareColours = []string{"#00796b", "#d01884", "#12b5cb", "#b06000"}

// Marker colours: upstream's threshold, and the project's targetThreshold multiple of it.
const (
	thresholdColour = "#d93025"
	targetColour    = "#188038"
)

// colours gives each contender of cs its colour.
func colours(cs []string) map[string]string {
	out := map[string]string{}
	spare := 0
	for _, c := range cs {
		if col, ok := contenderColours[c]; ok {
			out[c] = col
			continue
		}
		out[c] = spareColours[spare%len(spareColours)]
		spare++
	}
	return out
}

// plotFile is the file name of a family's plot: plot-<family>.svg, a nested family's "/" as "-".
func plotFile(family string) string {
	return "plot-" + strings.ReplaceAll(family, "/", "-") + ".svg"
}

// plots are the SVG charts of results by file name, one per family (results without one: "unknown").
func plots(results []Result) map[string]string {
	cs := contendersOf(results)
	byFamily := map[string][]row{}
	for _, x := range rows(results) {
		f := x.family
		if f == "" {
			f = "unknown"
		}
		byFamily[f] = append(byFamily[f], x)
	}
	out := map[string]string{}
	for f, rs := range byFamily {
		out[plotFile(f)] = plot(f, rs, cs)
	}
	return out
}

// esc escapes a text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceAxis is the axis end and tick step for values up to top: a step of 1, 2, 2.5 or 5 times a power of ten
// giving about five ticks, the end the first tick at or above top.
func niceAxis(top float64) (end, step float64) {
	if top <= 0 {
		return 1, 0.2
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return math.Ceil(top/step) * step, step
}

// scaleOf is the axis of a family's plot: linear, from 0 to past the largest bar or target marker.
func scaleOf(rs []row) (end, step float64) {
	top := 0.0
	for _, x := range rs {
		for _, r := range x.by {
			top = math.Max(top, median(r.throughput))
		}
		top = math.Max(top, targetThreshold*x.threshold)
	}
	return niceAxis(top)
}

// plotter draws one plot: the scale, the colours and the SVG written so far.
type plotter struct {
	b      strings.Builder
	end    float64
	cs     []string
	colour map[string]string
}

// x is where value v lies on the axis.
func (p *plotter) x(v float64) float64 {
	return plotLeft + v/p.end*(plotWidth-plotLeft-plotRight)
}

// text writes a text element; attrs are extra attributes, already escaped.
func (p *plotter) text(x, y float64, attrs, s string) {
	fmt.Fprintf(&p.b, "<text x=\"%.1f\" y=\"%.1f\" %s>%s</text>\n", x, y, attrs, esc(s))
}

// plot is the SVG chart of one family's rows.
func plot(family string, rs []row, cs []string) string {
	end, step := scaleOf(rs)
	p := &plotter{end: end, cs: cs, colour: colours(cs)}
	y := float64(plotTop)
	for _, x := range rs {
		y = p.group(x, y)
	}
	body := p.b.String()
	p.b.Reset()
	height := y + 30
	title := family + ": SchedulingThroughput average, pods/s (median over repetitions)"
	fmt.Fprintf(&p.b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", plotWidth, height, plotWidth, height)
	fmt.Fprintf(&p.b, "<title>%s</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", esc(title))
	p.text(16, 24, "font-size=\"15\" font-weight=\"bold\"", title)
	p.legend(46, hasThreshold(rs))
	p.axis(step, plotTop-6, y)
	p.b.WriteString(body)
	p.b.WriteString("</svg>\n")
	return p.b.String()
}

// hasThreshold reports whether a row of rs has an upstream threshold (and so the plot, markers to explain).
func hasThreshold(rs []row) bool {
	for _, x := range rs {
		if x.threshold > 0 {
			return true
		}
	}
	return false
}

// legend writes the contenders' colours, and the markers' meaning when there are markers, in one line at y.
func (p *plotter) legend(y float64, markers bool) {
	x := 16.0
	for _, c := range p.cs {
		fmt.Fprintf(&p.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, y-10, p.colour[c])
		p.text(x+16, y, "", c)
		x += 16 + 7*float64(len(c)) + 18
	}
	if !markers {
		return
	}
	for _, m := range []struct{ colour, dash, label string }{
		{thresholdColour, "4 3", "upstream threshold"},
		{targetColour, "", fmt.Sprintf("%g× threshold (target)", targetThreshold)},
	} {
		fmt.Fprintf(&p.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\"/>\n", x+6, y-12, x+6, y+2, m.colour, m.dash)
		p.text(x+14, y, "", m.label)
		x += 14 + 7*float64(len(m.label)) + 18
	}
}

// axis writes the vertical grid lines from top to bottom and their values under them.
func (p *plotter) axis(step, top, bottom float64) {
	for i := 0; float64(i)*step <= p.end*(1+1e-9); i++ {
		v := float64(i) * step
		x := p.x(v)
		fmt.Fprintf(&p.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", x, top, x, bottom)
		p.text(x, bottom+14, "text-anchor=\"middle\" fill=\"#5f6368\"", fmt.Sprintf("%g", v))
	}
	// past the half of the last value that overhangs its tick
	p.text(p.x(p.end)+24, bottom+14, "fill=\"#5f6368\"", "pods/s")
}

// group writes one workload's label, one bar per contender and the threshold markers, from y down; it returns
// where the next group starts.
func (p *plotter) group(x row, y float64) float64 {
	p.text(16, y+12, "font-weight=\"bold\"", x.label())
	y += groupLabel
	barsTop := y
	for _, c := range p.cs {
		r := x.by[c]
		p.text(plotLeft-6, y+11, "text-anchor=\"end\" font-size=\"11\"", c)
		if r != nil && len(r.throughput) > 0 {
			w := p.x(median(r.throughput)) - plotLeft
			fmt.Fprintf(&p.b, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", plotLeft, y, w, barHeight, p.colour[c])
			p.text(plotLeft+w+4, y+11, "font-size=\"11\"", r.String())
		} else {
			p.text(plotLeft+4, y+11, "font-size=\"11\" font-style=\"italic\" fill=\"#5f6368\"", r.String())
		}
		y += barHeight + barGap
	}
	if x.threshold > 0 {
		p.markers(x.threshold, barsTop-2, y)
		y += markerRow
	}
	return y + groupGap
}

// markers writes upstream's threshold and the project's multiple of it as vertical lines across a group's bars,
// labelled under them: the threshold's label left of its line, the target's right of its own, so they never
// overlap.
func (p *plotter) markers(threshold, top, bottom float64) {
	xt, x3 := p.x(threshold), p.x(targetThreshold*threshold)
	fmt.Fprintf(&p.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n", xt, top, xt, bottom, thresholdColour)
	fmt.Fprintf(&p.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", x3, top, x3, bottom, targetColour)
	// bars start at plotLeft, so the threshold's label has room left of its line
	p.text(xt-3, bottom+10, fmt.Sprintf("text-anchor=\"end\" font-size=\"10\" fill=\"%s\"", thresholdColour), fmt.Sprintf("threshold %g", threshold))
	p.text(x3+3, bottom+10, fmt.Sprintf("font-size=\"10\" fill=\"%s\"", targetColour), fmt.Sprintf("%g× threshold %g", targetThreshold, targetThreshold*threshold))
}
