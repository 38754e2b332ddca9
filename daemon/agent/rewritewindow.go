package agent

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

// When calico-node's pod is replaced (each Calico upgrade, on every node),
// its install-cni writes Calico's conflist without capo-ipam, and the CNI
// manager puts capo back a moment later: a teardown read in between goes
// to plain calico-ipam, which frees the address at once. The replacement
// shows before install-cni runs (the old pod terminates, the new one is
// created with its init containers yet to run), so the agent holds, for
// the duration, the addresses of the node's selected running pods: a
// reservation of each, made before the rewrite. Once calico-node's new pod
// is initialized and capo is back in the conflist, it lets go of each hold
// whose address Calico still allocates to its pod's sandbox; a hold whose
// pod was torn down meanwhile stays, that teardown's reservation.

// DefaultCalicoNodeSelector picks calico-node's pods: the label both
// Calico's manifests and its operator give them.
const DefaultCalicoNodeSelector = "k8s-app=calico-node"

// successorGrace is how long, after a calico-node pod of this node is
// deleted, its successor is awaited before the window is taken as over:
// the DaemonSet creates it as soon as the old one is gone.
const successorGrace = 30 * time.Second

// rewriteWindow says whether calico-node is being replaced on this node:
// a calico-node pod terminating or not initialized, or one deleted within
// successorGrace with no successor yet.
type rewriteWindow struct {
	selector labels.Selector
	pods     func() []*corev1.Pod // this node's pods, from the cache
	now      func() time.Time

	mu   sync.Mutex
	gone time.Time // when a calico-node pod of this node was last deleted
	// seen: the last look found a calico-node pod on this node. The cache
	// drops a deleted pod before its handler is told (deleted), so a look
	// in between finds none: a pod seen, then absent, was deleted then.
	seen bool
}

// isCalicoNode says whether p is one of calico-node's pods.
func (w *rewriteWindow) isCalicoNode(p *corev1.Pod) bool {
	return p != nil && w.selector != nil && !w.selector.Empty() && w.selector.Matches(labels.Set(p.Labels))
}

// deleted notes a calico-node pod gone from this node.
func (w *rewriteWindow) deleted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gone = w.now()
}

// open reports whether calico-node is being replaced, and which pod says so.
func (w *rewriteWindow) open() (bool, string) {
	running, found, why := false, false, ""
	for _, p := range w.pods() {
		if !w.isCalicoNode(p) {
			continue
		}
		found = true
		switch {
		case p.DeletionTimestamp != nil:
			why = p.Namespace + "/" + p.Name + " terminating"
		case !initialized(p):
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
		w.gone = w.now() // seen before, gone now: deleted, its handler yet to tell
	}
	if !w.gone.IsZero() && w.now().Sub(w.gone) < successorGrace {
		return true, "a calico-node pod deleted, its successor awaited"
	}
	return false, ""
}

// initialized: the pod's init containers (install-cni among them) have
// all run, as its kubelet reports.
func initialized(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// holdEntries are the reservations that hold the addresses of this node's
// selected pods, each naming the sandbox that has them when an ADD record,
// or Calico's annotations, say which (sandboxOf): running ones, and apart
// (going) those being deleted or ended, whose teardown may yet run through
// the rewritten conflist and free their addresses with plain calico-ipam.
func holdEntries(c Cluster, pods []*corev1.Pod, selectors []selection.Selector, sandboxOf func(*corev1.Pod, string) string, now time.Time) (running, going []reserve.Entry) {
	for _, p := range pods {
		if p.Spec.HostNetwork {
			continue // the host's addresses
		}
		out := &running
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			out = &going
		}
		d := selection.Decide(selection.Of(c.Node()), selection.Of(c.Namespace(p.Namespace)), selection.Of(p), selectors)
		if d.Verdict != selection.Selected {
			continue
		}
		for _, ip := range runningIPs(p) {
			e := reserve.Entry{IP: ip, Namespace: p.Namespace, Pod: p.Name, Reason: reserve.ReasonCNIRewrite, ReservedAt: now.UTC(), Sandbox: sandboxOf(p, ip)}
			e.SetPod(p)
			*out = append(*out, e)
		}
	}
	return running, going
}

// runningIPs are a pod's addresses: its status's, and those Calico's
// annotation names (set before the status is).
func runningIPs(p *corev1.Pod) []string {
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
	for _, s := range strings.Split(p.Annotations[calicoPodIPs], ",") {
		add(s)
	}
	return out
}

// Calico's annotations on a pod (Kubernetes datastore): the sandbox it
// last set up, and that sandbox's addresses.
const (
	calicoContainerID = "cni.projectcalico.org/containerID"
	calicoPodIPs      = "cni.projectcalico.org/podIPs"
)

// annotatedSandbox is the sandbox Calico's annotations say holds ip, as
// entries keep it; "" when they do not say.
func annotatedSandbox(p *corev1.Pod, ip string) string {
	id := p.Annotations[calicoContainerID]
	for _, s := range strings.Split(p.Annotations[calicoPodIPs], ",") {
		if a, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && id != "" && a.Addr().Unmap().String() == ip {
			return reserve.SandboxOf(id)
		}
	}
	return ""
}
