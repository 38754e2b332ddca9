package apigroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
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
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("Calico resource types not served in API group %s: %s. capo would read them as empty and could free a held address, so it refuses to run; "+
		"install Calico's CRDs for that group, or set %s (or the calico plugin's calico_api_group) to the group Calico uses (%s or %s)",
		e.Group, strings.Join(e.Missing, ", "), EnvGroup, GroupV3, GroupV1)
}

// Resources lists the resources of one group/version, as the discovery
// client's ServerResourcesForGroupVersion does.
type Resources func(groupVersion string) (*metav1.APIResourceList, error)

// CheckServed returns a *NotServedError when any of kinds is not served in
// m's group, or the discovery error. It passes on etcdv3.
func CheckServed(_ context.Context, list Resources, m Mode, kinds []Kind) error {
	if m.Source == SourceEtcd {
		return nil
	}
	served := map[string]bool{}
	rl, err := list(m.Group)
	switch {
	case apierrors.IsNotFound(err):
		// the whole group is not served: every kind is missing
	case err != nil:
		return fmt.Errorf("checking that Calico's types are served in %s: %w", m.Group, err)
	default:
		for _, r := range rl.APIResources {
			served[r.Name] = true
		}
	}
	var missing []string
	for _, k := range kinds {
		if !served[k.Resource(m.Group)] {
			missing = append(missing, k.Resource(m.Group))
		}
	}
	if len(missing) > 0 {
		return &NotServedError{Group: m.Group, Missing: missing}
	}
	return nil
}

// IsNotServed tells a NotServedError from other failures.
func IsNotServed(err error) bool { return errors.As(err, new(*NotServedError)) }

// Verify decides the group without keeping it (a CLI's one-off run),
// then checks that kinds are served there and this build can work in it.
// It is what capoctl and capo-install check call before they read Calico.
func Verify(ctx context.Context, disc discovery.DiscoveryInterface, etcd bool, netconf string, kinds []Kind) (Mode, error) {
	m, err := Decide(ctx, Inputs{Etcd: etcd, Env: os.Getenv(EnvGroup), Netconf: netconf, Groups: serverGroups(disc)})
	if err != nil {
		return m, err
	}
	if err := CheckServed(ctx, disc.ServerResourcesForGroupVersion, m, kinds); err != nil {
		return m, err
	}
	return m, Supported(m)
}

// ErrNotChecked holds everything back until a gate's first check: a read
// in a group Calico does not use sees nothing, and a write is lost.
var ErrNotChecked = errors.New("the Calico API group in force has not been checked yet")
