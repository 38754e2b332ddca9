package plugin

import (
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/wire"
)

// podKeys are the CNI_ARGS capo-ipam reads: the pod the kubelet's runtime
// names. Every other pair is the delegate's to judge.
var podKeys = map[string]bool{"K8S_POD_NAMESPACE": true, "K8S_POD_NAME": true, "K8S_POD_UID": true}

// podOf names the pod from the runtime's CNI_ARGS. It reads them at least
// as leniently as calico-ipam does: a key capo-ipam does not read (IP=,
// K8S_POD_INFRA_CONTAINER_ID=, CNI_TEST_NAMESPACE=, ...) is passed over
// whether or not IgnoreUnknown is set, and so is a pair it cannot split,
// since calico-ipam, which sees the same CNI_ARGS, accepts or refuses them
// itself. A DEL that capo-ipam failed where calico-ipam would have
// succeeded would block a teardown. Only a pod key with no value or with
// another "=" in it fails: its pod cannot be named for sure, and
// calico-ipam refuses such a pair too.
func podOf(args *skel.CmdArgs) (wire.PodRef, error) {
	var pod wire.PodRef
	for _, pair := range strings.Split(args.Args, ";") {
		key, value, ok := strings.Cut(pair, "=")
		if !podKeys[key] {
			continue
		}
		if !ok || strings.Contains(value, "=") {
			return wire.PodRef{}, fmt.Errorf("reading CNI_ARGS %q: %q is not one KEY=VALUE pair; the runtime must send K8S_POD_* values without \"=\" or \";\"", args.Args, pair)
		}
		switch key {
		case "K8S_POD_NAMESPACE":
			pod.Namespace = value
		case "K8S_POD_NAME":
			pod.Name = value
		case "K8S_POD_UID":
			pod.UID = value
		}
	}
	return pod, nil
}
