package main

// The offline side: the same cluster and probe as a plain Kubernetes YAML file for `kube-wasm-scheduler simulate`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// clean turns a typed object into plain JSON as a user would write it: no creationTimestamp, no empty status
// of a pod (JSON is YAML, so the cluster file is a stream of JSON documents).
func clean(obj interface{}) (map[string]interface{}, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	if m["kind"] == "Pod" {
		delete(m, "status")
	}
	if m["kind"] == "Service" {
		delete(m, "status")
	}
	return m, nil
}

// writeDoc appends m to buf as one document of a YAML stream (JSON is YAML).
func writeDoc(buf *bytes.Buffer, m map[string]interface{}) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	buf.WriteString("---\n")
	buf.Write(b)
	buf.WriteString("\n")
	return nil
}

// clusterFile renders the seed's cluster: namespace, nodes (in the order the API server lists them, so the first
// node to report an image is the same one), services, background pods; the probe is appended per run.
func clusterFile(cl *cluster) ([]byte, error) {
	var buf bytes.Buffer
	write := func(obj interface{}) error {
		m, err := clean(obj)
		if err != nil {
			return err
		}
		return writeDoc(&buf, m)
	}
	for _, ns := range cl.namespaces() {
		if err := write(ns); err != nil {
			return nil, err
		}
	}
	for _, n := range cl.nodes {
		if err := write(n); err != nil {
			return nil, err
		}
	}
	for _, s := range cl.services {
		if err := write(s); err != nil {
			return nil, err
		}
	}
	for _, p := range cl.background {
		if err := write(p); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func probeDoc(pr probe, name, schedulerName string) ([]byte, error) {
	pod := pr.pod.DeepCopy()
	pod.Name = name
	pod.Spec.SchedulerName = schedulerName
	m, err := clean(pod)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append([]byte("---\n"), b...), '\n'), nil
}

// simulate runs `ours simulate` on file with seed and returns where the pod named pod went.
func simulate(ours, profile, file, pod string, seed int) (outcome, error) {
	placed, err := simulateAll(ours, profile, file, seed)
	if err != nil {
		return outcome{}, err
	}
	out, ok := placed[pod]
	if !ok {
		return outcome{}, fmt.Errorf("simulate %s: no placement for %s", file, pod)
	}
	return out, nil
}

// simulateAll runs `ours simulate` on file with seed and returns every pod's placement by namespace/name.
func simulateAll(ours, profile, file string, seed int) (map[string]outcome, error) {
	cmd := exec.Command(ours, "simulate", "--config", profile, "--cluster", file, "--seed", fmt.Sprint(seed), "--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("simulate %s: %v: %s", file, err, strings.TrimSpace(stderr.String()))
	}
	var rep struct {
		Placements []struct {
			Pod     string  `json:"pod"`
			Node    *string `json:"node"`
			Message string  `json:"message"`
		} `json:"placements"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("simulate %s: output is not the JSON report: %v", file, err)
	}
	placed := map[string]outcome{}
	for _, p := range rep.Placements {
		if p.Node == nil {
			placed[p.Pod] = outcome{message: p.Message}
		} else {
			placed[p.Pod] = outcome{node: *p.Node}
		}
	}
	return placed, nil
}

// writeProbeFile writes base plus the probe to path.
func writeProbeFile(path string, base []byte, pr probe, name, schedulerName string) error {
	doc, err := probeDoc(pr, name, schedulerName)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(append([]byte{}, base...), doc...), 0o644)
}
