// Package selection decides whether a pod's addresses are reserved when its
// sandbox is torn down. It is pure: facts in, a decision and its reason out.
package selection

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// NodeAnnotation set to "enabled" on a Node opts the node in: the agent
	// installs capo-ipam there and reserves for its selected pods.
	NodeAnnotation = "capo.io/ip-reserve"
	// PodAnnotation "enabled" selects a pod on an opted-in node whatever its
	// namespace; "disabled" opts it out.
	PodAnnotation = "capo.io/ip-reserve"
	// NamespaceLabel is Capo's: ip-reserve=enabled makes a namespace's pods
	// candidates, selected when they match a configured pod selector.
	NamespaceLabel = "ip-reserve"

	Enabled  = "enabled"
	Disabled = "disabled"
)

// Verdict is what the decision means for the teardown. (What capo-ipam is
// told back, wire.Outcome, has more cases: what was actually written.)
type Verdict string

const (
	Selected       Verdict = "selected"
	NotSelected    Verdict = "not-selected"
	NodeNotOptedIn Verdict = "node-not-opted-in"
)

// Object is the labels and annotations of a Node, Namespace or Pod; nil means
// the object is not known.
type Object struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Decision is an outcome and the rule that produced it, in words an
// operator can act on.
type Decision struct {
	Verdict Verdict
	Rule    string
}

// Selector is a named pod selector from the config; any one matching selects.
type Selector struct {
	Name     string
	Selector labels.Selector
}

// NodeOptInLabel opts a node in like the annotation, and lets pods that
// must not land on opted-in nodes (fixed-address pods) say so with node
// affinity.
const NodeOptInLabel = "capo.io/ip-reserve"

// NodeOptedIn reports whether a node's annotation or label opts it in.
func NodeOptedIn(node *Object) bool {
	return node != nil && (node.Annotations[NodeAnnotation] == Enabled || node.Labels[NodeOptInLabel] == Enabled)
}

// Calico's fixed-address annotations: the calico plugin rejects pods that
// carry them unless its ipam type is literally calico-ipam.
const (
	AnnotationIPAddrs       = "cni.projectcalico.org/ipAddrs"
	AnnotationIPAddrsNoIPAM = "cni.projectcalico.org/ipAddrsNoIpam"
)

// FixedAddress names the fixed-address annotation a pod carries, or "".
func FixedAddress(pod *Object) string {
	if pod == nil {
		return ""
	}
	for _, k := range []string{AnnotationIPAddrs, AnnotationIPAddrsNoIPAM} {
		if pod.Annotations[k] != "" {
			return k
		}
	}
	return ""
}

// Decide applies the rules in order: node opt-in, unknown pod, pod
// annotation, namespace label with pod selectors.
func Decide(node, namespace, pod *Object, selectors []Selector) Decision {
	if !NodeOptedIn(node) {
		return Decision{NodeNotOptedIn, fmt.Sprintf("node lacks annotation or label %s=%s", NodeAnnotation, Enabled)}
	}
	if pod == nil {
		// A missed reservation breaks clients; a needless one costs one
		// address for one TTL. When in doubt, reserve.
		return Decision{Selected, "pod object unknown (deleted before the agent saw it): reserving to be safe"}
	}
	switch pod.Annotations[PodAnnotation] {
	case Enabled:
		return Decision{Selected, fmt.Sprintf("pod annotation %s=%s", PodAnnotation, Enabled)}
	case Disabled:
		return Decision{NotSelected, fmt.Sprintf("pod annotation %s=%s", PodAnnotation, Disabled)}
	}
	if namespace != nil && namespace.Labels[NamespaceLabel] != Enabled {
		return Decision{NotSelected, fmt.Sprintf("namespace lacks label %s=%s and pod lacks annotation %s=%s", NamespaceLabel, Enabled, PodAnnotation, Enabled)}
	}
	set := labels.Set(pod.Labels)
	for _, s := range selectors {
		if s.Selector.Matches(set) {
			if namespace == nil {
				return Decision{Selected, fmt.Sprintf("pod matches selector %s; namespace unknown, reserving to be safe", s.Name)}
			}
			return Decision{Selected, fmt.Sprintf("namespace label %s=%s and pod matches selector %s", NamespaceLabel, Enabled, s.Name)}
		}
	}
	return Decision{NotSelected, "pod matches no configured pod selector"}
}

// Of is the selection view of a Node, Namespace or Pod; nil stays nil
// (unknown), which Decide treats with care.
func Of[T any, P interface {
	*T
	metav1.Object
}](p P) *Object {
	if p == nil {
		return nil
	}
	return &Object{Labels: p.GetLabels(), Annotations: p.GetAnnotations()}
}
