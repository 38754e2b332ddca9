package apigroup

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is a Calico resource type capo reads or writes, with its resource
// name in each group: only IPAMConfig's differs.
type Kind struct {
	Name   string // v3 kind, as operators know it
	V1, V3 string // resource names
}

// The types capo touches. Every component checks the ones it uses.
var (
	IPReservation      = Kind{"IPReservation", "ipreservations", "ipreservations"}
	IPAMBlock          = Kind{"IPAMBlock", "ipamblocks", "ipamblocks"}
	IPAMHandle         = Kind{"IPAMHandle", "ipamhandles", "ipamhandles"}
	IPPool             = Kind{"IPPool", "ippools", "ippools"}
	IPAMConfiguration  = Kind{"IPAMConfiguration", "ipamconfigs", "ipamconfigurations"}
	BlockAffinity      = Kind{"BlockAffinity", "blockaffinities", "blockaffinities"}
	ClusterInformation = Kind{"ClusterInformation", "clusterinformations", "clusterinformations"}
)

// All is every type capo touches: what the agent, the controller and
// capo-install check require.
var All = []Kind{IPReservation, IPAMBlock, IPAMHandle, IPPool, IPAMConfiguration, BlockAffinity, ClusterInformation}

// Resource is k's resource name in group.
func (k Kind) Resource(group string) string {
	if group == GroupV3 {
		return k.V3
	}
	return k.V1
}

// NotServedError says which of capo's Calico types the API server does not
// serve in the group in force.
type NotServedError struct {
	Group   string
	Missing []string // resource names
	// NoCalico: IPReservations are served in neither group, so this is not
	// Calico's cluster, or Calico is not installed (Verify tells).
	NoCalico bool
}

func (e *NotServedError) Error() string {
	msg := fmt.Sprintf("Calico resource types not served in API group %s: %s. capo would read them as empty and could free a held address, so it refuses to run; "+
		"install Calico's CRDs for that group, or set %s (or the calico plugin's calico_api_group) to the group Calico uses (%s or %s)",
		e.Group, strings.Join(e.Missing, ", "), EnvGroup, GroupV3, GroupV1)
	if e.NoCalico {
		msg += fmt.Sprintf(". The API server does not serve Calico's IPReservation type (ipreservations) in %s or %s: is this the cluster Calico runs in (--context, --kubeconfig), and is Calico installed? For an etcd datastore, set DATASTORE_TYPE=etcdv3", GroupV1, GroupV3)
	}
	return msg
}

// IsNotServed tells a NotServedError from other failures.
func IsNotServed(err error) bool { return errors.As(err, new(*NotServedError)) }

// Resources lists the resources of one group/version, as the discovery
// client's ServerResourcesForGroupVersion does.
type Resources func(groupVersion string) (*metav1.APIResourceList, error)

// served returns a *NotServedError when any of kinds is not served in
// m's group, or the discovery error. It passes on etcdv3.
func served(list Resources, m Mode, kinds []Kind) error {
	if m.Source == SourceEtcd {
		return nil
	}
	names, err := resourceNames(list, m.Group)
	if err != nil {
		return fmt.Errorf("checking that Calico's types are served in %s: %w", m.Group, err)
	}
	var missing []string
	for _, k := range kinds {
		if !names[k.Resource(m.Group)] {
			missing = append(missing, k.Resource(m.Group))
		}
	}
	if len(missing) > 0 {
		return &NotServedError{Group: m.Group, Missing: missing}
	}
	return nil
}

// resourceNames are the resources served in group; none when the whole
// group is not served.
func resourceNames(list Resources, group string) (map[string]bool, error) {
	names := map[string]bool{}
	rl, err := list(group)
	switch {
	case apierrors.IsNotFound(err):
		return names, nil
	case err != nil:
		return nil, err
	}
	for _, r := range rl.APIResources {
		names[r.Name] = true
	}
	return names, nil
}
