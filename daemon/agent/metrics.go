package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the agent's, on their own registry, every name capo_agent_*.
// Labels are bounded: an outcome, a path, a result; never a pod or an
// address. The node is the scrape's: the chart's ServiceMonitor labels the
// agents' targets with their node.
// Renamed are the agent's metrics renamed to the capo_agent_ prefix, by
// their old names: served under both until the next minor release.
var Renamed = map[string]string{"capo_agent_config_reloads_total": "capo_config_reloads_total"}

type metrics struct {
	reg            *prometheus.Registry
	decisions      *prometheus.CounterVec
	bypassed       prometheus.Counter
	reserveSeconds prometheus.Histogram
	journalDepth   prometheus.Gauge
	reservedIPs    prometheus.Gauge
	configReloads  *prometheus.CounterVec
	releases       *prometheus.CounterVec
	nodeOptedIn    prometheus.Gauge
	cniInstalled   prometheus.Gauge
	cniReapplied   *prometheus.CounterVec
	cniErrors      prometheus.Counter
	rewriteWindow  prometheus.Gauge
	rewriteHolds   *prometheus.CounterVec
	fixedAddrPods  prometheus.Counter
	returns        *prometheus.CounterVec
	canReserve     prometheus.Gauge
	ipCooldown     prometheus.Gauge
	notReady       *prometheus.GaugeVec
	wireRequests   *prometheus.CounterVec
	refused        *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_del_decisions_total",
			Help: "Sandbox teardowns by outcome (reserved, not-selected, node-not-opted-in, nothing-to-reserve, journaled, failed) and path (socket: live DEL; journal: replayed; sweep: a teardown that went around capo-ipam, found afterwards).",
		}, []string{"outcome", "path"}),
		reserveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capo_agent_reserve_duration_seconds",
			Help:    "Time to decide and write one teardown's reservation.",
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		journalDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_journal_depth",
			Help: "DELs capo-ipam journaled while the agent could not answer, not yet replayed.",
		}),
		reservedIPs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_reserved_ips",
			Help: "Addresses held in this node's reservations.",
		}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_config_reloads_total",
			Help: "Config loads by result (success, error); on error the last good config stays in force.",
		}, []string{"result"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_journal_releases_total",
			Help: "Journaled DELs replayed through the delegate, by result.",
		}, []string{"result"}),
		nodeOptedIn: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_node_opted_in",
			Help: "1 when this node carries the opt-in annotation, as the agent sees it.",
		}),
		cniInstalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_cni_installed",
			Help: "1 when capo-ipam is in this node's CNI chain (with --manage-cni).",
		}),
		cniReapplied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_cni_reapplied_total",
			Help: "Times capo had to put its edit back after the CNI config or binary was rewritten (calico-node restarts do this), by what (config, binary).",
		}, []string{"what"}),
		cniErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_agent_cni_errors_total",
			Help: "Install or uninstall attempts that failed; each is retried.",
		}),
		rewriteWindow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_cni_rewrite_window",
			Help: "1 while calico-node's pod on this node is being replaced (its install-cni rewrites the CNI config without capo-ipam): the node's selected running pods' addresses are held.",
		}),
		rewriteHolds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_cni_rewrite_holds_total",
			Help: "Addresses held while calico-node was replaced, by result: held; released once capo was back, their pod still using them; kept by a let-go, their pod torn down meanwhile (the teardown's reservation).",
		}, []string{"result"}),
		bypassed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_agent_bypassed_teardowns_total",
			Help: "Teardowns of selected pods that went around capo-ipam (the conflist was being rewritten, or the agent was away), found by the ADD-record sweep and reserved after the fact.",
		}),
		fixedAddrPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_agent_fixed_address_pods_total",
			Help: "Pods with cni.projectcalico.org/ipAddrs or ipAddrsNoIpam scheduled to this opted-in node, where the calico plugin rejects them.",
		}),
		returns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_address_returns_total",
			Help: "Returning pods with addresses held for them, by outcome (offered, returned, rolled-back, refused, fell-back, reclaimed, unoffered) and reason; docs/operations.md says what each means.",
		}, []string{"outcome", "reason"}),
		ipCooldown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_calico_ip_cooldown_seconds",
			Help: "Calico's IPAMConfiguration ipCooldownSeconds as last read on a returning pod's ADD (Calico 3.33+; 0 unset or not served): a pod that comes back sooner than this after its teardown gets a fresh address (returns reason cooling), its reservation kept.",
		}),
		canReserve: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_agent_can_reserve",
			Help: "1 while the agent can write reservations now (its last write landed) and its loops run: what /readyz reports, and what capo-controller reads to cover the node.",
		}),
		notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capo_agent_not_ready",
			Help: "1 for why the agent is not ready (starting, forbidden, refused, unreachable, timeout, conflict, error, loop-stopped, stopping); all 0 while ready.",
		}, []string{"reason"}),
		wireRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_wire_requests_total",
			Help: "Requests on the socket by the wire version capo-ipam spoke (1: capo 0.1.0, which sends none; newer: above the agent's own) and result (answered, refused: the version is not one the agent answers, and capo-ipam journals). A version other than the agent's own says a host still runs another release's capo-ipam.",
		}, []string{"version", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_agent_socket_refused_total",
			Help: "Socket requests refused because they name a pod other than the one the node's CNI state names, by why: record-differs (capo-ipam's ADD record of the sandbox names another pod), handle-differs (Calico's allocation for it names another pod), other-node (the handle was allocated on another node), no-pod-recorded (the request names a pod, Calico's allocation none). A request that names no pod (an IPAM call whose CNI_ARGS carry none) is never counted: it is decided for the pod the host names, or not selected. Anything above 0 is a process on the node forging requests, or a damaged record.",
		}, []string{"why"}),
	}
	m.reg.MustRegister(m.rewriteWindow, m.rewriteHolds, m.refused, m.wireRequests, m.ipCooldown, m.canReserve, m.notReady, m.bypassed, m.fixedAddrPods, m.returns, m.cniInstalled, m.cniReapplied, m.cniErrors, m.nodeOptedIn, m.decisions, m.reserveSeconds, m.journalDepth, m.reservedIPs, m.configReloads, m.releases,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
