// This file is added to the harness's temporary copy of Calico's
// cni-plugin/internal/pkg/testutils (overlay.go): nothing of Calico's is
// changed on disk or committed. The harness rewrites the functions that
// hand a netconf to a plugin (RunIPAMPlugin, RunCNIPluginWithId,
// DeleteContainerWithIdAndIfaceName) to pass it through capoNetconf first.

package testutils

import (
	"os"

	"github.com/capo-net/capo/install"
)

// capoNetconf is the netconf a plugin receives in the harness's capo run:
// the calico plugin's ipam block wrapped for capo-ipam exactly as capo's
// installer wraps it on a node, the original block moved whole into
// "delegate". Like the installer, it wraps only calico-ipam: a netconf of
// host-local is left as it is.
func capoNetconf(netconf string) string {
	if os.Getenv("CAPO_CALICOSUITE_IPAM") != "capo-ipam" {
		return netconf
	}
	st, err := install.Inspect([]byte(netconf))
	if err != nil || st.Installed || st.IPAMType != "calico-ipam" {
		return netconf
	}
	extra := map[string]any{}
	if f := os.Getenv("CAPO_CALICOSUITE_IPAM_LOG"); f != "" {
		extra["log_file"] = f
	}
	out, err := install.Patch([]byte(netconf), extra)
	if err != nil {
		panic("capo's installer refused a netconf it inspected: " + err.Error())
	}
	return string(out)
}
