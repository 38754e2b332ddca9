//go:build tools

// Package calicov330 pins the previous Calico release's CNI plugin (v3.30.1,
// the only other release commit the Go module proxy serves), so the
// reserve path and the parity tests run against both releases' calico and
// calico-ipam binaries; capo itself keeps one libcalico-go.
package calicov330

import (
	_ "github.com/projectcalico/calico/cni-plugin/cmd/calico"
)
