package kit

import (
	"net"
	"os"
	"testing"
)

// The driver's own connections to a local listener are counted the same by netlink and by /proc/net/tcp.
func TestConnsToCountsEstablishedConnectionsToThePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	pid := os.Getpid()
	n, err := ConnsTo(pid, port)
	if err != nil || n != 3 {
		t.Fatalf("connsTo = %d, %v; want 3 (the accepted ends have the listener's port as local port, not remote)", n, err)
	}
	viaNetlink, err := establishedTo(port)
	if err != nil {
		t.Fatalf("netlink: %v", err)
	}
	viaProc, err := establishedToProc(pid, port)
	if err != nil {
		t.Fatal(err)
	}
	if len(viaNetlink) != 3 || len(viaProc) != 3 {
		t.Fatalf("netlink found %d sockets, /proc %d; want 3 each", len(viaNetlink), len(viaProc))
	}
	for ino := range viaProc {
		if !viaNetlink[ino] {
			t.Fatalf("inode %d in /proc/net/tcp but not in the netlink dump", ino)
		}
	}
}

func TestCPUSecondsAndStatusOfSelf(t *testing.T) {
	if _, err := CPUSeconds(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	st, err := StatusFields(os.Getpid(), "VmHWM", "Threads")
	if err != nil || st["VmHWM"] <= 0 || st["Threads"] <= 0 {
		t.Fatalf("statusFields = %v, %v", st, err)
	}
}
