// Command capo-controller runs as a small Deployment with leader election:
// the leader releases reservations that are due and covers lost nodes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/daemon/controller"
	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/version"
)

func main() {
	os.Exit(daemon.Main("capo-controller", parseFlags, func(ctx context.Context, opts controller.Options, kube kubernetes.Interface, calico clientv3.Interface) error {
		oc, err := ownerClients(kube)
		if err != nil {
			return err
		}
		// The gate checks again at once when Calico locks or unlocks.
		var g *gate.Gate
		m, _ := apigroup.InForce()
		lock := gate.NewLock(m, oc.Dynamic, gate.ClusterInfoReady(calico), func() { go func() { _ = g.Once(ctx) }() })
		g = gate.New(kube.Discovery(), nil, lock, 20*time.Second)
		go lock.Run(ctx)
		opts.CalicoAPI = g
		c, err := controller.New(opts, kube, oc, calicostore.New(calico, reserve.DefaultLimits), calico.IPAM())
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}))
}

// ownerClients reach the owner kinds beyond apps/v1 (Kruise's, listed).
func ownerClients(kube kubernetes.Interface) (controller.OwnerClients, error) {
	dyn, err := kubeclient.Dynamic("capo-controller", 20)
	if err != nil {
		return controller.OwnerClients{}, err
	}
	meta, err := kubeclient.Metadata("capo-controller", 20)
	if err != nil {
		return controller.OwnerClients{}, err
	}
	return controller.OwnerClients{Discovery: kube.Discovery(), Dynamic: dyn, Metadata: meta}, nil
}

func parseFlags(args []string) (controller.Options, slog.Level, float32, error) {
	fs := flag.NewFlagSet("capo-controller", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `capo-controller %s: releases capo's IP reservations when they are due
(TTL, max count, workload gone, by hand) and reserves for pods of lost nodes.
Run 2-3 replicas; one holds the lease and writes.

The Calico datastore is configured as calico-node's is, from the environment:
DATASTORE_TYPE (kubernetes or etcdv3), KUBECONFIG, ETCD_ENDPOINTS,
ETCD_KEY_FILE, ETCD_CERT_FILE, ETCD_CA_CERT_FILE. The Kubernetes API is
reached through KUBECONFIG, or in-cluster credentials.

Flags:
`, version.Version)
		fs.PrintDefaults()
	}
	host, _ := os.Hostname()
	var o controller.Options
	var common daemon.Flags
	common.Register(fs, 50, "")
	fs.StringVar(&o.Namespace, "namespace", kubeclient.Env("POD_NAMESPACE", "kube-system"), "namespace of the lease and the config ConfigMap (env POD_NAMESPACE)")
	fs.StringVar(&o.ConfigMap, "config-map", "capo-config", "name of the ConfigMap holding config.yaml (a CapoConfig); absent means the defaults")
	fs.StringVar(&o.ReleaseConfigMap, "release-config-map", controller.DefaultReleaseConfigMap, "name of the ConfigMap in --namespace through which releases are asked for by hand (key: node name, value: all, pod=<namespace>/<name>, or addresses); answered keys are removed; a request is applied once, to what is held when first seen; the chart sets it with controller.releaseConfigMap, which its Role follows")
	fs.StringVar(&o.LeaseName, "lease-name", "capo-controller", "name of the leader-election Lease")
	fs.StringVar(&o.Identity, "identity", kubeclient.Env("POD_NAME", host), "this replica's name in the lease (env POD_NAME)")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "how long a lease lasts without renewal: the longest a dead leader blocks a new one")
	fs.DurationVar(&o.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader tries to renew before giving up the lease")
	fs.DurationVar(&o.RetryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the lease")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9468", "address serving /metrics, /healthz and /readyz")
	fs.StringVar(&o.AgentSelector, "agent-selector", controller.DefaultAgentSelector, "labels of the capo-agent pods in --namespace: a node without a ready one has its pods' teardowns reserved by the controller")
	fs.StringVar(&o.CalicoNodeSelector, "calico-node-selector", caliconode.DefaultSelector, "labels of calico-node's pods: while the one on a node whose capo-agent is not ready is replaced (its install-cni rewrites the CNI config without capo-ipam), the controller holds that node's selected pods' addresses in the agent's place")
	fs.DurationVar(&o.RecentWindow, "recent-teardown-window", controller.DefaultRecentWindow, "how long a selected pod's teardown left to its node's agent is remembered: if the node turns uncovered within it (an agent that hung while it looked ready), the controller covers it. At least the agent's readiness probe period x failure threshold plus a pass, and a node's NotReady grace")
	if err := fs.Parse(args); err != nil {
		return o, 0, 0, err
	}
	if o.Identity == "" {
		return o, 0, 0, errors.New("capo-controller: --identity or POD_NAME is required")
	}
	if o.RetryPeriod >= o.RenewDeadline || o.RenewDeadline >= o.LeaseDuration {
		return o, 0, 0, fmt.Errorf("capo-controller: want --retry-period < --renew-deadline < --lease-duration, got %s, %s, %s", o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
	}
	l, qps, err := common.Resolve("capo-controller")
	return o, l, qps, err
}
