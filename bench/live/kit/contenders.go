package kit

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

// Contender is one scheduler the benchmark measures.
type Contender struct {
	Name string // kube, ours, null, ours-guests, kube-json
	// what it runs: "kube" (kube-scheduler), "ours" (kube-wasm-scheduler), "null" (the null binder)
	Kind   string
	Guests bool // ours with the three sample guests in its profile
	// JSON: clientConnection.contentType application/json, so kube-scheduler speaks what we speak (kube-rs has no
	// protobuf codec): tells how much of the API server's CPU is the encoding.
	JSON bool
	// Args are extra command-line flags (bench/suite: a workload's --feature-gates).
	Args []string
}

// Contenders are the contenders by name.
var Contenders = map[string]Contender{
	"kube":        {Name: "kube", Kind: "kube"},
	"ours":        {Name: "ours", Kind: "ours"},
	"null":        {Name: "null", Kind: "null"},
	"ours-guests": {Name: "ours-guests", Kind: "ours", Guests: true},
	"kube-json":   {Name: "kube-json", Kind: "kube", JSON: true},
}

// Binaries are the programs the contenders run.
type Binaries struct {
	KubeScheduler, Ours, NullBinder, GuestsDir string
	NullWorkers                                int // the null binder's --workers
}

// SchedulerConfig writes the run's KubeSchedulerConfiguration: the default profile under the run's schedulerName,
// leader election off, clientConnection qps/burst as given; for ours-guests, the three sample guests as
// deploy/manifests/config.yaml enables them (QosSort in place of PrioritySort, RandomScore, PriorityLabel).
func SchedulerConfig(path, kubeconfig, schedulerName string, qps float64, burst int, guests, json bool, guestsDir string) error {
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
`, g("qos-sort"), g("random-score"), g("priority-label"), PriorityLabel)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a started Contender.
type Process struct {
	cmd      *exec.Cmd
	PID      int
	Started  time.Time // just before the fork
	readyURL string
	Exited   chan struct{} // closed once it has exited; WaitErr is then set
	WaitErr  error
	log      *os.File
}

// StartContender writes the run's configuration under dir and starts the contender with its log in
// dir/scheduler.log. The clock of the run starts here (just before the fork).
func StartContender(c Contender, bins Binaries, dir, kubeconfig, schedulerName string, qps float64, burst int) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	var argv []string
	var readyURL string
	switch c.Kind {
	case "kube", "ours":
		cfg := filepath.Join(dir, "config.yaml")
		if err := SchedulerConfig(cfg, kubeconfig, schedulerName, qps, burst, c.Guests, c.JSON, bins.GuestsDir); err != nil {
			return nil, err
		}
		bin := bins.KubeScheduler
		if c.Kind == "ours" {
			bin = bins.Ours
		}
		argv = []string{bin, "--config", cfg, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
			"--cert-dir", filepath.Join(dir, "certs")}
		readyURL = fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	case "null":
		argv = []string{bins.NullBinder, "--kubeconfig", kubeconfig, "--scheduler-name", schedulerName,
			"--qps", fmt.Sprint(qps), "--burst", fmt.Sprint(burst), "--workers", fmt.Sprint(bins.NullWorkers),
			"--ready-address", fmt.Sprintf("127.0.0.1:%d", port)}
		readyURL = fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	default:
		return nil, fmt.Errorf("unknown contender kind %q", c.Kind)
	}
	return Start(append(argv, c.Args...), filepath.Join(dir, "scheduler.log"), readyURL)
}

// Start starts argv with its output in logPath (the command line its first line); readyURL is what WaitReady
// polls. The Process's clock starts just before the fork.
func Start(argv []string, logPath, readyURL string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "# %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Its own process group (a Ctrl-C reaches the driver, which stops it in order), and SIGTERM should the driver die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	p := &Process{cmd: cmd, readyURL: readyURL, Exited: make(chan struct{}), log: logf}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.PID = cmd.Process.Pid
	go func() {
		p.WaitErr = cmd.Wait()
		close(p.Exited)
	}()
	return p, nil
}

// WaitReady polls the process's /readyz every 50 ms until it answers 200.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
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
		case <-p.Exited:
			return fmt.Errorf("exited before it was ready: %v", p.WaitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for the Process (SIGKILL after 30 s).
func (p *Process) Stop() (exitedItself bool) {
	defer p.log.Close()
	select {
	case <-p.Exited:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(os.Stderr, "driver: pid %d did not stop within 30 s of SIGTERM; SIGKILL\n", p.PID)
		_ = p.cmd.Process.Kill()
		<-p.Exited
	}
	return false
}
