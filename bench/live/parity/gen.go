package main

// The seeded generator: one random cluster per seed (nodes, services, a background of bound pods) and probe pods
// that between them exercise every default plugin's inputs. The same seed gives the same cluster and probes.

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	parityLabel = "parity.kube-wasm-scheduler.io/seed"
	zoneLabel   = "topology.kubernetes.io/zone"
	regionLabel = "topology.kubernetes.io/region"
	hostLabel   = "kubernetes.io/hostname"
	archLabel   = "kubernetes.io/arch"
	gpuResource = "example.com/gpu"
	mb          = int64(1024 * 1024)
)

var (
	apps      = []string{"web", "api", "db", "cache", "batch"}
	pools     = []string{"general", "compute", "memory"}
	diskTypes = []string{"ssd", "hdd"}
	// Labels that topology spread and pod (anti-)affinity may use as their topology key.
	topologyKeys = []string{zoneLabel, hostLabel, regionLabel}
)

// image is one name of the image pool: its size per architecture (a multi-arch image reports a different size on
// arm64 nodes than on amd64 ones, under the same name).
type image struct {
	name       string // as a node reports it (normalized: with a tag or digest)
	podName    string // as a pod may write it (untagged names are normalized to :latest)
	amd64Size  int64
	arm64Size  int64
	multiArch  bool
	extraNames []string
}

// cluster is one seed's generated cluster.
type cluster struct {
	seed       int64
	namespace  string
	other      string     // a second namespace, labelled team=other, with background pods of its own
	nodes      []*v1.Node // sorted by name: the order the API server lists them, and the simulator's file order
	services   []*v1.Service
	background []*v1.Pod
	images     []image
	zones      []string
}

// namespaces are the seed's two namespaces; the second carries team=other for namespace selectors.
func (c *cluster) namespaces() []*v1.Namespace {
	seed := strconv.FormatInt(c.seed, 10)
	return []*v1.Namespace{
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: c.namespace, Labels: map[string]string{parityLabel: seed}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: c.other, Labels: map[string]string{parityLabel: seed, "team": "other"}}},
	}
}

// gen holds the seed's random source and what it generated so far, so probes refer to what the cluster has.
type gen struct {
	r *rand.Rand
	c *cluster
}

func (g *gen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }
func (g *gen) chance(p float64) bool   { return g.r.Float64() < p }

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// generateCluster builds seed's cluster: nodes nodes, background bound pods (as many as fit), two Services (so
// the default topology spread constraints apply to pods they select).
func generateCluster(seed int64, nodes, background int) (*cluster, *gen) {
	g := &gen{r: rand.New(rand.NewSource(seed))}
	c := &cluster{seed: seed, namespace: fmt.Sprintf("parity-%d", seed), other: fmt.Sprintf("parity-%d-other", seed)}
	g.c = c
	nz := 2 + g.r.Intn(3)
	for i := 0; i < nz; i++ {
		c.zones = append(c.zones, fmt.Sprintf("zone-%c", 'a'+i))
	}
	c.images = g.imagePool()
	for i := 0; i < nodes; i++ {
		c.nodes = append(c.nodes, g.node(i))
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].Name < c.nodes[j].Name })
	for _, app := range []string{"web", "api"} {
		c.services = append(c.services, &v1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: c.namespace},
			Spec: v1.ServiceSpec{
				Selector: map[string]string{"app": app},
				Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
			},
		})
	}
	g.backgroundPods(background)
	// Pending pods for a scheduler nobody runs: not on any node, so they count for nothing.
	for i := 0; i < 3; i++ {
		c.background = append(c.background, &v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pending-%d", i), Namespace: c.namespace, Labels: g.podLabels()},
			Spec:       v1.PodSpec{SchedulerName: "nobody", Containers: []v1.Container{{Name: "main", Image: g.containerImage(), Resources: g.requests()}}},
		})
	}
	return c, g
}

func (g *gen) imagePool() []image {
	var pool []image
	n := 6 + g.r.Intn(4)
	for i := 0; i < n; i++ {
		size := (5 + g.r.Int63n(1500)) * mb
		im := image{name: fmt.Sprintf("registry.example/img-%d:v%d", i, 1+g.r.Intn(3)), amd64Size: size, arm64Size: size}
		im.podName = im.name
		if g.chance(0.3) {
			// An untagged name in pods: the node reports it as :latest.
			base := fmt.Sprintf("registry.example/base-%d", i)
			im.name, im.podName = base+":latest", base
		}
		if g.chance(0.5) {
			// Multi-arch: the same name, another size on arm64 nodes.
			im.multiArch = true
			im.arm64Size = (5 + g.r.Int63n(1500)) * mb
		}
		if g.chance(0.3) {
			im.extraNames = []string{fmt.Sprintf("registry.example/img-%d@sha256:%064x", i, g.r.Int63())}
		}
		pool = append(pool, im)
	}
	return pool
}

func (g *gen) node(i int) *v1.Node {
	c := g.c
	name := fmt.Sprintf("parity-%d-node-%03d", c.seed, i)
	arch := "amd64"
	if g.chance(0.35) {
		arch = "arm64"
	}
	zone := c.zones[g.r.Intn(len(c.zones))]
	labels := map[string]string{
		parityLabel:        strconv.FormatInt(c.seed, 10),
		hostLabel:          name,
		zoneLabel:          zone,
		regionLabel:        "region-" + strconv.Itoa(int(zone[len(zone)-1]-'a')%2),
		archLabel:          arch,
		"kubernetes.io/os": "linux",
		"disktype":         g.pick(diskTypes),
		"pool":             g.pick(pools),
		"tier":             strconv.Itoa(1 + g.r.Intn(9)),
	}
	if g.chance(0.06) {
		// No zone (and no region): topology spread and zone affinity must leave such a node out of the domains.
		delete(labels, zoneLabel)
		delete(labels, regionLabel)
	}
	cpu := []string{"2", "4", "8", "16", "32", "3500m", "7800m", "500m"}[g.r.Intn(8)]
	mem := fmt.Sprintf("%dMi", []int64{4096, 8192, 16384, 32768, 65536}[g.r.Intn(5)]+g.r.Int63n(2048))
	pods := "110"
	if g.chance(0.15) {
		pods = strconv.Itoa(4 + g.r.Intn(12))
	}
	alloc := v1.ResourceList{v1.ResourceCPU: qty(cpu), v1.ResourceMemory: qty(mem), v1.ResourcePods: qty(pods),
		v1.ResourceEphemeralStorage: qty(fmt.Sprintf("%dGi", 10+g.r.Intn(90)))}
	var taints []v1.Taint
	if g.chance(0.2) {
		labels["gpu"] = "true"
		alloc[gpuResource] = qty(strconv.Itoa(1 + g.r.Intn(4)))
		if g.chance(0.5) {
			taints = append(taints, v1.Taint{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule})
		}
	}
	if g.chance(0.25) {
		taints = append(taints, v1.Taint{Key: "dedicated", Value: labels["pool"], Effect: v1.TaintEffectPreferNoSchedule})
	}
	if g.chance(0.1) {
		taints = append(taints, v1.Taint{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule})
	}
	if g.chance(0.05) {
		taints = append(taints, v1.Taint{Key: "maintenance", Value: "soon", Effect: v1.TaintEffectNoExecute})
	}
	var imgs []v1.ContainerImage
	for _, im := range c.images {
		if !g.chance(0.45) {
			continue
		}
		size := im.amd64Size
		if arch == "arm64" {
			size = im.arm64Size
		}
		imgs = append(imgs, v1.ContainerImage{Names: append([]string{im.name}, im.extraNames...), SizeBytes: size})
		if g.chance(0.03) {
			// The same name twice on one node, another size: the first listing counts.
			imgs = append(imgs, v1.ContainerImage{Names: []string{im.name}, SizeBytes: (5 + g.r.Int63n(1500)) * mb})
		}
	}
	// Declared features (NodeDeclaredFeatures, GA in v1.37): about half the nodes declare the one a probe may
	// need, a few declare only others.
	var declared []string
	switch {
	case g.chance(0.5):
		declared = []string{"RestartAllContainersOnContainerExits"}
	case g.chance(0.2):
		declared = []string{"InPlacePodLevelResourcesVerticalScaling"}
	}
	return &v1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: taints, Unschedulable: g.chance(0.04)},
		Status: v1.NodeStatus{
			Capacity:         alloc.DeepCopy(),
			Allocatable:      alloc,
			Images:           imgs,
			Conditions:       []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
			DeclaredFeatures: declared,
		},
	}
}

// requests is a random container request; none at all now and then (the scorers then count upstream's
// non-zero defaults).
func (g *gen) requests() v1.ResourceRequirements {
	if g.chance(0.15) {
		return v1.ResourceRequirements{}
	}
	req := v1.ResourceList{}
	if g.chance(0.9) {
		req[v1.ResourceCPU] = *resource.NewMilliQuantity(10+g.r.Int63n(1500), resource.DecimalSI)
	}
	if g.chance(0.85) {
		req[v1.ResourceMemory] = *resource.NewQuantity((16+g.r.Int63n(3000))*mb, resource.BinarySI)
	}
	if g.chance(0.1) {
		req[v1.ResourceEphemeralStorage] = qty(fmt.Sprintf("%dGi", 1+g.r.Intn(40)))
	}
	if g.chance(0.08) {
		// Limits only: the API server defaults the requests to them.
		return v1.ResourceRequirements{Limits: req}
	}
	return v1.ResourceRequirements{Requests: req}
}

// effective is what a container asks for once the API server has defaulted requests from limits.
func effective(r v1.ResourceRequirements) v1.ResourceList {
	if len(r.Requests) == 0 && len(r.Limits) > 0 {
		return r.Limits
	}
	return r.Requests
}

func (g *gen) containerImage() string {
	if g.chance(0.5) {
		return "registry.example/pause:3.10"
	}
	im := g.c.images[g.r.Intn(len(g.c.images))]
	if len(im.extraNames) > 0 && g.chance(0.3) {
		return im.extraNames[0]
	}
	return im.podName
}

func (g *gen) selector() *metav1.LabelSelector {
	if g.chance(0.2) {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{g.pick(apps), g.pick(apps)},
		}}}
	}
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick(apps)}}
}

func (g *gen) podLabels() map[string]string {
	l := map[string]string{"app": g.pick(apps)}
	if g.chance(0.5) {
		l["tier"] = g.pick([]string{"front", "back"})
	}
	return l
}

// backgroundPods binds up to n pods directly (spec.nodeName at creation), each on a random node it fits on by
// CPU, memory and pod count; some use host ports and some carry pod affinity terms, which incoming pods meet.
func (g *gen) backgroundPods(n int) {
	c := g.c
	type used struct{ cpu, mem, pods int64 }
	u := make([]used, len(c.nodes))
	for i := 0; i < n; i++ {
		res := g.requests()
		eff := effective(res)
		cpu, mem := eff.Cpu().MilliValue(), eff.Memory().Value()
		var spec v1.PodSpec
		if g.chance(0.1) {
			spec.Containers = append(spec.Containers, v1.Container{Name: "sidecar", Image: g.containerImage()})
		}
		ports := []v1.ContainerPort(nil)
		if g.chance(0.1) {
			ports = []v1.ContainerPort{g.hostPort()}
		}
		spec.Containers = append([]v1.Container{{Name: "main", Image: g.containerImage(), Resources: res, Ports: ports}}, spec.Containers...)
		if g.chance(0.08) {
			spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: g.selector(), TopologyKey: hostLabel}},
			}}
		} else if g.chance(0.1) {
			spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{
					Weight: int32(1 + g.r.Intn(100)), PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: g.selector(), TopologyKey: g.pick(topologyKeys)},
				}},
			}}
		} else if g.chance(0.05) {
			spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{LabelSelector: g.selector(), TopologyKey: zoneLabel}},
			}}
		}
		// A node it fits on, tried a few times; otherwise the pod is left out.
		for try := 0; try < 8; try++ {
			k := g.r.Intn(len(c.nodes))
			nd := c.nodes[k]
			a := nd.Status.Allocatable
			if u[k].cpu+cpu > a.Cpu().MilliValue() || u[k].mem+mem > a.Memory().Value() || u[k].pods+1 > a.Pods().Value() {
				continue
			}
			if len(ports) > 0 && hostPortUsed(c.background, nd.Name, ports[0]) {
				continue
			}
			u[k].cpu += cpu
			u[k].mem += mem
			u[k].pods++
			spec.NodeName = nd.Name
			zero := int64(0)
			spec.TerminationGracePeriodSeconds = &zero
			ns := c.namespace
			if g.chance(0.2) {
				ns = c.other
			}
			c.background = append(c.background, &v1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bg-%03d", i), Namespace: ns, Labels: g.podLabels()},
				Spec:       spec,
			})
			break
		}
	}
}

// hostPort is a host port as pods write them: mostly TCP on every address, now and then UDP or one address.
func (g *gen) hostPort() v1.ContainerPort {
	p := v1.ContainerPort{ContainerPort: 80, HostPort: []int32{8080, 9090}[g.r.Intn(2)], Protocol: v1.ProtocolTCP}
	if g.chance(0.2) {
		p.Protocol = v1.ProtocolUDP
	}
	if g.chance(0.25) {
		p.HostIP = []string{"127.0.0.1", "10.0.0.1"}[g.r.Intn(2)]
	}
	return p
}

// hostPortUsed: would port clash with one already on node (the same port and protocol, on the same or any
// address)? Background pods are kept clear of clashes; probes are not.
func hostPortUsed(pods []*v1.Pod, node string, port v1.ContainerPort) bool {
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		for _, ct := range p.Spec.Containers {
			for _, cp := range ct.Ports {
				if cp.HostPort == port.HostPort && cp.Protocol == port.Protocol &&
					(cp.HostIP == port.HostIP || cp.HostIP == "" || port.HostIP == "" || cp.HostIP == "0.0.0.0" || port.HostIP == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}

// probe is one generated pod to place and a one-line summary of what it asks for.
type probe struct {
	index   int
	pod     *v1.Pod // without name and schedulerName; set per placement
	summary string
}

func (g *gen) nodeSelectorRequirement() v1.NodeSelectorRequirement {
	switch g.r.Intn(6) {
	case 0:
		return v1.NodeSelectorRequirement{Key: zoneLabel, Operator: v1.NodeSelectorOpIn, Values: []string{g.pick(g.c.zones), g.pick(g.c.zones)}}
	case 1:
		return v1.NodeSelectorRequirement{Key: "disktype", Operator: v1.NodeSelectorOpNotIn, Values: []string{g.pick(diskTypes)}}
	case 2:
		return v1.NodeSelectorRequirement{Key: "gpu", Operator: []v1.NodeSelectorOperator{v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist}[g.r.Intn(2)]}
	case 3:
		return v1.NodeSelectorRequirement{Key: "tier", Operator: v1.NodeSelectorOpGt, Values: []string{strconv.Itoa(g.r.Intn(8))}}
	case 4:
		return v1.NodeSelectorRequirement{Key: "tier", Operator: v1.NodeSelectorOpLt, Values: []string{strconv.Itoa(2 + g.r.Intn(8))}}
	default:
		return v1.NodeSelectorRequirement{Key: "pool", Operator: v1.NodeSelectorOpIn, Values: []string{g.pick(pools)}}
	}
}

func (g *gen) nodeSelectorTerm() v1.NodeSelectorTerm {
	t := v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{g.nodeSelectorRequirement()}}
	if g.chance(0.3) {
		t.MatchExpressions = append(t.MatchExpressions, g.nodeSelectorRequirement())
	}
	if g.chance(0.1) {
		t.MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpNotIn, Values: []string{g.c.nodes[g.r.Intn(len(g.c.nodes))].Name}}}
	}
	return t
}

// generateProbe draws probe i: each default plugin's input appears with some probability, several at once.
func (g *gen) generateProbe(i int) probe {
	var sum []string
	spec := v1.PodSpec{}
	zero := int64(0)
	spec.TerminationGracePeriodSeconds = &zero
	nc := 1 + g.r.Intn(2)
	for k := 0; k < nc; k++ {
		spec.Containers = append(spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", k), Image: g.containerImage(), Resources: g.requests()})
	}
	if g.chance(0.1) {
		spec.InitContainers = []v1.Container{{Name: "init", Image: g.containerImage(), Resources: g.requests()}}
		sum = append(sum, "init container")
	}
	if g.chance(0.08) {
		always := v1.ContainerRestartPolicyAlways
		spec.InitContainers = append(spec.InitContainers, v1.Container{Name: "sidecar", Image: g.containerImage(), Resources: g.requests(), RestartPolicy: &always})
		sum = append(sum, "sidecar")
	}
	var req []string
	for _, ct := range append(append([]v1.Container{}, spec.InitContainers...), spec.Containers...) {
		e := effective(ct.Resources)
		req = append(req, fmt.Sprintf("%s cpu=%s mem=%s", ct.Image, e.Cpu(), e.Memory()))
	}
	sum = append(sum, "containers["+strings.Join(req, "; ")+"]")
	if g.chance(0.06) {
		if spec.Containers[0].Resources.Requests == nil {
			spec.Containers[0].Resources.Requests = v1.ResourceList{}
		}
		spec.Containers[0].Resources.Requests[gpuResource] = qty("1")
		spec.Containers[0].Resources.Limits = v1.ResourceList{gpuResource: qty("1")}
		sum = append(sum, "gpu=1")
	}
	if g.chance(0.08) {
		// A restart rule that restarts the whole pod: NodeDeclaredFeatures (v1.37) places it only on nodes that
		// declare RestartAllContainersOnContainerExits.
		never := v1.ContainerRestartPolicyNever
		spec.Containers[0].RestartPolicy = &never
		spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{
			Action:    v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
		sum = append(sum, "restartAllContainers")
	}
	if g.chance(0.12) {
		hp := g.hostPort()
		spec.Containers[0].Ports = []v1.ContainerPort{hp}
		sum = append(sum, fmt.Sprintf("hostPort=%s:%d/%s", hp.HostIP, hp.HostPort, hp.Protocol))
	}
	if g.chance(0.05) {
		// Pod-level resources (beta and on by default since v1.34): they replace the containers' sum.
		// At least what the containers ask for together, as the API server requires.
		var cpu, mem int64
		for _, ct := range append(append([]v1.Container{}, spec.InitContainers...), spec.Containers...) {
			e := effective(ct.Resources)
			cpu += e.Cpu().MilliValue()
			mem += e.Memory().Value()
		}
		spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpu+100+g.r.Int63n(2000), resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(mem+(64+g.r.Int63n(4000))*mb, resource.BinarySI),
		}}
		sum = append(sum, fmt.Sprintf("podResources(cpu=%s mem=%s)", spec.Resources.Requests.Cpu(), spec.Resources.Requests.Memory()))
	}
	labels := g.podLabels()
	sum = append(sum, fmt.Sprintf("labels=%v", labels))
	if g.chance(0.15) {
		switch g.r.Intn(3) {
		case 0:
			spec.NodeSelector = map[string]string{zoneLabel: g.pick(g.c.zones)}
		case 1:
			spec.NodeSelector = map[string]string{"disktype": g.pick(diskTypes)}
		default:
			spec.NodeSelector = map[string]string{archLabel: "arm64"}
		}
		sum = append(sum, fmt.Sprintf("nodeSelector=%v", spec.NodeSelector))
	}
	aff := &v1.Affinity{}
	if g.chance(0.2) {
		ns := &v1.NodeSelector{}
		for k := 0; k < 1+g.r.Intn(2); k++ {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, g.nodeSelectorTerm())
		}
		aff.NodeAffinity = &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
		sum = append(sum, "requiredNodeAffinity="+nodeSelectorString(ns.NodeSelectorTerms))
	}
	if g.chance(0.35) {
		if aff.NodeAffinity == nil {
			aff.NodeAffinity = &v1.NodeAffinity{}
		}
		var terms []v1.NodeSelectorTerm
		for k := 0; k < 1+g.r.Intn(3); k++ {
			t := g.nodeSelectorTerm()
			t.MatchFields = nil // preferred terms may not use matchFields
			w := int32(1 + g.r.Intn(100))
			aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, v1.PreferredSchedulingTerm{Weight: w, Preference: t})
			terms = append(terms, t)
		}
		sum = append(sum, "preferredNodeAffinity="+nodeSelectorString(terms))
	}
	term := func() v1.PodAffinityTerm {
		t := v1.PodAffinityTerm{LabelSelector: g.selector(), TopologyKey: g.pick(topologyKeys)}
		switch {
		case g.chance(0.1):
			t.NamespaceSelector = &metav1.LabelSelector{} // every namespace
		case g.chance(0.1):
			t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}
		case g.chance(0.05):
			t.Namespaces = []string{g.c.other}
		}
		switch {
		case g.chance(0.08):
			t.MatchLabelKeys = []string{"tier"}
		case g.chance(0.08):
			t.MismatchLabelKeys = []string{"tier"}
		}
		return t
	}
	// Required (sometimes) and preferred terms of one kind, each added to the summary.
	podTerms := func(kind string) (req []v1.PodAffinityTerm, pref []v1.WeightedPodAffinityTerm) {
		if g.chance(0.3) {
			t := term()
			req = append(req, t)
			sum = append(sum, "required"+kind+"="+podTermString(t))
		}
		for k := 0; k < 1+g.r.Intn(2); k++ {
			t := term()
			w := int32(1 + g.r.Intn(100))
			pref = append(pref, v1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: t})
			sum = append(sum, fmt.Sprintf("preferred%s(%d)=%s", kind, w, podTermString(t)))
		}
		return req, pref
	}
	if g.chance(0.35) {
		req, pref := podTerms("PodAffinity")
		aff.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}
	}
	if g.chance(0.35) {
		req, pref := podTerms("PodAntiAffinity")
		aff.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: req, PreferredDuringSchedulingIgnoredDuringExecution: pref}
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		spec.Affinity = aff
	}
	if g.chance(0.45) {
		for k := 0; k < 1+g.r.Intn(2); k++ {
			c := v1.TopologySpreadConstraint{
				MaxSkew:           int32(1 + g.r.Intn(3)),
				TopologyKey:       []string{zoneLabel, hostLabel}[g.r.Intn(2)],
				WhenUnsatisfiable: v1.ScheduleAnyway,
				LabelSelector:     g.selector(),
			}
			if g.chance(0.4) {
				c.WhenUnsatisfiable = v1.DoNotSchedule
				if g.chance(0.2) {
					md := int32(2 + g.r.Intn(4))
					c.MinDomains = &md
				}
			}
			if g.chance(0.2) {
				p := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}[g.r.Intn(2)]
				c.NodeAffinityPolicy = &p
			}
			if g.chance(0.15) {
				// The API server merges `tier In (<the pod's tier>)` into the selector when the pod has the label.
				c.MatchLabelKeys = []string{"tier"}
			}
			if g.chance(0.2) {
				p := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}[g.r.Intn(2)]
				c.NodeTaintsPolicy = &p
			}
			// Two constraints on the same key and effect are refused by the API server.
			dup := false
			for _, o := range spec.TopologySpreadConstraints {
				dup = dup || (o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable)
			}
			if dup {
				continue
			}
			spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
			sum = append(sum, spreadString(c))
		}
	}
	if g.chance(0.45) {
		for k := 0; k < 1+g.r.Intn(3); k++ {
			var t v1.Toleration
			switch g.r.Intn(7) {
			case 5:
				t = v1.Toleration{Operator: v1.TolerationOpExists}
			case 6:
				t = v1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}
			case 0:
				t = v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: g.pick(pools), Effect: v1.TaintEffectPreferNoSchedule}
			case 1:
				t = v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists}
			case 2:
				t = v1.Toleration{Key: "gpu", Operator: v1.TolerationOpEqual, Value: "true", Effect: v1.TaintEffectNoSchedule}
			case 3:
				t = v1.Toleration{Key: "spot", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}
			default:
				t = v1.Toleration{Key: "maintenance", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
			}
			spec.Tolerations = append(spec.Tolerations, t)
			sum = append(sum, fmt.Sprintf("toleration=%s%s%s:%s", t.Key, map[v1.TolerationOperator]string{v1.TolerationOpEqual: "=", v1.TolerationOpExists: " exists"}[t.Operator], t.Value, t.Effect))
		}
	}
	return probe{
		index:   i,
		pod:     &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: g.c.namespace, Labels: labels}, Spec: spec},
		summary: strings.Join(sum, ", "),
	}
}

func nodeSelectorString(terms []v1.NodeSelectorTerm) string {
	var ts []string
	for _, t := range terms {
		var rs []string
		for _, r := range append(append([]v1.NodeSelectorRequirement{}, t.MatchExpressions...), t.MatchFields...) {
			rs = append(rs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		ts = append(ts, strings.Join(rs, " & "))
	}
	return "(" + strings.Join(ts, ") | (") + ")"
}

func selectorString(s *metav1.LabelSelector) string {
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return "{}"
	}
	if len(s.MatchLabels) > 0 {
		return fmt.Sprintf("%v", s.MatchLabels)
	}
	var rs []string
	for _, r := range s.MatchExpressions {
		rs = append(rs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
	}
	return strings.Join(rs, " & ")
}

func podTermString(t v1.PodAffinityTerm) string {
	s := fmt.Sprintf("%s@%s", selectorString(t.LabelSelector), t.TopologyKey)
	if t.NamespaceSelector != nil {
		s += " namespaceSelector=" + selectorString(t.NamespaceSelector)
	}
	if len(t.Namespaces) > 0 {
		s += fmt.Sprintf(" namespaces=%v", t.Namespaces)
	}
	if len(t.MatchLabelKeys) > 0 {
		s += fmt.Sprintf(" matchLabelKeys=%v", t.MatchLabelKeys)
	}
	if len(t.MismatchLabelKeys) > 0 {
		s += fmt.Sprintf(" mismatchLabelKeys=%v", t.MismatchLabelKeys)
	}
	return s
}

func spreadString(c v1.TopologySpreadConstraint) string {
	s := fmt.Sprintf("spread(%s maxSkew=%d %s %s", c.WhenUnsatisfiable, c.MaxSkew, c.TopologyKey, selectorString(c.LabelSelector))
	if c.MinDomains != nil {
		s += fmt.Sprintf(" minDomains=%d", *c.MinDomains)
	}
	if c.NodeAffinityPolicy != nil {
		s += " nodeAffinityPolicy=" + string(*c.NodeAffinityPolicy)
	}
	if c.NodeTaintsPolicy != nil {
		s += " nodeTaintsPolicy=" + string(*c.NodeTaintsPolicy)
	}
	if len(c.MatchLabelKeys) > 0 {
		s += fmt.Sprintf(" matchLabelKeys=%v", c.MatchLabelKeys)
	}
	return s + ")"
}
