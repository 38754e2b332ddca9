// Package controller is capo-controller: one leader among a few replicas
// releases reservations when they are due, and reserves for pods whose node
// was lost and so never ran a CNI DEL.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/pkg/calicogate"
	"github.com/capo-net/capo/pkg/calicoipam"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// Options are the controller's settings, from flags and the environment.
type Options struct {
	Namespace string // the lease and the config live here
	ConfigMap string
	// ReleaseConfigMap holds release requests by hand, in Namespace;
	// "" means DefaultReleaseConfigMap.
	ReleaseConfigMap string
	LeaseName        string
	Identity         string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	MetricsAddr      string
	// AgentSelector picks the capo-agent pods (in Namespace) whose
	// readiness says a node's teardowns are covered.
	AgentSelector string
	// RecentWindow is how long a teardown left to a node's agent is
	// remembered, in case the agent hangs while it still looks ready
	// (recent.go); 0 means DefaultRecentWindow.
	RecentWindow time.Duration
	// CalicoAPI, when set, gates every read and write of Calico: while a
	// type capo uses is not served in the group in force, the controller
	// is not ready and acts on no view of Calico (nil: no gate, for tests).
	CalicoAPI *calicogate.Gate
}

// Controller wires the parts; Run starts them.
type Controller struct {
	opts     Options
	kube     kubernetes.Interface
	store    reserve.Store
	ipam     calicoipam.Reader
	agents   labels.Selector
	lost     *lostQueue
	recent   *recentTeardowns
	config   *config.Holder
	metrics  *metrics
	caches   *caches
	owners   *ownerWatches // owner kinds beyond apps/v1 (nil: none watched)
	recorder record.EventRecorder
	now      func() time.Time

	leading atomic.Bool
	synced  atomic.Bool
	kick    chan struct{} // a release may be due now

	mu           sync.Mutex
	deletedNodes map[string]deletedNode // for their pods' late deletes
	missed       []lostPod              // seen going from uncovered nodes while not leading
	away         map[string]bool        // opted-in nodes whose agent was not ready at the last pass
	// uncoveredNodes are the opted-in nodes uncovered at the last pass.
	uncoveredNodes map[string]bool
	unreadable     map[string]string              // reservation objects reported unreadable, and why
	badTTLs        map[string]string              // invalid reservation time annotations reported: object -> value
	recreatable    map[release.OwnerKey]time.Time // StatefulSets last seen opting in to keep members across a re-creation
	legacyWarned   map[string]string              // nodes told their release annotation is not read, and its value
	unwatchedTold  map[reserve.Ref]string         // reservations told their owner's kind is not watched, and why
	poolsAt        time.Time                      // the last read of Calico's pool utilization (pass goroutine only)
	requestsSeen   map[request]time.Time          // releases by hand answered, and when first seen (pass goroutine only)
}

// New builds a controller on real clients.
func New(opts Options, kube kubernetes.Interface, oc OwnerClients, store reserve.Store, ipam calicoipam.Reader) (*Controller, error) {
	if opts.ReleaseConfigMap == "" {
		opts.ReleaseConfigMap = DefaultReleaseConfigMap
	}
	if opts.AgentSelector == "" {
		opts.AgentSelector = DefaultAgentSelector
	}
	agents, err := labels.Parse(opts.AgentSelector)
	if err != nil {
		return nil, fmt.Errorf("agent selector %q: %w", opts.AgentSelector, err)
	}
	if opts.CalicoAPI != nil {
		store, ipam = opts.CalicoAPI.Store(store), opts.CalicoAPI.Reader(ipam)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	c := &Controller{
		opts: opts, kube: kube, store: store, ipam: ipam, agents: agents,
		lost:           newLostQueue(),
		recent:         &recentTeardowns{},
		config:         config.NewHolder(config.Default()),
		metrics:        newMetrics(),
		caches:         newCaches(kube, agents, opts.Namespace, opts.ReleaseConfigMap),
		owners:         newOwnerWatches(oc),
		recorder:       b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "capo-controller"}),
		now:            time.Now,
		kick:           make(chan struct{}, 1),
		deletedNodes:   map[string]deletedNode{},
		away:           map[string]bool{},
		uncoveredNodes: map[string]bool{},
		legacyWarned:   map[string]string{},
	}
	c.watchTriggers()
	return c, nil
}

// ownerListWait bounds the wait at start for the owner kinds beyond
// apps/v1 to list: one that does not list in time is judged when it does.
const ownerListWait = 30 * time.Second

// Run serves until ctx ends. Every replica keeps its caches warm; only the
// lease holder writes.
func (c *Controller) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- c.serveMetrics(ctx) }()
	if c.opts.CalicoAPI != nil {
		go c.opts.CalicoAPI.Run(ctx)
	}
	config.Watch(ctx, c.kube, c.opts.Namespace, c.opts.ConfigMap, c.config, c.onConfig)
	if !c.caches.start(ctx.Done()) {
		return errors.New("informer caches did not sync")
	}
	c.owners.sync(c.config.Get().OwnerKinds, c.now())
	defer c.owners.closeAll()
	c.owners.waitListed(ownerListWait)
	c.synced.Store(true)
	daemon.ReleaseStartupMemory()
	go c.runLost(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaName(c.opts.Namespace, c.opts.LeaseName),
		Client:     c.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.Identity},
	}
	slog.Info("capo-controller ready; seeking the lease", "identity", c.opts.Identity, "lease", c.opts.Namespace+"/"+c.opts.LeaseName)
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   c.opts.LeaseDuration,
			RenewDeadline:   c.opts.RenewDeadline,
			RetryPeriod:     c.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            c.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.lead,
				OnStoppedLeading: func() {
					c.leading.Store(false)
					c.metrics.leader.Set(0)
					slog.Warn("lost the lease; no longer writing", "identity", c.opts.Identity)
				},
			},
		})
		select {
		case err := <-errc:
			return err
		default:
		}
	}
	return nil
}

// lead runs while this replica holds the lease.
func (c *Controller) lead(ctx context.Context) {
	c.leading.Store(true)
	c.metrics.leader.Set(1)
	slog.Info("holding the lease; releasing and covering lost nodes", "identity", c.opts.Identity)
	// Deletions seen while no one led are caught up here.
	c.coverLostNodes()
	c.lost.kick()
	for {
		if !c.config.Loaded() {
			slog.Error("no release pass: the config ConfigMap is invalid and no earlier one of the operator's was loaded; fix it", "configmap", c.opts.Namespace+"/"+c.opts.ConfigMap)
		} else if err := c.pass(ctx); err != nil && ctx.Err() == nil {
			c.metrics.passErrors.Inc()
			slog.Error("release pass failed; retrying next period", "err", err)
		}
		t := time.NewTimer(c.config.Get().IPReleasePeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// due asks for a pass as soon as possible.
func (c *Controller) due() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Controller) onConfig(err error) {
	if err != nil {
		c.metrics.configReloads.WithLabelValues("error").Inc()
		return
	}
	c.metrics.configReloads.WithLabelValues("success").Inc()
	c.due()
	c.lost.kick()
}

func (c *Controller) serveMetrics(ctx context.Context) error {
	mux, err := daemon.MetricsMux(c.metrics.reg, Renamed)
	if err != nil {
		return err
	}
	daemon.HandleProbes(mux, c.ready, nil)
	return daemon.Serve(ctx, c.opts.MetricsAddr, mux, "metrics", "--metrics-addr")
}

// ready is /readyz: caches synced, a valid config, and Calico's types
// served in the group in force (the reason names the group when not).
func (c *Controller) ready() (bool, string) {
	if !c.synced.Load() || !c.config.Loaded() {
		return false, "caches not synced, or no valid config loaded"
	}
	if c.opts.CalicoAPI != nil {
		if ok, why := c.opts.CalicoAPI.Ready(); !ok {
			return false, why
		}
	}
	return true, "ok"
}
