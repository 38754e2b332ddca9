package controller

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/owners"
)

// A member's owner is looked up in the member's own namespace
// (release.OwnerKey), as Kubernetes' garbage collector does for a
// namespaced owner. A cluster-scoped kind's objects have no namespace, so
// every member of one would look owner-gone on the first pass and lose
// its reservation: such a kind is refused, at start and whenever its
// watch would start. Its members' reservations then end by their time
// only, as for any kind capo cannot watch. The static rules (a named
// custom resource's group and kind, no wildcard) are owners.Kind.Validate,
// in the config.

// scopeError is why r, the resource that serves listed kind k, cannot be
// an owner capo watches: nil when it is namespaced.
func scopeError(k owners.Kind, r metav1.APIResource) error {
	if r.Namespaced {
		return nil
	}
	return fmt.Errorf("ownerKinds entry %s: %s is cluster-scoped, and capo looks a pod's owner up in the pod's namespace: every member would look owner-gone. A pod's owner with stable member names is namespaced; remove the entry from ownerKinds (the chart's config.ownerKinds)", k, r.Name)
}

// checkOwnerKinds asks the API server, at start, the scope of each listed
// kind it serves, and gives an error for each cluster-scoped one. The
// controller runs on without them: stopping it would stop the covering of
// lost nodes too. A kind not served yet is checked when its watch starts
// (resourceOf).
func checkOwnerKinds(ws *ownerWatches, listed []owners.Kind) []error {
	if ws == nil {
		return nil
	}
	var errs []error
	for _, k := range listed {
		list, err := ws.clients.Discovery.ServerResourcesForGroupVersion(k.GroupVersion().String())
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Kind == k.Kind && !strings.Contains(r.Name, "/") && (k.Resource == "" || r.Name == k.Resource) {
				if err := scopeError(k, r); err != nil {
					errs = append(errs, err)
				}
				break
			}
		}
	}
	return errs
}
