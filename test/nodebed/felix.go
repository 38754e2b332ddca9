package nodebed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Felix, Calico's dataplane agent, programs the bed's routes, iptables and
// VXLAN device as calico-node's felix does, so pods' traffic is routed as
// in a cluster (testbed.BuildNodeBinaries builds it). Its settings here:
const (
	// TunnelPool holds the nodes' VXLAN tunnel addresses, apart from the
	// workload pools so that capo's assertions about those stay exact.
	TunnelPool = "10.251.0.0/24"
	// InterfacePrefix names the pods' host-side veths (Calico's default is
	// "cali"). Felix owns the routes and iptables of every interface with
	// its prefix; the e2e bed, which may run on the same machine, leaves
	// cali* veths without felix in this namespace, and felix would remove
	// their routes. The CNI plugin reads the same FELIX_INTERFACEPREFIX.
	InterfacePrefix = "calr"
)

// Unencapsulated is the bed's second dataplane configuration, chosen by
// CAPO_NODE_DATAPLANE=unencapsulated: every pool without VXLAN or IPIP,
// no tunnel addresses, and felix programming the routes between nodes
// (programClusterRoutes), the closest this kernel gets to BGP's result.
// Felix starts that route manager only when no pool at all uses VXLAN.
var Unencapsulated = os.Getenv("CAPO_NODE_DATAPLANE") == "unencapsulated"

// prepareFelix does for the node what calico-node does before its felix
// starts: the node's address and VXLAN tunnel address as annotations on
// the Node, the tunnel address allocated as calico-node's allocateip does.
func (b *Bed) prepareFelix(ctx context.Context) error {
	if Unencapsulated {
		if err := b.enableClusterRoutes(ctx); err != nil {
			return err
		}
	} else if err := b.createTunnelPool(ctx); err != nil {
		return err
	}
	// Calico's IPAM reads the Node (its labels decide which pools apply):
	// the kubelet must have registered it.
	err := Poll(ctx, 60*time.Second, func() error {
		_, err := b.Kube.CoreV1().Nodes().Get(ctx, b.NodeName, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	tunnel, err := b.allocateTunnelAddrFor(ctx, b.NodeName)
	if err != nil {
		return err
	}
	b.TunnelAddr = tunnel
	prefix, err := hostPrefix(b.NodeIP)
	if err != nil {
		return err
	}
	return b.annotateAddresses(ctx, b.NodeName, b.NodeIP, prefix, tunnel)
}

// annotateAddresses writes what calico-node writes on its Node: the node's
// address (felix's VXLAN parent) and its VXLAN tunnel address.
func (b *Bed) annotateAddresses(ctx context.Context, node string, ip net.IP, prefix int, tunnel net.IP) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"projectcalico.org/IPv4Address":"%s/%d","projectcalico.org/IPv4VXLANTunnelAddr":%q}}}`,
		ip, prefix, tunnel.String())
	if tunnel == nil {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{"projectcalico.org/IPv4Address":"%s/%d"}}}`, ip, prefix)
	}
	_, err := b.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (b *Bed) createTunnelPool(ctx context.Context) error {
	mode := apiv3.Automatic
	pool := &apiv3.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-tunnel"},
		Spec: apiv3.IPPoolSpec{
			CIDR: TunnelPool, BlockSize: 32, AssignmentMode: &mode, NodeSelector: "all()",
			IPIPMode: apiv3.IPIPModeNever, VXLANMode: apiv3.VXLANModeAlways,
			AllowedUses: []apiv3.IPPoolAllowedUse{apiv3.IPPoolAllowedUseTunnel},
		},
	}
	if _, err := b.Calico.IPPools().Create(ctx, pool, options.SetOptions{}); err != nil {
		return fmt.Errorf("the tunnel pool %s: %w", TunnelPool, err)
	}
	return nil
}

// allocateTunnelAddrFor takes an address for node from the tunnel pool under the
// handle and attributes calico-node's allocateip uses for VXLAN.
func (b *Bed) allocateTunnelAddrFor(ctx context.Context, node string) (net.IP, error) {
	if Unencapsulated {
		return nil, nil // no tunnel
	}
	_, pool, err := cnet.ParseCIDR(TunnelPool)
	if err != nil {
		return nil, err
	}
	handle := "vxlan-tunnel-addr-" + node
	v4, _, err := b.Calico.IPAM().AutoAssign(ctx, ipam.AutoAssignArgs{
		Num4: 1, HandleID: &handle, Hostname: node, IPv4Pools: []cnet.IPNet{*pool},
		Attrs:       map[string]string{ipam.AttributeNode: node, ipam.AttributeType: ipam.AttributeTypeVXLAN},
		IntendedUse: apiv3.IPPoolAllowedUseTunnel,
	})
	if err != nil {
		return nil, fmt.Errorf("allocating %s's VXLAN tunnel address: %w", node, err)
	}
	if v4 == nil || len(v4.IPs) != 1 {
		return nil, fmt.Errorf("allocating %s's VXLAN tunnel address: got %v", node, v4)
	}
	return v4.IPs[0].IP, nil
}

// startFelix runs felix as calico-node runs it, without calico-node: the
// Kubernetes datastore, this node's name, VXLAN from the pools. Felix exits
// with 129 to restart itself when its config or the pools' encapsulation
// changes; calico-node's runit restarts it, here a shell loop does.
func (b *Bed) startFelix() error {
	// Felix programs its ipsets and clears conntrack entries through
	// these tools.
	for _, tool := range []string{"ipset", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("felix needs %s (apt-get install ipset conntrack)", tool)
		}
	}
	health, err := freePort(net.IPv4(127, 0, 0, 1))
	if err != nil {
		return err
	}
	if err := saveIPForward(); err != nil {
		return err
	}
	dir := filepath.Join(Root, "felix")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	argv := append([]string{"env", "-i"}, b.felixEnvFor(b.NodeName, dir, health)...)
	argv = append(argv, "sh", "-c", `while :; do "$0" "$@"; rc=$?; [ $rc = 129 ] || exit $rc; echo "felix exited 129: restarting"; done`,
		b.Felix, "-c", filepath.Join(dir, "felix.cfg"))
	p, err := b.Spawn("felix", b.logPath("felix"), argv...)
	if err != nil {
		return err
	}
	b.felix = p
	url := "http://127.0.0.1:" + strconv.Itoa(health) + "/readiness"
	return b.WaitHTTP(p, url, false, 90*time.Second)
}

// felixEnv is felix's environment. DefaultEndpointToHostAction ACCEPT: the
// default DROP would cut pods off the API server on the node's address.
// DebugSkipCTLBCleanup: with BPF off felix still cleans up the BPF
// connect-time load balancer at start, which panics in a build without cgo.
func (b *Bed) felixEnvFor(node, dir string, health int) []string {
	return []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"KUBECONFIG=" + b.kubeconfig,
		"FELIX_DATASTORETYPE=kubernetes",
		"FELIX_FELIXHOSTNAME=" + node,
		"FELIX_INTERFACEPREFIX=" + InterfacePrefix,
		"FELIX_DEFAULTENDPOINTTOHOSTACTION=ACCEPT",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_USAGEREPORTINGENABLED=false",
		"FELIX_LOGFILEPATH=none",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"FELIX_LOGSEVERITYSYS=none", // no syslog here
		"FELIX_XDPENABLED=false",
		"FELIX_IPTABLESBACKEND=" + iptablesBackend(),
		"FELIX_DebugSkipCTLBCleanup=true",
		"FELIX_ENDPOINTSTATUSPATHPREFIX=" + dir,
		"FELIX_HEALTHENABLED=true",
		"FELIX_HEALTHHOST=127.0.0.1",
		"FELIX_HEALTHPORT=" + strconv.Itoa(health),
		"FELIX_PROGRAMCLUSTERROUTES=" + map[bool]string{true: "Enabled", false: "Disabled"}[Unencapsulated],
	}
}

// hostPrefix is the prefix length of the host interface holding ip.
func hostPrefix(ip net.IP) (int, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 0, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			ones, _ := n.Mask.Size()
			return ones, nil
		}
	}
	return 0, fmt.Errorf("no interface holds %s", ip)
}

// enableClusterRoutes writes programClusterRoutes into the default
// FelixConfiguration, where felix and capo (deciding whether Calico would
// route a borrowed address) read it, before any felix starts.
func (b *Bed) enableClusterRoutes(ctx context.Context) error {
	enabled := "Enabled"
	fc := apiv3.NewFelixConfiguration()
	fc.Name = "default"
	fc.Spec.ProgramClusterRoutes = &enabled
	if _, err := b.Calico.FelixConfigurations().Create(ctx, fc, options.SetOptions{}); err != nil {
		return fmt.Errorf("FelixConfiguration default: %w", err)
	}
	return nil
}
