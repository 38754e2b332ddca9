package agent

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/pause"
)

func (a *Agent) onConfig(err error) {
	if err != nil {
		a.metrics.configReloads.WithLabelValues("error").Inc()
		return
	}
	a.metrics.configReloads.WithLabelValues("success").Inc()
}

// serveMetrics serves /metrics, and the probes on their own (loopback)
// address: a hostNetwork pod's health is nobody's business off the node.
func (a *Agent) serveMetrics(ctx context.Context) error {
	mux, err := daemon.MetricsMux(a.metrics.reg, Renamed)
	if err != nil {
		return err
	}
	mux.Handle("GET "+NodeInfoPath, a.nodeSummary())
	if a.opts.HealthAddr == "" || a.opts.HealthAddr == a.opts.MetricsAddr {
		daemon.HandleProbes(mux, a.readiness.Ready, a.readiness.Live)
		return daemon.Serve(ctx, a.opts.MetricsAddr, mux, "metrics", "--metrics-addr")
	}
	probes := http.NewServeMux()
	daemon.HandleProbes(probes, a.readiness.Ready, a.readiness.Live)
	errc := make(chan error, 2)
	go func() { errc <- daemon.Serve(ctx, a.opts.HealthAddr, probes, "health", "--health-addr") }()
	go func() { errc <- daemon.Serve(ctx, a.opts.MetricsAddr, mux, "metrics", "--metrics-addr") }()
	for range 2 {
		if err := <-errc; err != nil {
			return err
		}
	}
	return nil
}

// countLoop keeps the reserved-addresses gauge current.
func (a *Agent) countLoop(ctx context.Context) {
	for {
		a.countReserved(ctx)
		if !pause.Sleep(ctx, 30*time.Second) {
			return
		}
	}
}

func (a *Agent) countReserved(ctx context.Context) {
	entries, err := a.store.ListNode(ctx, a.opts.NodeName)
	if err != nil {
		slog.Warn("counting reservations", "err", err)
		return
	}
	a.metrics.reservedIPs.Set(float64(len(entries)))
	a.held.replace(entries)
	a.settler.reconcile(ctx, a.settler.reconcilable(ctx, entries), a.cluster.cachedPod, a.ifNameOf)
}

// ifNameOf is the interface capo-ipam recorded for the sandbox behind a
// Calico handle, the pod's usual one when no record says.
func (a *Agent) ifNameOf(handle string) string {
	recs, err := journal.Dir{Root: a.opts.StateDir}.AddrRecords()
	if err == nil {
		for _, r := range recs {
			if r.Handle() == handle {
				return r.IfName
			}
		}
	}
	return "eth0"
}

// nodeSummaryTTL is how long one reading of the node's files answers
// NodeInfoPath: a client polling it costs the node nothing more.
const nodeSummaryTTL = 5 * time.Second

// nodeSummary serves NodeInfoPath from a cache.
func (a *Agent) nodeSummary() http.Handler {
	j := journal.Dir{Root: a.opts.StateDir}
	return daemon.CachedJSON(nodeSummaryTTL, func() any { return nodeInfo(a.opts.NodeName, a.opts.CNIConfDir, j).summary() })
}
