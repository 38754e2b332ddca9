package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// metrics are the controller's, on their own registry, every name
// capo_controller_*. Node names are a label only on the held-addresses
// gauge: bounded by the cluster's nodes.
type metrics struct {
	reg              *prometheus.Registry
	leader           prometheus.Gauge
	reserved         *prometheus.GaugeVec
	maxCount         prometheus.Gauge
	releases         *prometheus.CounterVec
	heldBack         *prometheus.CounterVec
	releasesInDoubt  *prometheus.CounterVec
	oldest           prometheus.Gauge
	planSeconds      prometheus.Histogram
	passSeconds      prometheus.Histogram
	nodeLost         prometheus.Counter
	lostNodes        prometheus.Gauge
	remembered       prometheus.Gauge
	recentRemembered prometheus.Gauge
	recentCovered    *prometheus.CounterVec
	agentsAway       prometheus.Gauge
	lostPending      prometheus.Gauge
	passErrors       prometheus.Counter
	unreadable       prometheus.Gauge
	migrated         prometheus.Counter
	configReloads    *prometheus.CounterVec
	pools            *prometheus.GaugeVec
	poolSize         *prometheus.GaugeVec
}

// Renamed are the controller's metrics of 0.1.0 renamed to the one
// capo_controller_ prefix, to their old names: served under both until the
// next minor release (docs/releasing.md), the old ones' help naming the new.
var Renamed = map[string]string{ //nolint:gosec // metric names, not credentials
	"capo_controller_reserved_ips":                   "capo_reserved_ips",
	"capo_controller_reserve_max_count":              "capo_reserve_max_count",
	"capo_controller_releases_total":                 "capo_releases_total",
	"capo_controller_oldest_reservation_age_seconds": "capo_oldest_reservation_age_seconds",
	"capo_controller_planner_duration_seconds":       "capo_planner_duration_seconds",
	"capo_controller_release_pass_duration_seconds":  "capo_release_pass_duration_seconds",
	"capo_controller_node_lost_reservations_total":   "capo_node_lost_reservations_total",
	"capo_controller_lost_nodes":                     "capo_lost_nodes",
	"capo_controller_agents_not_ready":               "capo_agents_not_ready",
	"capo_controller_release_pass_errors_total":      "capo_release_pass_errors_total",
	"capo_controller_unreadable_reservation_objects": "capo_unreadable_reservation_objects",
	"capo_controller_reservations_migrated_total":    "capo_reservations_migrated_total",
	"capo_controller_config_reloads_total":           "capo_config_reloads_total",
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_is_leader", Help: "1 while this replica holds the lease and is the only one writing.",
		}),
		reserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capo_controller_reserved_ips", Help: "Addresses held, by node and by the reason they were reserved (cni-del, node-lost), as of the last pass.",
		},
			[]string{"node", "reason"}),
		pools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capo_controller_pool_addresses",
			Help: "Each Calico IP pool's addresses, read by the leader every minute, in states that add up to its size: reserved (held by capo), allocated (allocated by Calico IPAM and not held by capo) and free (what new pods can still get).",
		},
			[]string{"pool", "state"}),
		poolSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capo_controller_pool_size_addresses", Help: "Each Calico IP pool's size (its CIDR's addresses), read by the leader every minute.",
		},
			[]string{"pool"}),
		maxCount: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_reserve_max_count", Help: "The configured ipReserveMaxCount.",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_controller_releases_total", Help: "Reservations released, by reason (ttl, max-count, owner-gone, namespace-gone, scaled-down, manual).",
		},
			[]string{"reason"}),
		heldBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_controller_releases_held_back_total",
			Help: "Releases judged by the caches (owner-gone, scaled-down, namespace-gone, ttl) held back by a pass because a live read of their owner, namespace or pod failed (cause read-failed) or does not release them so (disagrees); a later pass judges them again.",
		},
			[]string{"reason", "cause"}),
		releasesInDoubt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_controller_releases_in_doubt_total",
			Help: "Releases whose write ended without an answer (its context ended, its connection dropped, the datastore failed in its midst), by reason: they may have landed; each is logged, and the next pass reads whether it is still held.",
		},
			[]string{"reason"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_oldest_reservation_age_seconds", Help: "Age of the oldest reservation kept by the last pass.",
		}),
		planSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capo_controller_planner_duration_seconds", Help: "Time to plan one release pass (pure computation).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capo_controller_release_pass_duration_seconds", Help: "Time of one whole release pass: read, plan, write.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		nodeLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_controller_node_lost_reservations_total", Help: "Addresses the controller reserved for pods of uncovered nodes: lost (reason node-lost), with their agent not ready (agent-away), or held while calico-node was replaced there (cni-rewrite).",
		}),
		lostNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_lost_nodes", Help: "Opted-in nodes that are NotReady, unreachable or unknown, as of the last pass: their pods' deletions are being covered.",
		}),
		remembered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_lost_pods_remembered", Help: "Selected pods deleted from lost nodes while this replica did not lead, kept so that it reserves them if it takes the lease before the leader's renewal is overdue.",
		}),
		recentRemembered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_recent_teardowns", Help: "Selected pods' teardowns left to their nodes' agents in the recent window, kept in case an agent turns out to have hung while it looked ready.",
		}),
		recentCovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_controller_recent_teardowns_covered_total", Help: "Pods' teardowns left to a node's agent that the controller covered once the node turned uncovered, by reason (agent-away, node-lost).",
		},
			[]string{"reason"}),
		agentsAway: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_agents_not_ready", Help: "Opted-in nodes whose capo-agent is not ready, as of the last pass: the controller reserves their pods' teardowns.",
		}),
		lostPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_pending_reservations", Help: "Addresses the controller has yet to reserve for uncovered nodes (retried until written).",
		}),
		passErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_controller_release_pass_errors_total", Help: "Release passes that could not finish; the next pass retries.",
		}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capo_controller_unreadable_reservation_objects", Help: "capo IPReservations whose annotation does not decode, as of the last pass: their addresses stay reserved, untouched.",
		}),
		migrated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capo_controller_reservations_migrated_total", Help: "Reservations moved from the per-node layout into buckets.",
		}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capo_controller_config_reloads_total", Help: "Config loads by result (success, error); on error the last good config stays in force.",
		},
			[]string{"result"}),
	}
	for _, r := range release.Reasons {
		m.releases.WithLabelValues(string(r))
		m.releasesInDoubt.WithLabelValues(string(r))
	}
	for r := range byCache {
		for _, cause := range []string{heldReadFailed, heldDisagrees} {
			m.heldBack.WithLabelValues(string(r), cause)
		}
	}
	for _, r := range []string{ReasonAgentAway, reserve.ReasonNodeLost} {
		m.recentCovered.WithLabelValues(r)
	}
	m.reg.MustRegister(m.leader, m.reserved, m.pools, m.poolSize, m.maxCount, m.releases, m.heldBack, m.releasesInDoubt, m.oldest, m.planSeconds, m.passSeconds,
		m.nodeLost, m.lostNodes, m.remembered, m.recentRemembered, m.recentCovered, m.agentsAway, m.lostPending, m.passErrors, m.unreadable, m.migrated, m.configReloads,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
