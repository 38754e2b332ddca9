package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/names"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/wire"
)

// sandboxState is how far a sandbox that got addresses back has come, as
// Calico tells it.
type sandboxState int

const (
	// sandboxSettingUp: IPAM assigned the addresses, but the calico plugin
	// has not yet written the sandbox's endpoint with them.
	sandboxSettingUp sandboxState = iota
	// sandboxUp: the endpoint names this sandbox and the addresses; the
	// pod really has them.
	sandboxUp
	// sandboxGone: the sandbox's handle no longer holds an address (its
	// set-up failed and Calico released them, or it was torn down).
	sandboxGone
)

// Sandboxes tells how far a sandbox is: the one thing that may end a
// return's reservation is Calico showing the pod up with the address.
type Sandboxes interface {
	State(ctx context.Context, node string, pod *corev1.Pod, sb wire.Sandbox, ips []string) (sandboxState, error)
	// Holder is the allocation holding ip, nil when it is free.
	Holder(ctx context.Context, ip string) (*calico.Holder, error)
}

// calicoSandboxes reads Calico's IPAM allocations and workload endpoints:
// the calico plugin writes the endpoint as the last step of a successful
// ADD, and releases IPAM on every failure before it (cni-plugin/pkg/k8s).
type calicoSandboxes struct{ calico clientv3.Interface }

var _ Sandboxes = calicoSandboxes{}

func (c calicoSandboxes) State(ctx context.Context, node string, pod *corev1.Pod, sb wire.Sandbox, ips []string) (sandboxState, error) {
	for _, ip := range ips {
		h, err := c.Holder(ctx, ip)
		if err != nil {
			return sandboxSettingUp, err
		}
		if h == nil || h.Handle != sb.Handle() {
			return sandboxGone, nil
		}
	}
	return c.endpointState(ctx, node, pod, sb, ips)
}

func (c calicoSandboxes) Holder(ctx context.Context, s string) (*calico.Holder, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", s, err)
	}
	return ipam.Who(ctx, c.calico.IPAM(), ip)
}

func (c calicoSandboxes) endpointState(ctx context.Context, node string, pod *corev1.Pod, sb wire.Sandbox, ips []string) (sandboxState, error) {
	ifName := sb.IfName
	if ifName == "" {
		ifName = "eth0"
	}
	ids := names.WorkloadEndpointIdentifiers{Node: node, Orchestrator: "k8s", Endpoint: ifName, Pod: pod.Name}
	name, err := ids.CalculateWorkloadEndpointName(false)
	if err != nil {
		return sandboxSettingUp, fmt.Errorf("naming the endpoint of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	wep, err := c.calico.WorkloadEndpoints().Get(ctx, pod.Namespace, name, options.GetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return sandboxSettingUp, nil
	}
	if err != nil {
		return sandboxSettingUp, fmt.Errorf("reading endpoint %s/%s: %w", pod.Namespace, name, err)
	}
	if wep.Spec.ContainerID != sb.ContainerID {
		return sandboxSettingUp, nil
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(wep.Spec.IPNetworks, func(n string) bool { return addrOf(n) == ip }) {
			return sandboxSettingUp, nil
		}
	}
	return sandboxUp, nil
}

// addrOf is the address of a CIDR or address, in the one spelling capo
// keeps; "" when it is neither.
func addrOf(s string) string {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap().String()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return ""
}

// sandboxOfHandle names the sandbox behind a Calico handle
// ("<network>.<container ID>"); the interface is the pod's usual one.
func sandboxOfHandle(handle, ifName string) (wire.Sandbox, bool) {
	i := strings.LastIndexByte(handle, '.')
	if i <= 0 || i == len(handle)-1 {
		return wire.Sandbox{}, false
	}
	return wire.Sandbox{Network: handle[:i], ContainerID: handle[i+1:], IfName: ifName}, true
}
