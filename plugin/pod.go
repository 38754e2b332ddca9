package plugin

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/capo-net/capo/pkg/wire"
)

// k8sArgs are the CNI_ARGS the kubelet's runtime sets.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE types.UnmarshallableString //nolint:revive // names fixed by the runtime
	K8S_POD_NAME      types.UnmarshallableString //nolint:revive // names fixed by the runtime
	K8S_POD_UID       types.UnmarshallableString //nolint:revive // names fixed by the runtime
}

// podOf names the pod from the runtime's CNI_ARGS.
func podOf(args *skel.CmdArgs) (wire.PodRef, error) {
	var ka k8sArgs
	if err := types.LoadArgs(args.Args, &ka); err != nil {
		return wire.PodRef{}, fmt.Errorf("reading CNI_ARGS %q: %w", args.Args, err)
	}
	return wire.PodRef{Namespace: string(ka.K8S_POD_NAMESPACE), Name: string(ka.K8S_POD_NAME), UID: string(ka.K8S_POD_UID)}, nil
}
