package main

// The contenders: how each is configured, started, probed for readiness and stopped.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// contender is one scheduler the benchmark measures.
type contender struct {
	name string // kube, ours, null, ours-guests, kube-json
	// what it runs: "kube" (kube-scheduler), "ours" (kube-wasm-scheduler), "null" (the null binder)
	kind   string
	guests bool // ours with the three sample guests in its profile
	// json: clientConnection.contentType application/json, so kube-scheduler speaks what we speak (kube-rs has no
	// protobuf codec): tells how much of the API server's CPU is the encoding.
	json bool
}

var allContenders = map[string]contender{
	"kube":        {name: "kube", kind: "kube"},
	"ours":        {name: "ours", kind: "ours"},
	"null":        {name: "null", kind: "null"},
	"ours-guests": {name: "ours-guests", kind: "ours", guests: true},
	"kube-json":   {name: "kube-json", kind: "kube", json: true},
}

// binaries are the programs the contenders run.
type binaries struct {
	kubeScheduler, ours, nullBinder, guestsDir string
	nullWorkers                                int // the null binder's --workers
}

// schedulerConfig writes the run's KubeSchedulerConfiguration: the default profile under the run's schedulerName,
// leader election off, clientConnection qps/burst as given; for ours-guests, the three sample guests as
// deploy/manifests/config.yaml enables them (QosSort in place of PrioritySort, RandomScore, PriorityLabel).
func schedulerConfig(path, kubeconfig, schedulerName string, qps float64, burst int, guests, json bool, guestsDir string) error {
	var b strings.Builder
	contentType := ""
	if json {
		contentType = "  contentType: application/json\n  acceptContentTypes: application/json\n"
	}
	fmt.Fprintf(&b, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %g
  burst: %d
%sleaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
`, kubeconfig, qps, burst, contentType, schedulerName)
	if guests {
		g := func(name string) string { return fmt.Sprintf("%q", filepath.Join(guestsDir, name+".wasm")) }
		fmt.Fprintf(&b, `  plugins:
    multiPoint:
      enabled:
      - name: QosSort
      - name: RandomScore
        weight: 1
      disabled:
      - name: PrioritySort
    score:
      enabled:
      - name: PriorityLabel
        weight: 3
  pluginConfig:
  - name: QosSort
    args:
      component: %s
      timeout: 100ms
      memoryLimit: 64Mi
      failurePolicy: Fail
  - name: RandomScore
    args:
      component: %s
      timeout: 100ms
      memoryLimit: 64Mi
      failurePolicy: Fail
  - name: PriorityLabel
    args:
      component: %s
      config:
        labelKey: %s
      timeout: 100ms
      memoryLimit: 64Mi
      failurePolicy: Fail
`, g("qos-sort"), g("random-score"), g("priority-label"), priorityLabel)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a started contender.
type process struct {
	cmd      *exec.Cmd
	pid      int
	started  time.Time
	readyURL string
	exited   chan struct{}
	waitErr  error
	log      *os.File
}

// startContender writes the run's configuration under dir and starts the contender with its log in
// dir/scheduler.log. The clock of the run starts here (just before the fork).
func startContender(c contender, bins binaries, dir, kubeconfig, schedulerName string, qps float64, burst int) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var argv []string
	var readyURL string
	switch c.kind {
	case "kube", "ours":
		cfg := filepath.Join(dir, "config.yaml")
		if err := schedulerConfig(cfg, kubeconfig, schedulerName, qps, burst, c.guests, c.json, bins.guestsDir); err != nil {
			return nil, err
		}
		bin := bins.kubeScheduler
		if c.kind == "ours" {
			bin = bins.ours
		}
		argv = []string{bin, "--config", cfg, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
			"--cert-dir", filepath.Join(dir, "certs")}
		readyURL = fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	case "null":
		argv = []string{bins.nullBinder, "--kubeconfig", kubeconfig, "--scheduler-name", schedulerName,
			"--qps", fmt.Sprint(qps), "--burst", fmt.Sprint(burst), "--workers", fmt.Sprint(bins.nullWorkers),
			"--ready-address", fmt.Sprintf("127.0.0.1:%d", port)}
		readyURL = fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	default:
		return nil, fmt.Errorf("unknown contender kind %q", c.kind)
	}
	logf, err := os.Create(filepath.Join(dir, "scheduler.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "# %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Its own process group (a Ctrl-C reaches the driver, which stops it in order), and SIGTERM should the driver die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	p := &process{cmd: cmd, readyURL: readyURL, exited: make(chan struct{}), log: logf}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls the contender's /readyz every 50 ms until it answers 200.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
	}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(p.readyURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s (%s)", timeout, p.readyURL)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before it was ready: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the process (SIGKILL after 30 s).
func (p *process) stop() (exitedItself bool) {
	defer p.log.Close()
	select {
	case <-p.exited:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "driver: pid %d did not stop within 30 s of SIGTERM; SIGKILL\n", p.pid)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return false
}
