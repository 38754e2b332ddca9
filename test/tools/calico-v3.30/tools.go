//go:build tools

// Package calicov330 pins the previous Calico release's CNI plugin (v3.30.1,
// the only other release commit the Go module proxy serves), so the
// reserve path and the parity tests run against both releases' calico and
// calico-ipam binaries; capo itself keeps one libcalico-go.
//
// Everything but Calico's own code resolves to capo's versions (the module
// requires capo, replaced by this checkout): the release's CNI then reuses
// the packages capo's build compiled, and only Calico's are compiled anew.
package calicov330

import (
	_ "github.com/projectcalico/calico/cni-plugin/cmd/calico"

	// Only for its requirements (see above).
	_ "github.com/capo-net/capo/pkg/version"
)
