// Package owners names the controllers whose pods have stable identities
// (a member comes back under its name, "<owner>-<ordinal>"): apps/v1
// StatefulSet, OpenKruise's Advanced StatefulSet, and the kinds an
// operator lists in the config. It is pure: what a kind is called in a
// reservation, and which ordinals a set has.
package owners

import (
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is an owner kind capo watches: its group, the version it is read
// in, its kind, and its resource (plural; found through discovery when "").
type Kind struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Kind     string `json:"kind"`
	Resource string `json:"resource,omitempty"`
}

// The kinds capo knows without being told.
var (
	AppsStatefulSet   = Kind{Group: "apps", Version: "v1", Kind: "StatefulSet", Resource: "statefulsets"}
	KruiseStatefulSet = Kind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "StatefulSet", Resource: "statefulsets"}
)

// Key is how a reservation names the kind (reserve.Entry.OwnerKind): the
// bare kind for Kubernetes' own groups (no dot: "", apps, batch), as every
// capo release has written it, and "<kind>.<group>" for any other (a
// custom resource's group always has a dot), so that Kruise's StatefulSet
// is never taken for apps/v1's. The version is not part of it: one object
// is served in every version of its group.
func Key(group, kind string) string {
	if !strings.Contains(group, ".") {
		return kind
	}
	return kind + "." + group
}

// Key is k's reservation name.
func (k Kind) Key() string { return Key(k.Group, k.Kind) }

// GroupVersion is what discovery is asked about.
func (k Kind) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: k.Group, Version: k.Version}
}

// String names k for people: "StatefulSet.apps.kruise.io/v1beta1".
func (k Kind) String() string {
	if k.Group == "" {
		return k.Kind + "/" + k.Version
	}
	return k.Kind + "." + k.Group + "/" + k.Version
}

// KeyOf is the reservation name of an owner reference's kind.
func KeyOf(ref metav1.OwnerReference) string {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ref.Kind // an unparsable apiVersion: judged by kind, as before
	}
	return Key(gv.Group, ref.Kind)
}

// Validate reports what is wrong with a listed kind. Each listed kind is a
// cluster-wide list and watch grant for capo-controller (the chart's RBAC),
// so only a named custom resource's kind is taken: never the core group
// (Secrets, ConfigMaps), a Kubernetes group, or a wildcard. Whether the
// kind is namespaced only the API server says: capo-controller asks it at
// start (daemon/controller, ownerkinds.go).
func (k Kind) Validate() error {
	switch {
	case k.Kind == "" || k.Version == "":
		return fmt.Errorf("ownerKinds entry %+v: kind and version are required", k)
	case k.Key() == AppsStatefulSet.Key() || k.Key() == KruiseStatefulSet.Key():
		return fmt.Errorf("ownerKinds entry %s: capo watches it without being told; remove it", k)
	case k.Key() == "ReplicaSet" || k.Key() == "Deployment":
		return fmt.Errorf("ownerKinds entry %s: its pods' names are generated, so none comes back under its name", k)
	case k.Resource != "" && strings.ToLower(k.Resource) != k.Resource:
		return fmt.Errorf("ownerKinds entry %s: resource %q must be the lower-case plural (as in RBAC)", k, k.Resource)
	}
	if why := k.groupProblem(); why != "" {
		return fmt.Errorf("ownerKinds entry %s: %s; list the group and kind of the custom resource that owns the pods, e.g. {group: apps.example.com, version: v1, kind: Broker, resource: brokers}", k, why)
	}
	if why := k.nameProblem(); why != "" {
		return fmt.Errorf("ownerKinds entry %s: %s", k, why)
	}
	return nil
}

// groupProblem says why k's group cannot hold a pod owner capo is told of.
func (k Kind) groupProblem() string {
	switch g := k.Group; {
	case strings.Contains(g, "*"):
		return "a wildcard would grant capo-controller list and watch on every group"
	case g == "":
		return "the core group (Secret, ConfigMap, Pod) has no owner of pods with stable names, and a grant there reads them cluster-wide"
	case g == "k8s.io" || strings.HasSuffix(g, ".k8s.io") || !strings.Contains(g, "."):
		return fmt.Sprintf("group %q is one of Kubernetes' own, whose pod owners capo knows (StatefulSet) or that never keep a pod's name", g)
	case !dnsSubdomain.MatchString(g):
		return fmt.Sprintf("group %q is not a DNS subdomain", g)
	}
	return ""
}

// nameProblem says what is wrong with k's kind, version and resource as
// names: a wildcard, or not what the API server takes.
func (k Kind) nameProblem() string {
	switch {
	case strings.Contains(k.Kind+k.Version+k.Resource, "*"):
		return "a wildcard would grant capo-controller list and watch on every kind; name one"
	case !kindName.MatchString(k.Kind):
		return fmt.Sprintf("kind %q is not a kind's name (CamelCase, e.g. Broker)", k.Kind)
	case !dnsLabel.MatchString(k.Version):
		return fmt.Sprintf("version %q is not an API version (e.g. v1, v1beta1)", k.Version)
	case k.Resource != "" && !dnsLabel.MatchString(k.Resource):
		return fmt.Sprintf("resource %q is not a resource's plural name (e.g. brokers)", k.Resource)
	}
	return ""
}

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
	dnsLabel     = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	kindName     = regexp.MustCompile(`^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$`)
)
