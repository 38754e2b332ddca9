// Package caliconode tells when calico-node's pod is being replaced on a
// node, and what to hold meanwhile.
//
// When calico-node's pod is replaced (each Calico upgrade, on every node),
// its install-cni writes Calico's conflist without capo-ipam, and capo-agent
// puts capo back a moment later: a teardown read in between goes to plain
// calico-ipam, which frees the address at once. The replacement shows
// before install-cni runs (the old pod terminates, the new one is created
// with its init containers yet to run), so the node's selected running
// pods' addresses are held for the duration: a reservation of each
// (reserve.ReasonCNIRewrite), made before the rewrite. The node's agent
// holds them, or capo-controller while that agent is away; the agent lets
// go, once capo is back in the conflist, of each hold whose address Calico
// still allocates to its pod's sandbox. A hold whose pod was torn down
// meanwhile stays, that teardown's reservation.
package caliconode

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// DefaultSelector picks calico-node's pods: the label both Calico's
// manifests and its operator give them.
const DefaultSelector = "k8s-app=calico-node"

// SuccessorGrace is how long, after a calico-node pod of a node is
// deleted, its successor is awaited before the window is taken as over:
// the DaemonSet creates it as soon as the old one is gone.
const SuccessorGrace = 30 * time.Second

// Window says whether calico-node is being replaced on one node: a
// calico-node pod terminating or not initialized, or one deleted within
// SuccessorGrace with no successor yet.
type Window struct {
	Selector labels.Selector
	Pods     func() []*corev1.Pod // the node's pods, from a cache
	Now      func() time.Time

	mu   sync.Mutex
	gone time.Time // when a calico-node pod of the node was last deleted
	// seen: the last look found a calico-node pod on the node. A cache
	// drops a deleted pod before its handler is told (Deleted), so a look
	// in between finds none: a pod seen, then absent, was deleted then.
	seen bool
}

// IsCalicoNode says whether p is one of calico-node's pods.
func (w *Window) IsCalicoNode(p *corev1.Pod) bool {
	return p != nil && w.Selector != nil && !w.Selector.Empty() && w.Selector.Matches(labels.Set(p.Labels))
}

// Deleted notes a calico-node pod gone from the node.
func (w *Window) Deleted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone = w.Now()
}

// Open reports whether calico-node is being replaced, and which pod says so.
func (w *Window) Open() (bool, string) {
	running, found, why := false, false, ""
	for _, p := range w.Pods() {
		if !w.IsCalicoNode(p) {
			continue
		}
		found = true
		switch {
		case p.DeletionTimestamp != nil:
			why = p.Namespace + "/" + p.Name + " terminating"
		case !Initialized(p):
			why = p.Namespace + "/" + p.Name + " not initialized (install-cni to run)"
		default:
			running = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = found
	switch {
	case why != "":
		return true, why
	case running:
		w.gone = time.Time{} // the successor runs
	case seen && w.gone.IsZero():
		w.gone = w.Now() // seen before, gone now: deleted, its handler yet to tell
	}
	if !w.gone.IsZero() && w.Now().Sub(w.gone) < SuccessorGrace {
		return true, "a calico-node pod deleted, its successor awaited"
	}
	return false, ""
}

// Initialized: the pod's init containers (install-cni among them) have
// all run, as its kubelet reports.
func Initialized(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Selection is what decides whether a node's pods are selected: the node,
// and each namespace by name (nil: unknown).
type Selection struct {
	Node      *selection.Object
	Namespace func(name string) *selection.Object
	Selectors []selection.Selector
}

// HoldEntries are the reservations that hold the addresses of a node's
// selected pods, each naming the sandbox that has them where sandboxOf
// can tell: running ones, and apart (going) those being deleted or ended,
// whose teardown may yet run through the rewritten conflist and free their
// addresses with plain calico-ipam.
func HoldEntries(sel Selection, pods []*corev1.Pod, sandboxOf func(*corev1.Pod, string) string, now time.Time) (running, going []reserve.Entry) {
	for _, p := range pods {
		if p.Spec.HostNetwork {
			continue // the host's addresses
		}
		out := &running
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			out = &going
		}
		d := selection.Decide(sel.Node, sel.Namespace(p.Namespace), selection.Of(p), sel.Selectors)
		if d.Verdict != selection.Selected {
			continue
		}
		for _, ip := range RunningIPs(p) {
			e := reserve.Entry{IP: ip, Namespace: p.Namespace, Pod: p.Name, Reason: reserve.ReasonCNIRewrite, ReservedAt: now.UTC(), Sandbox: sandboxOf(p, ip)}
			e.SetPod(p)
			*out = append(*out, e)
		}
	}
	return running, going
}

// RunningIPs are a pod's addresses: its status's, and those Calico's
// annotation names (set before the status is).
func RunningIPs(p *corev1.Pod) []string {
	var out []string
	add := func(s string) {
		if a, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && a.IsSingleIP() {
			s = a.Addr().String()
		}
		if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(out, ip.Unmap().String()) {
			out = append(out, ip.Unmap().String())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	for _, s := range strings.Split(p.Annotations[PodIPsAnnotation], ",") {
		add(s)
	}
	return out
}

// Calico's annotations on a pod (Kubernetes datastore; the etcdv3 datastore
// keeps them in its workload endpoints, and pods carry neither): the
// sandbox it last set up, and that sandbox's addresses.
const (
	ContainerIDAnnotation = "cni.projectcalico.org/containerID"
	PodIPsAnnotation      = "cni.projectcalico.org/podIPs"
	PodIPAnnotation       = "cni.projectcalico.org/podIP"
)

// Sandbox is the sandbox Calico's annotations on p say held ip, shortened
// as entries keep it; "" when they do not say so (no annotations, or they
// already name a newer sandbox with other addresses).
func Sandbox(p *corev1.Pod, ip netip.Addr) string {
	id := p.Annotations[ContainerIDAnnotation]
	if id == "" {
		return ""
	}
	for _, s := range strings.Split(p.Annotations[PodIPsAnnotation]+","+p.Annotations[PodIPAnnotation], ",") {
		if pfx, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && pfx.Addr().Unmap() == ip.Unmap() {
			return reserve.SandboxOf(id)
		}
	}
	return ""
}
