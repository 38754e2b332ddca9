package apigroup

import (
	"context"
	"errors"
	"os"
	"slices"

	"k8s.io/client-go/discovery"
)

// Usable says whether capo can use Calico in m now: every type capo
// touches is served in m's group (list: the API server's discovery), this
// build can work in m, and the node's calico_api_group (netconf; "" off a
// node or unset), which calico-ipam reads on every call and an operator
// may switch while capo runs, names m's group. It is the one check: the
// daemons' gate runs it on the mode in force, capoctl and capo-install
// (Verify) on the mode they decide.
func Usable(list Resources, m Mode, netconf string) error {
	if err := served(list, m, All); err != nil {
		return err
	}
	if err := supported(m); err != nil {
		return err
	}
	return Agrees(m, netconf)
}

// Verify decides the group without keeping it (a CLI's one-off run) and
// says whether capo can use Calico there (Usable). It is what capoctl and
// capo-install check call before they read Calico. Where IPReservations
// are served in neither group, the error says so (NotServedError.NoCalico).
func Verify(ctx context.Context, disc discovery.DiscoveryInterface, etcd bool, netconf string) (Mode, error) {
	m, err := decide(ctx, inputs{Etcd: etcd, Env: os.Getenv(EnvGroup), Netconf: netconf, Groups: serverGroups(disc)})
	if err != nil {
		return m, err
	}
	err = Usable(disc.ServerResourcesForGroupVersion, m, netconf)
	if ns := new(NotServedError); errors.As(err, &ns) && slices.Contains(ns.Missing, IPReservation.Resource(m.Group)) {
		other := GroupV3
		if m.Group == GroupV3 {
			other = GroupV1
		}
		names, oerr := resourceNames(disc.ServerResourcesForGroupVersion, other)
		ns.NoCalico = oerr == nil && !names[IPReservation.Resource(other)]
	}
	return m, err
}

// Discovered is the group discovery alone gives (no CALICO_API_GROUP, no
// calico_api_group): the one calico-ipam uses when told neither.
func Discovered(ctx context.Context, disc discovery.DiscoveryInterface) (string, error) {
	m, err := decide(ctx, inputs{Groups: serverGroups(disc)})
	return m.Group, err
}
