package main

// A test case's schedulerConfigPath: upstream starts its scheduler with that KubeSchedulerConfiguration. Both
// contenders get the run's configuration (kit.SchedulerConfig: the API server, the run's scheduler name) with the
// file's profile merged in: its plugins and pluginConfig, and the file's other scheduler-wide settings.

import (
	"fmt"
	"os"
	"path/filepath"

	"kube-wasm-scheduler.local/bench-live/kit"

	"sigs.k8s.io/yaml"
)

// loadSchedulerConfig reads and checks a schedulerConfigPath file: a kubescheduler.config.k8s.io/v1
// KubeSchedulerConfiguration with at most one profile, as the workloads' single scheduler name can use.
func loadSchedulerConfig(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg["apiVersion"] != "kubescheduler.config.k8s.io/v1" || cfg["kind"] != "KubeSchedulerConfiguration" {
		return nil, fmt.Errorf("%s: not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration", path)
	}
	if p, _ := cfg["profiles"].([]any); len(p) > 1 {
		return nil, fmt.Errorf("%s: %d profiles; the suite runs one", path, len(p))
	}
	return cfg, nil
}

// mergeSchedulerConfig merges the test case's configuration into the run's: the file's profile (but its
// scheduler name) into the run's one profile, pluginConfig entries appended, plugins set (an error when the run's
// profile has plugins of its own: the sample guests); its other top-level fields but the client connection and
// leader election.
func mergeSchedulerConfig(run, tc map[string]any) error {
	for k, v := range tc {
		switch k {
		case "apiVersion", "kind", "profiles", "clientConnection", "leaderElection":
			continue
		}
		run[k] = v
	}
	tcProfiles, _ := tc["profiles"].([]any)
	if len(tcProfiles) == 0 {
		return nil
	}
	runProfiles, _ := run["profiles"].([]any)
	if len(runProfiles) != 1 {
		return fmt.Errorf("the run's configuration has %d profiles, want 1", len(runProfiles))
	}
	rp, _ := runProfiles[0].(map[string]any)
	tp, _ := tcProfiles[0].(map[string]any)
	for k, v := range tp {
		switch k {
		case "schedulerName":
		case "pluginConfig":
			pc, _ := rp[k].([]any)
			add, _ := v.([]any)
			rp[k] = append(pc, add...)
		case "plugins":
			if _, has := rp[k]; has {
				return fmt.Errorf("the profile sets plugins and so does the contender's own configuration")
			}
			rp[k] = v
		default:
			rp[k] = v
		}
	}
	return nil
}

// startContender starts c for a run, with the test case's scheduler configuration merged when it has one
// (kit.StartContender's command line with the merged file).
func startContender(c kit.Contender, bins kit.Binaries, dir, kubeconfig, schedulerName, configPath string) (*kit.Process, error) {
	if configPath == "" || (c.Kind != "kube" && c.Kind != "ours") {
		return kit.StartContender(c, bins, dir, kubeconfig, schedulerName, 5000, 5000)
	}
	tc, err := loadSchedulerConfig(configPath)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := kit.SchedulerConfig(cfg, kubeconfig, schedulerName, 5000, 5000, c.Guests, c.JSON, bins.GuestsDir); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		return nil, err
	}
	var run map[string]any
	if err := yaml.Unmarshal(b, &run); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg, err)
	}
	if err := mergeSchedulerConfig(run, tc); err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if b, err = yaml.Marshal(run); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		return nil, err
	}
	port, err := kit.FreePort()
	if err != nil {
		return nil, err
	}
	bin := bins.KubeScheduler
	if c.Kind == "ours" {
		bin = bins.Ours
	}
	argv := []string{bin, "--config", cfg, "--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(dir, "certs")}
	return kit.Start(append(argv, c.Args...), filepath.Join(dir, "scheduler.log"), fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
}
