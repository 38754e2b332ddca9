// Package wire is the one place the requests and responses between capo-ipam
// and capo-agent are defined; both sides import it. HTTP+JSON on a unix
// socket, bodies read through a size limit.
package wire

// DefaultSocket is where the agent listens on the host.
const DefaultSocket = "/var/run/capo/agent.sock"

// ReservePath is where a DEL asks the agent to reserve before releasing.
const ReservePath = "/v1/reserve"

// AnnotationsPath answers a pod's Calico IPAM annotations from the agent's
// caches, so capo-ipam's ADD need not read them from the API server.
const AnnotationsPath = "/v1/ipam-annotations"

// ReturnOutcomePath is where capo-ipam tells the agent how an offer of
// reserved addresses ended: given back, or refused by calico-ipam.
const ReturnOutcomePath = "/v1/return-outcome"

// MaxBodyBytes bounds every body either side reads.
const MaxBodyBytes = 64 << 10

// PodRef names a pod as the runtime's CNI_ARGS give it.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// ReserveRequest asks the agent to reserve a torn-down sandbox's addresses
// if its pod is selected.
type ReserveRequest struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	Network     string `json:"network"` // conflist name; Calico's handle is <network>.<containerID>
	Pod         PodRef `json:"pod"`
	// RecordedIPs are what capo-ipam saw the delegate assign at ADD, if it
	// recorded them; otherwise the agent reads Calico's handle.
	RecordedIPs []string `json:"recordedIPs,omitempty"`
	// AtAdd is the agent's decision when the sandbox was added, if capo-ipam
	// recorded one: what a DEL is decided on when the pod object is gone and
	// forgotten (a DEL journaled long ago, replayed by a new agent).
	AtAdd *Decision `json:"atAdd,omitempty"`
	// CalicoAPIGroup is the API group calico-ipam uses on this call, as
	// capo-ipam sees it: the calico plugin's calico_api_group in the
	// netconf, else CALICO_API_GROUP in the environment calico-ipam
	// inherits; "" when neither says (calico-ipam then decides by
	// discovery). The agent refuses to reserve in another group, where
	// calico-ipam would not read; capo-ipam then journals and keeps the
	// address. A capo-ipam before this field sends none, and an agent
	// before it ignores it.
	CalicoAPIGroup string `json:"calicoAPIGroup,omitempty"`
}

// Decision is whether a pod is selected, and the rule that says so.
type Decision struct {
	Selected bool   `json:"selected"`
	Rule     string `json:"rule,omitempty"`
	// Owner is the pod's controller when the decision was made at ADD: a
	// teardown decided after the pod object is gone still names the
	// StatefulSet whose member may get the address back.
	Owner *Owner `json:"owner,omitempty"`
}

// RecordedOwner is the pod's controller as recorded at ADD; ok is false
// when d, or its owner, is nil (reserve.Entry.SetOwner reads it).
func (d *Decision) RecordedOwner() (kind, name, uid string, ok bool) {
	if d == nil || d.Owner == nil {
		return "", "", "", false
	}
	return d.Owner.Kind, d.Owner.Name, d.Owner.UID, true
}

// Owner is a pod's controlling object.
type Owner struct {
	Kind string `json:"kind"` // as owners.Key names it: StatefulSet, StatefulSet.apps.kruise.io
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Handle is Calico's IPAM handle for the sandbox.
func (r *ReserveRequest) Handle() string { return r.Network + "." + r.ContainerID }

// Sandbox names a pod's network sandbox as the runtime's CNI call does.
type Sandbox struct {
	Network     string `json:"network"` // conflist name
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// Handle is Calico's IPAM handle for the sandbox.
func (s Sandbox) Handle() string { return s.Network + "." + s.ContainerID }

// Outcome tells capo-ipam the release may go ahead, and why.
type Outcome string

const (
	Reserved         Outcome = "reserved"
	NotSelected      Outcome = "not-selected"
	NodeNotOptedIn   Outcome = "node-not-opted-in"
	NothingToReserve Outcome = "nothing-to-reserve" // the handle holds no addresses (already released)
)

// ReserveResponse is the agent's answer; any of its outcomes means the
// delegate may release.
type ReserveResponse struct {
	Outcome Outcome  `json:"outcome"`
	IPs     []string `json:"ips,omitempty"`
	Rule    string   `json:"rule,omitempty"`
}

// ErrorResponse is sent with a non-200 status.
type ErrorResponse struct {
	Error string `json:"error"`
}

// AnnotationsRequest asks for the Calico IPAM annotations of a pod and of
// its namespace.
type AnnotationsRequest struct {
	Pod PodRef `json:"pod"`
	// Network is the netconf's name (Calico's handles are
	// <network>.<containerID>). The agent offers to free a predecessor's
	// allocation (Return.Reclaim) only to a capo-ipam that names it: one
	// that does not (capo 0.1.0) would not know the field, and gets the
	// refusal it always did.
	Network string `json:"network,omitempty"`
}

// AnnotationsResponse carries only the cni.projectcalico.org/ annotations,
// and whether the pod is selected as of this ADD (nil when the answer does
// not come from the agent).
type AnnotationsResponse struct {
	Namespace map[string]string `json:"namespace,omitempty"`
	Pod       map[string]string `json:"pod,omitempty"`
	Decision  *Decision         `json:"decision,omitempty"`
	// Return is set for a pod that may get reserved addresses back.
	Return *Return `json:"return,omitempty"`
}

// Return is the agent's answer for a returning StatefulSet pod: the
// addresses capo holds for it to request from the delegate, or why they
// are not offered.
type Return struct {
	// IPs, one per family, are to be requested all together or not at all.
	IPs []string `json:"ips,omitempty"`
	// Held are the addresses held for the pod when they are not offered;
	// Reason (a bounded word) and Why (a sentence) say why.
	Held   []string `json:"held,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Why    string   `json:"why,omitempty"`
	// Reclaim are allocations of IPs that capo-ipam frees first, by
	// calico-ipam's DEL for their sandbox: the member's own predecessor on
	// a node Kubernetes has declared lost, which will never run that DEL.
	// A capo-ipam that does not know the field requests IPs, calico-ipam
	// refuses them (still allocated), and the pod gets fresh addresses.
	Reclaim []Reclaim `json:"reclaim,omitempty"`
}

// Reclaim names a sandbox whose allocation capo-ipam frees before a return.
type Reclaim struct {
	ContainerID string `json:"containerID"` // CNI_CONTAINERID of calico-ipam's DEL; the handle is <network>.<containerID>
	Node        string `json:"node"`        // the lost node it was allocated on, for the log
}

// ReturnOutcome tells the agent how an offer ended: Returned (the pod has
// the addresses: their reservations end) or FellBack (calico-ipam would
// not assign them, the pod got fresh ones and the reservations stay).
type ReturnOutcome struct {
	Pod PodRef `json:"pod"`
	// Sandbox is the one that requested the addresses: the agent ends their
	// reservations only once Calico shows that sandbox's endpoint up with
	// them, so a sandbox whose set-up fails after IPAM leaves them reserved.
	Sandbox Sandbox  `json:"sandbox"`
	IPs     []string `json:"ips"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason,omitempty"`
	Why     string   `json:"why,omitempty"`
	// Reclaimed are the container IDs of the offer's Reclaim whose
	// allocations calico-ipam's DEL freed, whatever the outcome.
	Reclaimed []string `json:"reclaimed,omitempty"`
}

// Outcomes of an offer.
const (
	Returned = "returned"
	FellBack = "fell-back"
)

// KubeHelper is the program capo-ipam runs, from beside itself in CNI_PATH,
// to read a pod's Calico IPAM annotations from the API server when the agent
// cannot answer. It prints an AnnotationsResponse on stdout.
const KubeHelper = "capo-ipam-kube"
