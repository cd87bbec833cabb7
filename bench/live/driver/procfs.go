package main

// What the driver reads from /proc: a process's CPU time, peak RSS and threads, and how many TCP connections it
// holds to the API server's port.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every Linux architecture the
// project runs on (sysconf(_SC_CLK_TCK) would need cgo).
const clockTicks = 100

// cpuSeconds is utime+stime of a process (its own threads, not its children), in seconds.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// statusFields reads numeric fields of /proc/PID/status ("VmHWM", "Threads", ...), the unit dropped (kB for Vm*).
func statusFields(pid int, names ...string) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !want[k] {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}

// connsTo counts the process's established TCP connections whose remote port is port: the sockets among its file
// descriptors that /proc/net/tcp{,6} lists as ESTABLISHED to that port.
func connsTo(pid, port int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sockets []uint64
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 64); err == nil {
			sockets = append(sockets, n)
		}
	}
	if len(sockets) == 0 {
		return 0, nil
	}
	to := map[uint64]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		// The process's own network namespace's table (the same as /proc/net here, but exact if it were not).
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte{'\n'})[1:] {
			f := strings.Fields(string(line))
			if len(f) < 10 || f[3] != "01" { // 01: ESTABLISHED
				continue
			}
			_, rport, ok := strings.Cut(f[2], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(rport, 16, 32); err != nil || int(p) != port {
				continue
			}
			if ino, err := strconv.ParseUint(f[9], 10, 64); err == nil {
				to[ino] = true
			}
		}
	}
	n := 0
	for _, s := range sockets {
		if to[s] {
			n++
		}
	}
	return n, nil
}

// sampler records the peak of a process's connections to the API server and of its threads, every interval,
// until stopped.
type sampler struct {
	mu          sync.Mutex
	peakConns   int
	peakThreads int64
	samples     int
	stop        chan struct{}
	done        chan struct{}
}

func startSampler(pid, apiPort int, interval time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.sample(pid, apiPort)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample(pid, apiPort int) {
	c, err := connsTo(pid, apiPort)
	st, err2 := statusFields(pid, "Threads")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && c > s.peakConns {
		s.peakConns = c
	}
	if err2 == nil && st["Threads"] > s.peakThreads {
		s.peakThreads = st["Threads"]
	}
	s.samples++
}

// finish takes a last sample and stops; it returns the peaks.
func (s *sampler) finish(pid, apiPort int) (conns int, threads int64, samples int) {
	close(s.stop)
	<-s.done
	s.sample(pid, apiPort)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakConns, s.peakThreads, s.samples
}
