package agent

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
)

// heldIndex remembers this node's reservations, from every read of them
// (every 30 s) and every one this agent writes or ends, so that a pod's ADD
// reads none: a candidate with nothing held costs a map lookup, and one
// with something held starts at once on what Calico says of it. A stale
// miss (written by capo-controller since the last read) only means a fresh
// address; a stale hit (released since) is checked against Calico's
// allocations like any other, so a free old address still comes back.
type heldIndex struct {
	node string
	mu   sync.Mutex
	byIP map[string]reserve.Entry
	ids  map[string]bool
}

func newHeldIndex(node string) *heldIndex {
	return &heldIndex{node: node, byIP: map[string]reserve.Entry{}, ids: map[string]bool{}}
}

// identities are the keys an entry or a pod is known by: its pod UID, and
// its name when it has a controller. The name is not tied to the
// controller's UID: the index may be 30 s behind the controller handing a
// re-created StatefulSet its members' reservations, and only spares reads
// (returns.Held decides on a fresh one).
func identities(namespace, name, podUID, ownerUID string) []string {
	var ids []string
	if podUID != "" {
		ids = append(ids, "uid/"+podUID)
	}
	if ownerUID != "" {
		ids = append(ids, "name/"+namespace+"/"+name)
	}
	return ids
}

func (h *heldIndex) has(pod *corev1.Pod) bool {
	var owner string
	if ref := metav1.GetControllerOf(pod); ref != nil {
		owner = string(ref.UID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range identities(pod.Namespace, pod.Name, string(pod.UID), owner) {
		if h.ids[id] {
			return true
		}
	}
	return false
}

// entries are the reservations the index knows.
func (h *heldIndex) entries() []reserve.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]reserve.Entry, 0, len(h.byIP))
	for _, e := range h.byIP {
		out = append(out, e)
	}
	return out
}

// replace sets the index to what a read of the node's reservations found.
func (h *heldIndex) replace(es []reserve.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byIP = make(map[string]reserve.Entry, len(es))
	h.addLocked(es)
}

// add notes reservations this agent wrote.
func (h *heldIndex) add(es []reserve.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addLocked(es)
}

// addLocked keys entries as the store does: addresses normalised, held
// for the index's node (an entry being written has no node yet).
func (h *heldIndex) addLocked(es []reserve.Entry) {
	for _, e := range es {
		if ip, err := reserve.NormalizeAddr(e.IP); err == nil {
			e.IP = ip
		}
		e.Node = h.node
		h.byIP[e.IP] = e
	}
	h.reindex()
}

// remove forgets reservations this agent ended.
func (h *heldIndex) remove(ips []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ip := range ips {
		delete(h.byIP, ip)
	}
	h.reindex()
}

func (h *heldIndex) reindex() {
	h.ids = make(map[string]bool, 2*len(h.byIP))
	for _, e := range h.byIP {
		for _, id := range identities(e.Namespace, e.Pod, e.PodUID, e.OwnerUID) {
			h.ids[id] = true
		}
	}
}

// namespaceOf is the namespace Calico's pool selectors judge: its labels and
// annotations are all the agent caches of it, and all they read.
func namespaceOf(m *metav1.PartialObjectMetadata) *corev1.Namespace {
	if m == nil {
		return nil
	}
	return &corev1.Namespace{ObjectMeta: m.ObjectMeta}
}
