package reserve

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/owners"
)

// Reasons an address was reserved.
const (
	ReasonCNIDel   = "cni-del"
	ReasonNodeLost = "node-lost"
	// ReasonCNIRewrite: held by the node's agent while calico-node's pod
	// was replaced (its install-cni writes the CNI config without
	// capo-ipam); kept only if the pod was torn down meanwhile.
	ReasonCNIRewrite = "cni-rewrite"
	// ReasonCapo: taken over from Capo's (xdfdotcn/capo) reservations by
	// capoctl adopt-capo, with Capo's reservation time.
	ReasonCapo = "capo-adopted"
)

// Entry is one reserved address and why.
type Entry struct {
	IP         string // canonical (NormalizeAddr); a wider CIDR added by hand stays a CIDR
	Node       string // the node whose teardown reserved it; "" for a CIDR added by hand
	Namespace  string
	Pod        string
	PodUID     string
	Reason     string
	ReservedAt time.Time // by the writer's clock (an agent's)
	// Seen is when capo-controller first saw the entry, by its own clock:
	// one clock judges every entry's age. Zero until the controller stamps it.
	Seen      time.Time
	OwnerKind string // the pod's controller's kind as owners.Key names it: StatefulSet, StatefulSet.apps.kruise.io
	OwnerName string
	OwnerUID  string
	// Sandbox is the torn-down sandbox's container ID, shortened
	// (SandboxOf): it tells the allocation the reservation was made for
	// from the one a returning pod got since. "" when not known (written
	// by capo-controller for a lost node, or by an older capo).
	Sandbox string
}

// sandboxDigits is how much of a container ID an entry keeps: enough that
// two sandboxes of one pod never share it, little enough that the records
// Calico reads on every ADD stay small.
const sandboxDigits = 16

// SandboxOf is a container ID as entries keep it.
func SandboxOf(containerID string) string {
	if len(containerID) > sandboxDigits {
		return containerID[:sandboxDigits]
	}
	return containerID
}

// IsSandbox reports whether a Calico handle ("<network>.<container ID>")
// is the sandbox the entry was reserved for. Unknown is no.
func (e Entry) IsSandbox(handle string) bool {
	i := strings.LastIndexByte(handle, '.')
	return e.Sandbox != "" && i >= 0 && SandboxOf(handle[i+1:]) == e.Sandbox
}

// SetPod fills what the pod object tells: its UID and its controller.
func (e *Entry) SetPod(p *corev1.Pod) {
	if p == nil {
		return
	}
	e.PodUID = string(p.UID)
	if ref := metav1.GetControllerOf(p); ref != nil {
		e.OwnerKind, e.OwnerName, e.OwnerUID = owners.KeyOf(*ref), ref.Name, string(ref.UID)
	}
}

// SetOwnerOf fills the controller of p, the pod that now has the torn-down
// pod's name, for a teardown whose own pod object is gone and whose ADD
// recorded no owner (the agent was away then): a StatefulSet's member is
// named for its set, so the set's reservation time and returns apply. The
// pod UID stays the torn-down pod's.
func (e *Entry) SetOwnerOf(p *corev1.Pod) {
	if p == nil || e.OwnerUID != "" {
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		e.OwnerKind, e.OwnerName, e.OwnerUID = owners.KeyOf(*ref), ref.Name, string(ref.UID)
	}
}

// OwnerRecord is what a teardown's pod had for its controller when
// capo-ipam's ADD asked the agent: a wire.Decision. ok is false when
// nothing was recorded.
type OwnerRecord interface {
	RecordedOwner() (kind, name, uid string, ok bool)
}

// SetOwner fills the pod's controller from the decision capo-ipam recorded
// at ADD, for a teardown whose pod object is gone: a StatefulSet's next
// member still finds the address held for it.
func (e *Entry) SetOwner(at OwnerRecord) {
	if at == nil || e.OwnerUID != "" {
		return
	}
	if kind, name, uid, ok := at.RecordedOwner(); ok {
		e.OwnerKind, e.OwnerName, e.OwnerUID = kind, name, uid
	}
}
