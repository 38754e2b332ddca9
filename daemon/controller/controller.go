// Package controller is capo-controller: one leader among a few replicas
// releases reservations when they are due, and reserves for pods whose node
// was lost and so never ran a CNI DEL.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/kubeclient"
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
	// CalicoNodeSelector picks calico-node's pods: while the one on a node
	// whose agent is away is replaced, the controller holds that node's
	// selected pods' addresses (awayhold.go); "" means
	// caliconode.DefaultSelector.
	CalicoNodeSelector string
	// RecentWindow is how long a teardown left to a node's agent is
	// remembered, in case the agent hangs while it still looks ready
	// (recent.go); 0 means DefaultRecentWindow.
	RecentWindow time.Duration
	// CalicoAPI, when set, gates every read and write of Calico: while a
	// type capo uses is not served in the group in force, the controller
	// is not ready and acts on no view of Calico (nil: no gate, for tests).
	CalicoAPI *gate.Gate
}

// Controller holds the lease and wires the two parts that act on it: the
// releaser (release passes: TTLs, owners, requests by hand, upkeep) and the
// coverer (teardowns of nodes whose agent will not reserve: lost nodes,
// agents away). Each keeps its own state under its own lock; what both
// read is deps.
type Controller struct {
	*deps
	releaser *releaser
	coverer  *coverer

	synced atomic.Bool
	kick   chan struct{} // a release may be due now
}

// deps are what the releaser and the coverer both use: the clients, the
// caches, the config, the clock, the metrics, and whether this replica
// leads.
type deps struct {
	opts   Options
	kube   kubernetes.Interface
	store  reserve.Store
	ipam   ipam.Reader
	agents labels.Selector
	// calicoNodes picks calico-node's pods.
	calicoNodes labels.Selector
	config      *config.Holder
	metrics     *metrics
	caches      *caches
	recorder    record.EventRecorder
	now         func() time.Time
	leading     atomic.Bool
}

// New builds a controller on real clients.
func New(opts Options, kube kubernetes.Interface, oc OwnerClients, store reserve.Store, ipam ipam.Reader) (*Controller, error) {
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
	if opts.CalicoNodeSelector == "" {
		opts.CalicoNodeSelector = caliconode.DefaultSelector
	}
	calicoNodes, err := labels.Parse(opts.CalicoNodeSelector)
	if err != nil {
		return nil, fmt.Errorf("calico-node selector %q: %w", opts.CalicoNodeSelector, err)
	}
	if opts.CalicoAPI != nil {
		store, ipam = opts.CalicoAPI.Store(store), opts.CalicoAPI.IPAM(ipam)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	d := &deps{
		opts: opts, kube: kube, store: store, ipam: ipam, agents: agents, calicoNodes: calicoNodes,
		config:   config.NewHolder(config.Default()),
		metrics:  newMetrics(),
		caches:   newCaches(kube, agents, calicoNodes, opts.Namespace, opts.ReleaseConfigMap),
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "capo-controller"}),
		now:      time.Now,
	}
	c := &Controller{deps: d, releaser: newReleaser(d, oc), kick: make(chan struct{}, 1)}
	c.coverer = newCoverer(d, c.due)
	c.watchTriggers()
	return c, nil
}

// watchTriggers wires the events that make a release due at once to the
// releaser, and the pods' and nodes' changes to the coverer, which takes
// up the teardowns of uncovered nodes.
func (c *Controller) watchTriggers() {
	due := func(any) { c.due() }
	dueUpdate := func(any, any) { c.due() }
	for _, inf := range []cache.SharedIndexInformer{c.caches.namespaces, c.caches.sets, c.caches.replicas, c.caches.deploys} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: due, UpdateFunc: dueUpdate})
	}
	// A StatefulSet created may be one re-created that takes over its
	// members' reservations: hand them over before its pods start.
	_, _ = c.caches.sets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.releaser.noteSet(obj); c.due() },
		UpdateFunc: func(_, obj any) { c.releaser.noteSet(obj) },
		DeleteFunc: c.releaser.noteSet,
	})
	_, _ = c.caches.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.coverer.nodeDeleted(obj) },
	})
	_, _ = c.caches.requests.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.releaser.observe(obj); c.due() },
		UpdateFunc: func(_, obj any) { c.releaser.observe(obj); c.due() },
	})
	_, _ = c.caches.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Pod)
			p, ok2 := obj.(*corev1.Pod)
			if ok1 && ok2 {
				c.coverer.podChanged(o, p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := kubeclient.Deleted[corev1.Pod](obj); ok {
				c.coverer.podGone(p)
			}
		},
	})
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
	configSynced := config.Watch(ctx, c.kube, c.opts.Namespace, c.opts.ConfigMap, c.config, c.onConfig)
	if !c.caches.start(ctx.Done()) || !cache.WaitForCacheSync(ctx.Done(), configSynced) {
		return errors.New("informer caches did not sync")
	}
	owners := c.releaser.owners
	for _, err := range checkOwnerKinds(owners, c.config.Get().OwnerKinds) {
		slog.Error("an owner kind is refused: its members' reservations end by their time only", "err", err)
	}
	owners.sync(c.config.Get().OwnerKinds, c.now())
	defer owners.closeAll()
	owners.waitListed(ownerListWait)
	c.synced.Store(true)
	daemon.ReleaseStartupMemory()
	go c.coverer.runLost(ctx)
	go c.releaser.stampLoop(ctx)
	return c.seekLease(ctx, errc)
}

// seekLease runs for the lease until ctx ends, or the metrics server (errc)
// fails; lead runs whenever this replica holds it.
func (c *Controller) seekLease(ctx context.Context, errc <-chan error) error {
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

func metaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// lead runs while this replica holds the lease.
func (c *Controller) lead(ctx context.Context) {
	c.leading.Store(true)
	c.metrics.leader.Set(1)
	slog.Info("holding the lease; releasing and covering lost nodes", "identity", c.opts.Identity)
	// Deletions seen while no one led are caught up here.
	c.coverer.coverLostNodes()
	c.coverer.lost.kick()
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
	c.coverer.lost.kick()
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
