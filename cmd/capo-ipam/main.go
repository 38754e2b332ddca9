// Command capo-ipam is the CNI IPAM plugin Calico calls in place of
// calico-ipam; see package plugin.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/plugin"
)

func main() {
	about := "capo-ipam " + version.Version + ": Calico IPAM shim that reserves a selected pod's addresses before they are released"
	if e := skel.PluginMainFuncsWithError(plugin.Funcs(), plugin.SupportedVersions, about); e != nil {
		if e.Code == types.ErrDecodingFailure {
			// skel reads stdin before we do; say what the operator should look at.
			e.Msg = "capo-ipam: cannot read the netconf on stdin (" + e.Msg + "): the runtime passes the network config from the CNI conf dir, check that it is valid JSON"
		}
		_ = e.Print()
		os.Exit(1)
	}
}
