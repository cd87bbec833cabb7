// Command pod-echo-go is a test fixture for the Go SDK's hand-written canonical ABI: its Filter rejects every
// node with a reason that prints, field by field, the cycle's pod (fetched with host.cycle-pod) and the node as
// the SDK decoded them from the host's memory, so a test can compare them with the cluster file. It also reads a
// file, which links the WASI file functions a plugin cannot use: the host's adapter answers them with ENOSYS,
// and the reason ends with the error Go returns.
package main

import (
	"fmt"
	"os"

	kws "example.invalid/kws/sdk-go"
)

// Echo is the fixture.
type Echo struct{}

// Filter rejects the node with the decoded pod and node as the reason.
func (Echo) Filter(pod *kws.CyclePod, node *kws.NodeInfo) kws.Status {
	p := pod.Pod()
	if p == nil {
		return kws.Errorf("no cycle pod during Filter")
	}
	_, err := os.ReadFile("/etc/hostname")
	return kws.Unresolvable(fmt.Sprintf("POD=%+v NODE=%+v FILE=%v", *p, *node.Node, err))
}

func init() { kws.Register(func(*kws.Config) (Echo, error) { return Echo{}, nil }) }

func main() {}
