package kit

// What the benchmarks read from /proc: a process's CPU time, peak RSS and threads, and how many TCP connections it
// holds to the API server's port.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every Linux architecture the
// project runs on (sysconf(_SC_CLK_TCK) would need cgo).
const ClockTicks = 100

// CPUSeconds is utime+stime of a process (its own threads, not its children), in seconds.
func CPUSeconds(pid int) (float64, error) {
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
	return float64(ut+st) / ClockTicks, nil
}

// StatusFields reads numeric fields of /proc/PID/status ("VmHWM", "Threads", ...), the unit dropped (kB for Vm*).
func StatusFields(pid int, names ...string) (map[string]int64, error) {
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

// ConnsTo counts the process's established TCP connections whose remote port is port: the sockets among its file
// descriptors that the kernel lists as ESTABLISHED to that port. The list comes from netlink (sock_diag), which
// costs microseconds even with thousands of sockets; /proc/net/tcp, the fallback, costs tens of milliseconds there,
// and the driver must stay light while the scheduler under test runs.
func ConnsTo(pid, port int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	names, err := readDirNames(dir)
	if err != nil {
		return 0, err
	}
	var sockets []uint64
	for _, name := range names {
		link, err := os.Readlink(dir + "/" + name)
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
	to, err := establishedTo(port)
	if err != nil {
		if to, err = establishedToProc(pid, port); err != nil {
			return 0, err
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

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// establishedTo returns the inodes of the established TCP sockets (IPv4 and IPv6) whose remote port is port, from
// a NETLINK_SOCK_DIAG dump of the driver's network namespace (the schedulers run in the same one).
func establishedTo(port int) (map[uint64]bool, error) {
	const (
		sockDiagByFamily = 20      // SOCK_DIAG_BY_FAMILY
		tcpfEstablished  = 1 << 1  // 1 << TCP_ESTABLISHED
		reqLen           = 16 + 56 // nlmsghdr + inet_diag_req_v2
	)
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	kernel := &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}
	out := map[uint64]bool{}
	buf := make([]byte, 1<<16)
	for seq, family := range []byte{syscall.AF_INET, syscall.AF_INET6} {
		req := make([]byte, reqLen)
		binary.NativeEndian.PutUint32(req[0:], reqLen)
		binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
		binary.NativeEndian.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
		binary.NativeEndian.PutUint32(req[8:], uint32(seq+1))
		req[16] = family
		req[17] = syscall.IPPROTO_TCP
		binary.NativeEndian.PutUint32(req[20:], tcpfEstablished)
		if err := syscall.Sendto(fd, req, 0, kernel); err != nil {
			return nil, err
		}
	recv:
		for {
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil {
				return nil, err
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				switch m.Header.Type {
				case syscall.NLMSG_DONE:
					break recv
				case syscall.NLMSG_ERROR:
					return nil, fmt.Errorf("sock_diag: netlink error")
				}
				// inet_diag_msg: family, state, timer, retrans (1 byte each), then inet_diag_sockid (sport and dport
				// big-endian at 4 and 6, 48 bytes), expires, rqueue, wqueue, uid, inode (u32 at 68).
				d := m.Data
				if len(d) < 72 {
					continue
				}
				if int(binary.BigEndian.Uint16(d[6:8])) == port {
					out[uint64(binary.NativeEndian.Uint32(d[68:72]))] = true
				}
			}
		}
	}
	return out, nil
}

// establishedToProc is establishedTo from /proc/PID/net/tcp{,6}.
func establishedToProc(pid, port int) (map[uint64]bool, error) {
	to := map[uint64]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
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
	return to, nil
}

// Sampler records the peak of a process's connections to the API server and of its threads, every interval, or
// less often when one sample costs more than a thirtieth of the interval: with thousands of sockets a sample takes
// ~15 ms (a readlink per descriptor), and the driver must leave the cores to the scheduler it measures.
type Sampler struct {
	mu          sync.Mutex
	peakConns   int
	peakThreads int64
	samples     int
	stop        chan struct{}
	// StartSampler samples pid every interval until Finish.
	done chan struct{}
}

func StartSampler(pid, apiPort int, interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			start := time.Now()
			s.sample(pid, apiPort)
			wait := interval
			if cost := time.Since(start); 30*cost > wait {
				wait = 30 * cost
			}
			select {
			case <-s.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
	return s
}

func (s *Sampler) sample(pid, apiPort int) {
	c, err := ConnsTo(pid, apiPort)
	st, err2 := StatusFields(pid, "Threads")
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

// Finish takes a last sample and stops; it returns the peaks.
func (s *Sampler) Finish(pid, apiPort int) (conns int, threads int64, samples int) {
	close(s.stop)
	<-s.done
	s.sample(pid, apiPort)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakConns, s.peakThreads, s.samples
}
