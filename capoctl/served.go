package capoctl

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// reservationGroups are where Calico serves IPReservations: its CRDs, or
// the projectcalico.org/v3 API (Calico's API server, or v3 CRDs).
var reservationGroups = []string{"crd.projectcalico.org/v1", "projectcalico.org/v3"}

// servesReservations says whether the cluster serves Calico's
// IPReservation type in any of reservationGroups, and if not, what it
// answered.
func servesReservations(d discovery.DiscoveryInterface, host string) error {
	var errs []error
	for _, gv := range reservationGroups {
		list, err := d.ServerResourcesForGroupVersion(gv)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s: %w", gv, err))
			}
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == "ipreservations" {
				return nil
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot tell whether %s serves Calico's IPReservation type: %w", host, errors.Join(errs...))
	}
	return fmt.Errorf("%s does not serve Calico's IPReservation type (ipreservations in %s): is this the cluster Calico runs in (--context, --kubeconfig), and is Calico installed? For an etcd datastore, set DATASTORE_TYPE=etcdv3", host, reservationGroups)
}
