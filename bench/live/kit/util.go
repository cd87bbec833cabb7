package kit

// The control plane scripts/control-plane.sh starts, and small helpers.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PriorityLabel is the node label the PriorityLabel sample guest reads.
const PriorityLabel = "priority.example.com"

// ControlPlane reads the API server's and etcd's pids and the API server's port from scripts/control-plane.sh's DIR.
func ControlPlane(dir string) (apiPID, etcdPID, apiPort int, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%v (is the control plane up?)", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "kube-apiserver":
			apiPID = pid
		case "etcd":
			etcdPID = pid
		}
	}
	p, err := os.ReadFile(filepath.Join(dir, "ports"))
	if err != nil {
		return 0, 0, 0, err
	}
	f := strings.Fields(string(p))
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("%s/ports: want three ports", dir)
	}
	apiPort, _ = strconv.Atoi(f[2])
	if apiPID == 0 || etcdPID == 0 || apiPort == 0 {
		return 0, 0, 0, fmt.Errorf("%s: no kube-apiserver/etcd pid or port", dir)
	}
	return apiPID, etcdPID, apiPort, nil
}

// Drain waits until the process's CPU time grows by less than one clock tick in 500 ms, or limit; it returns how
// long that took.
func Drain(ctx context.Context, p *Process, limit time.Duration) float64 {
	start := time.Now()
	prev, err := CPUSeconds(p.PID)
	if err != nil {
		return 0
	}
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start).Seconds()
		case <-p.Exited:
			return time.Since(start).Seconds()
		case <-time.After(500 * time.Millisecond):
		}
		cur, err := CPUSeconds(p.PID)
		if err != nil || cur-prev < 1.0/ClockTicks {
			break
		}
		prev = cur
	}
	return time.Since(start).Seconds()
}

// Quantile of sorted values, nearest rank.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// Parallel runs f(0..n-1) on workers goroutines and returns the first error.
func Parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	if workers < 1 {
		workers = 1
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// Retry calls f up to three times while it fails with something other than AlreadyExists.
func Retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = f(); err == nil || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// InTurn is the order the contenders run in at repetition rep (from 1): as given, reversed at every even one.
func InTurn[T any](contenders []T, rep int) []T {
	if rep%2 == 1 {
		return contenders
	}
	out := make([]T, len(contenders))
	for i, c := range contenders {
		out[len(contenders)-1-i] = c
	}
	return out
}
