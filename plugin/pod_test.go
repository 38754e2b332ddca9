package plugin

import (
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	calicotypes "github.com/projectcalico/calico/cni-plugin/pkg/types"

	"github.com/capo-net/capo/pkg/wire"
)

// calicoIPAMAccepts says whether calico-ipam reads args without an error,
// as it reads them: every command takes the pod from Calico's K8sArgs
// (utils.GetIdentifiers), and ADD then reads a requested address from an
// args struct of IP alone (ipamArgs in cni-plugin/pkg/ipamplugin).
func calicoIPAMAccepts(args, command string) (calicotypes.K8sArgs, bool) {
	var k8s calicotypes.K8sArgs
	if err := cnitypes.LoadArgs(args, &k8s); err != nil {
		return k8s, false
	}
	if command == "ADD" {
		var ipam struct {
			cnitypes.CommonArgs
			IP net.IP
		}
		if err := cnitypes.LoadArgs(args, &ipam); err != nil {
			return k8s, false
		}
	}
	return k8s, true
}

// What calico-ipam accepts, capo-ipam accepts, and it names the pod
// calico-ipam names. Calico's own CNI suite sends the first rows: a DEL of
// an address asked for by IP= alone, and a pod's args without
// IgnoreUnknown.
func TestPodOfAcceptsWhatCalicoIPAMAccepts(t *testing.T) {
	for _, tc := range []struct {
		args, command string
		want          wire.PodRef
	}{
		{args: "IP=192.168.123.123", command: "DEL"},
		{args: "IP=192.168.123.123", command: "ADD"},
		{args: "IP=fd80:24e2:f998:72d6::1", command: "DEL"},
		{args: "K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns;K8S_POD_INFRA_CONTAINER_ID=whatever", command: "DEL", want: wire.PodRef{Namespace: "ns", Name: "p"}},
		{args: "K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns;K8S_POD_INFRA_CONTAINER_ID=whatever;IP=10.0.0.1", command: "DEL", want: wire.PodRef{Namespace: "ns", Name: "p"}},
		{args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u1", command: "ADD", want: wire.PodRef{Namespace: "ns", Name: "p", UID: "u1"}},
		{args: "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;IP=10.0.0.1;CNI_TEST_NAMESPACE=x", command: "ADD", want: wire.PodRef{Namespace: "ns", Name: "p"}},
		{args: "IgnoreUnknown=1;K8S_POD_NAME=p;K8S_POD_NAME=q", command: "DEL", want: wire.PodRef{Name: "q"}},
		{args: "", command: "DEL"},
	} {
		k8s, ok := calicoIPAMAccepts(tc.args, tc.command)
		if !ok {
			t.Fatalf("%s %q: calico-ipam refuses it; the row tests nothing", tc.command, tc.args)
		}
		pod, err := podOf(&skel.CmdArgs{Args: tc.args})
		if err != nil {
			t.Errorf("%s %q: calico-ipam accepts it, capo-ipam refuses it: %v", tc.command, tc.args, err)
			continue
		}
		if pod != tc.want || pod.Namespace != string(k8s.K8S_POD_NAMESPACE) || pod.Name != string(k8s.K8S_POD_NAME) {
			t.Errorf("%s %q: capo-ipam reads %+v, want %+v (calico-ipam reads %s/%s)", tc.command, tc.args, pod, tc.want, k8s.K8S_POD_NAMESPACE, k8s.K8S_POD_NAME)
		}
	}
}

// A pod key capo-ipam cannot read for sure fails, saying what it read;
// calico-ipam refuses the same pairs.
func TestPodOfRefusesAnUnreadablePodKey(t *testing.T) {
	for _, args := range []string{"K8S_POD_NAME=a=b", "IgnoreUnknown=1;K8S_POD_NAMESPACE", "K8S_POD_UID=x=y;K8S_POD_NAME=p"} {
		if _, ok := calicoIPAMAccepts(args, "DEL"); ok {
			t.Fatalf("%q: calico-ipam accepts it", args)
		}
		if _, err := podOf(&skel.CmdArgs{Args: args}); err == nil || !strings.Contains(err.Error(), "CNI_ARGS") {
			t.Errorf("%q: err %v", args, err)
		}
	}
}
