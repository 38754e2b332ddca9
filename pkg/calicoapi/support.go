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
