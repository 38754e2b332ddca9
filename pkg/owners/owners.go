// Package owners names the controllers whose pods have stable identities
// (a member comes back under its name, "<owner>-<ordinal>"): apps/v1
// StatefulSet, OpenKruise's Advanced StatefulSet, and the kinds an
// operator lists in the config. It is pure: what a kind is called in a
// reservation, and which ordinals a set has.
package owners

import (
	"fmt"
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

// Validate reports what is wrong with a listed kind.
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
	return nil
}
