package calicoapi

import "fmt"

// UnsupportedError is a mode this build cannot keep its promises in.
type UnsupportedError struct{ Mode Mode }

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("Calico keeps its resources in %s, but this capo build reads and writes Calico's IPAM only in %s (libcalico-go v3.31): "+
		"a reservation written there is never read by Calico, so capo refuses to run rather than let an address go to another pod; "+
		"run Calico with its crd.projectcalico.org/v1 CRDs (%s=%s), or a capo release that supports native %s CRDs",
		e.Mode, GroupV1, EnvGroup, GroupV1, GroupV3)
}

// Supported is nil when this build can work in m: on etcdv3 and in
// crd.projectcalico.org/v1. Native projectcalico.org/v3 needs every read
// of Calico's IPAM (handles, blocks, pools, affinities) in that group too,
// which libcalico-go v3.31 cannot do.
func Supported(m Mode) error {
	if m.Source != SourceEtcd && m.Group == GroupV3 {
		return &UnsupportedError{Mode: m}
	}
	return nil
}

// MismatchError is a node whose calico plugin is told another group than
// the one this process decided: calico-ipam there reads reservations only
// in its own group.
type MismatchError struct {
	Mode    Mode
	Netconf string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the calico plugin's calico_api_group on this node is %s, but this process uses %s: calico-ipam would not read what capo reserves; restart capo-agent (or align %s with the CNI config)",
		e.Netconf, e.Mode, EnvGroup)
}

// CheckNetconf is nil unless netconf (the node's calico_api_group now)
// names a group other than m's. On etcdv3, or with no key, it passes.
func CheckNetconf(m Mode, netconf string) error {
	if m.Source == SourceEtcd || netconf == "" {
		return nil
	}
	g, err := parseGroup(netconf)
	if err != nil {
		return fmt.Errorf("the calico plugin's calico_api_group in the CNI config: %w", err)
	}
	if g != m.Group {
		return &MismatchError{Mode: m, Netconf: g}
	}
	return nil
}
