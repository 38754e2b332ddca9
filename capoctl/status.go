package capoctl

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// nodeStatus is one node's line of `capoctl status`.
type nodeStatus struct {
	Node            string   `json:"node"`
	OptedIn         bool     `json:"optedIn"`
	Agent           string   `json:"agent,omitempty"` // its pod
	Version         string   `json:"version,omitempty"`
	Ready           bool     `json:"ready"`                // the pod's Ready condition
	CanReserve      *bool    `json:"canReserve,omitempty"` // capo_agent_can_reserve
	NotReadyReason  string   `json:"notReadyReason,omitempty"`
	CapoIPAMInChain *bool    `json:"capoIPAMInChain,omitempty"`
	WireVersion     int      `json:"wireVersion,omitempty"`  // the agent's
	IPAMWire        []string `json:"capoIPAMWire,omitempty"` // what capo-ipam spoke to it
	JournalDepth    *int     `json:"journalDepth,omitempty"` // DELs journaled, not yet replayed
	Problems        []string `json:"problems,omitempty"`
	info            *nodeInfo
	metrics         []byte
	pod             *corev1.Pod
}

type leaderStatus struct {
	Lease   string     `json:"lease"`
	Holder  string     `json:"holder,omitempty"`
	Renewed *time.Time `json:"renewed,omitempty"`
	Valid   bool       `json:"valid"`
	Version string     `json:"version,omitempty"`
}

type calicoStatus struct {
	Version        string `json:"version,omitempty"`
	DatastoreReady bool   `json:"datastoreReady"`
	APIMode        string `json:"apiMode,omitempty"`
	// Unreadable are capo's IPReservations that do not read: skipped,
	// their addresses left reserved, until an operator fixes or deletes them.
	Unreadable []string `json:"unreadableReservations,omitempty"`
}

// report is `capoctl status`: fine only when nothing is wrong and
// everything could be read.
type report struct {
	OK       bool         `json:"ok"`
	Nodes    []nodeStatus `json:"nodes"`
	Leader   leaderStatus `json:"leader"`
	Calico   calicoStatus `json:"calico"`
	Problems []string     `json:"problems,omitempty"`
}

// collect reads the health of capo on every node: the opted-in nodes and
// the nodes with an agent pod; only those in only, when given.
func (c *cli) collect(lease string, only ...string) *report {
	r := &report{}
	nodes, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		r.Problems = append(r.Problems, "listing nodes: "+err.Error())
	}
	agents, err := c.pods(agentSelector)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	byNode := map[string]*corev1.Pod{}
	for i := range agents {
		p := &agents[i]
		if q := byNode[p.Spec.NodeName]; q == nil || !podReady(q) && podReady(p) {
			byNode[p.Spec.NodeName] = p
		}
	}
	seen := map[string]bool{}
	if nodes != nil {
		for i := range nodes.Items {
			n := &nodes.Items[i]
			opted := selection.NodeOptedIn(selection.Of(n))
			if opted || byNode[n.Name] != nil {
				r.Nodes = append(r.Nodes, c.nodeStatus(n.Name, opted, byNode[n.Name]))
				seen[n.Name] = true
			}
		}
	}
	for node, p := range byNode {
		if !seen[node] {
			r.Nodes = append(r.Nodes, c.nodeStatus(node, false, p))
		}
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Node < r.Nodes[j].Node })
	if len(only) > 0 {
		r.Nodes = slices.DeleteFunc(r.Nodes, func(n nodeStatus) bool { return !slices.Contains(only, n.Node) })
		for _, n := range only {
			if !slices.ContainsFunc(r.Nodes, func(s nodeStatus) bool { return s.Node == n }) {
				r.Problems = append(r.Problems, n+": not opted in, and no capo-agent pod runs there")
			}
		}
	} else if len(r.Nodes) == 0 {
		r.Problems = append(r.Problems, "no node is opted in and no capo-agent pod runs in "+c.capoNS+" (--capo-namespace?)")
	}
	r.Leader = c.leader(lease)
	if !r.Leader.Valid {
		r.Problems = append(r.Problems, "no capo-controller holds the Lease "+r.Leader.Lease+": nothing releases reservations or covers lost nodes")
	}
	r.Calico = c.calicoStatus(r)
	for _, n := range r.Nodes {
		for _, p := range n.Problems {
			r.Problems = append(r.Problems, n.Node+": "+p)
		}
	}
	r.OK = len(r.Problems) == 0
	return r
}

// nodeStatus reads one node's agent: its pod, /metrics and its node view.
func (c *cli) nodeStatus(node string, opted bool, p *corev1.Pod) nodeStatus {
	ns := nodeStatus{Node: node, OptedIn: opted}
	if p == nil {
		ns.Problems = append(ns.Problems, "opted in, but no capo-agent pod runs there: teardowns are left to capo-controller")
		return ns
	}
	ns.Agent, ns.Ready, ns.Version, ns.pod = p.Name, podReady(p), imageTag(p), p
	if !ns.Ready {
		ns.Problems = append(ns.Problems, "agent pod "+p.Name+" is not Ready")
	}
	if b, err := c.fromPod(p, "/metrics"); err != nil {
		ns.Problems = append(ns.Problems, "cannot read the agent's metrics: "+err.Error())
	} else {
		ns.metrics = b
		ns.fromMetrics(parseMetrics(b))
	}
	if b, err := c.fromPod(p, nodeInfoPath); err != nil {
		ns.Problems = append(ns.Problems, "cannot read the agent's view of the node (an agent older than capoctl?): "+err.Error())
	} else {
		ns.info = &nodeInfo{}
		if err := json.Unmarshal(b, ns.info); err != nil {
			ns.Problems = append(ns.Problems, "the agent's view of the node does not decode: "+err.Error())
		} else {
			ns.fromInfo()
		}
	}
	return ns
}

func (ns *nodeStatus) fromMetrics(ss []sample) {
	if v := buildVersion(ss); v != "" {
		ns.Version = v
	}
	if v, ok := metricValue(ss, "capo_agent_can_reserve", nil); ok {
		can := v == 1
		ns.CanReserve = &can
		if !can {
			for _, s := range ss {
				if s.name == "capo_agent_not_ready" && s.value == 1 {
					ns.NotReadyReason = s.labels["reason"]
				}
			}
			ns.Problems = append(ns.Problems, "the agent cannot reserve now ("+ns.NotReadyReason+")")
		}
	} else {
		ns.Problems = append(ns.Problems, "the agent's metrics lack capo_agent_can_reserve")
	}
	if v, ok := metricValue(ss, "capo_agent_journal_depth", nil); ok {
		d := int(v)
		ns.JournalDepth = &d
	}
	for _, s := range ss {
		if s.name == "capo_agent_wire_requests_total" && s.value > 0 && !slices.Contains(ns.IPAMWire, s.labels["version"]) {
			ns.IPAMWire = append(ns.IPAMWire, s.labels["version"])
			if s.labels["result"] == "refused" {
				ns.Problems = append(ns.Problems, "the agent refused capo-ipam's wire version "+s.labels["version"]+": an older or newer capo-ipam runs there")
			}
		}
	}
	slices.Sort(ns.IPAMWire)
}

func (ns *nodeStatus) fromInfo() {
	ns.WireVersion = ns.info.Wire
	if ns.info.Wire != 0 && ns.info.Wire < wire.Version {
		ns.Problems = append(ns.Problems, fmt.Sprintf("the agent speaks wire version %d, capoctl's release %d: an upgrade under way?", ns.info.Wire, wire.Version))
	}
	ns.CapoIPAMInChain = ns.info.CapoIPAMInChain
	switch {
	case ns.OptedIn && ns.CapoIPAMInChain == nil:
		ns.Problems = append(ns.Problems, "cannot tell whether capo-ipam is in the CNI chain (the agent runs without --manage-cni)")
	case ns.OptedIn && !*ns.CapoIPAMInChain:
		ns.Problems = append(ns.Problems, "opted in, but capo-ipam is not in the CNI chain of "+ns.info.RuntimeConf)
	}
	if d := max(len(ns.info.Journal), ns.info.JournalDepth); ns.JournalDepth == nil || d > *ns.JournalDepth {
		ns.JournalDepth = &d
	}
	if *ns.JournalDepth > 0 {
		ns.Problems = append(ns.Problems, strconv.Itoa(*ns.JournalDepth)+" teardowns journaled, not yet replayed")
	}
	for _, e := range ns.info.Errors {
		ns.Problems = append(ns.Problems, "agent: "+e)
	}
}

// leader is who holds capo-controller's Lease, and since when.
func (c *cli) leader(name string) leaderStatus {
	l := leaderStatus{Lease: c.capoNS + "/" + name}
	lease, err := c.kube.CoordinationV1().Leases(c.capoNS).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return l
	}
	if h := lease.Spec.HolderIdentity; h != nil {
		l.Holder = *h
	}
	if rt := lease.Spec.RenewTime; rt != nil {
		t := rt.Time
		l.Renewed = &t
		dur := 15 * time.Second
		if d := lease.Spec.LeaseDurationSeconds; d != nil {
			dur = time.Duration(*d) * time.Second
		}
		l.Valid = l.Holder != "" && c.now.Before(t.Add(dur))
	}
	if p, err := c.kube.CoreV1().Pods(c.capoNS).Get(c.ctx, l.Holder, metav1.GetOptions{}); err == nil && l.Holder != "" {
		l.Version = imageTag(p)
		if b, err := c.fromPod(p, "/metrics"); err == nil {
			if v := buildVersion(parseMetrics(b)); v != "" {
				l.Version = v
			}
		}
	}
	return l
}

func (c *cli) calicoStatus(r *report) calicoStatus {
	s := calicoStatus{APIMode: CalicoAPIMode(c.ctx, c.kube.Discovery())}
	if c.calico == nil {
		r.Problems = append(r.Problems, "Calico's datastore was not reached")
		return s
	}
	v, ready, err := c.calico.Version(c.ctx)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return s
	}
	s.Version, s.DatastoreReady = v, ready
	if !ready {
		r.Problems = append(r.Problems, "Calico says its datastore is not ready (ClusterInformation datastoreReady)")
	}
	s.Unreadable = c.unreadable(r)
	return s
}
