// Package agent is capo-agent, one per node: it decides whether a torn-down
// sandbox's addresses are reserved, writes the reservation, and replays the
// DELs capo-ipam journaled while it could not answer.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/daemon/agent/cnichain"
	"github.com/capo-net/capo/daemon/agent/readiness"
	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/returns/calicoview"
	"github.com/capo-net/capo/pkg/selection"
)

// Agent is the composition root: it builds the parts on real clients and
// runs them. Each part gets only what it uses.
type Agent struct {
	opts    Options
	kube    kubernetes.Interface
	meta    metadata.Interface
	store   reserve.Store
	config  *config.Holder
	metrics *metrics
	cluster *informerCluster
	batcher *reserve.Batcher
	server  *server
	drainer *drainer
	sweeper *sweeper
	cni     *cnichain.Manager // nil without --manage-cni
	rewrite *rewriteHold      // nil without the CNI manager or a calico-node selector
	held    *heldIndex        // pods with reservations on this node, for returns
	settler *settler          // ends returned addresses' reservations
	// reapplied carries the CNI manager's re-applies to the sweeper.
	reapplied chan struct{}
	readiness *readiness.Readiness // what /readyz says: can the agent reserve now
	prober    *readiness.Prober
	lock      *gate.Lock // Calico's datastore lock
	gate      *gate.Gate // holds Calico's reads and writes back while it cannot be used
}

// New builds an agent on real clients; meta reads objects' metadata only.
func New(opts Options, kube kubernetes.Interface, meta metadata.Interface, calico clientv3.Interface) *Agent {
	a := &Agent{
		opts:      opts,
		kube:      kube,
		meta:      meta,
		config:    config.NewHolder(config.Default()),
		metrics:   newMetrics(),
		reapplied: make(chan struct{}, 1),
	}
	a.readiness = readiness.New(&readiness.Metrics{CanReserve: a.metrics.canReserve, NotReady: a.metrics.notReady}, time.Now)
	// Calico's datastore lock wakes the prober, so that the agent turns
	// not ready (and refuses to write) within the prober's short retry.
	m, _ := apigroup.InForce()
	a.lock = gate.NewLock(m, opts.Dynamic, gate.ClusterInfoReady(calico), a.readiness.Poke)
	a.gate = readiness.NewGate(kube.Discovery(), opts.quietNetconfGroup, a.lock)
	a.readiness.UseGate(a.gate)
	objects := calicostore.New(calico, reserve.DefaultLimits)
	a.store = a.gate.Store(a.readiness.Watch(objects))
	cfg := a.config.Get
	a.cluster = newInformerCluster(kube, meta, opts.NodeName, func() time.Duration { return cfg().DeletedPodMemory }, time.Now)
	a.batcher = reserve.NewBatcher(a.store, opts.NodeName, func() time.Duration { return cfg().ReserveTimeout })
	timeout := func() time.Duration { return cfg().ReserveTimeout }
	a.prober = readiness.NewProber(calico.IPReservations(), calicostore.BucketOf(opts.NodeName), a.batcher, a.readiness, cfg().ReserveTimeout, a.gate)
	dec := &decider{
		cluster: a.cluster, ipam: a.gate.IPAM(calico.IPAM()), reserve: a.batcher,
		selectors: func() []selection.Selector { return cfg().Selectors },
		observe:   func(d time.Duration) { a.metrics.reserveSeconds.Observe(d.Seconds()) },
		now:       time.Now,
	}
	j := journal.Dir{Root: opts.StateDir}
	a.held = newHeldIndex(opts.NodeName)
	dec.reserved = a.held.add
	var off *offerer
	off, a.settler = a.newReturns(kube, calico, func() config.ReturnMode { return cfg().ReturnAddress }, objects.ListCached)
	dec.guard = a.settler.guard
	a.server = &server{
		decider: dec, cluster: a.cluster, selectors: dec.selectors, timeout: timeout, metrics: a.metrics, offerer: off, settler: a.settler, records: j.AddrRecord, ipam: a.gate.IPAM(calico.IPAM()), node: opts.NodeName,
		discovered: func(ctx context.Context) (string, error) { return apigroup.Discovered(ctx, kube.Discovery()) },
	}
	a.drainer = &drainer{journal: j, ipam: a.gate.IPAM(calico.IPAM()), decider: dec, release: &execReleaser{cniBinDir: opts.CNIBinDir}, timeout: timeout, interval: opts.DrainInterval, metrics: a.metrics}
	off.replay = a.drainer.replayPod
	a.sweeper = &sweeper{
		node: opts.NodeName, cluster: a.cluster, ipam: a.gate.IPAM(calico.IPAM()), journal: j, decider: dec, timeout: timeout,
		interval: opts.SweepInterval, pause: 250 * time.Millisecond, grace: 2 * time.Second, metrics: a.metrics,
	}
	if opts.ManageCNI {
		a.cni = cnichain.New(a.cluster.Node, installOptions(opts), opts.CNIResync, cnichain.Metrics{Installed: a.metrics.cniInstalled, Reapplied: a.metrics.cniReapplied, Errors: a.metrics.cniErrors}, a.reapplied, j)
		// Ready only once capo is back in the chain: an agent restarted
		// while calico-node rewrote the conflist reserves nothing for a
		// teardown that reads it, and the controller covers the node
		// only while the agent is not ready.
		a.readiness.Await("the CNI chain not checked yet since start (capo-ipam may be missing from it)", a.cni.Checked())
	}
	if a.rewrite = newRewriteHold(a, a.gate.IPAM(calico.IPAM()), j, timeout); a.rewrite != nil {
		dec.reserved = func(es []reserve.Entry) { a.held.add(es); a.rewrite.teardown(es) }
	}
	a.cluster.onNodeChange(a.nodeChanged)
	optedIn := func() bool { return selection.NodeOptedIn(selection.Of(a.cluster.Node())) }
	newFixedAddressWarner(kube, opts.NodeName, optedIn, a.metrics.fixedAddrPods.Inc).watch(a.cluster)
	return a
}

// newReturns wires the two halves of returns: the offerer answers a
// returning pod's ADD, the settler what capo-ipam then reports. They share
// the offers; the settler shares its address guard with the decider.
// cached lists every node's reservations from the API server's cache.
func (a *Agent) newReturns(kube kubernetes.Interface, calico clientv3.Interface, mode func() config.ReturnMode, cached func(context.Context) (*reserve.Listing, error)) (*offerer, *settler) {
	recorder, offered := newRecorder(kube, a.opts.NodeName), &offers{}
	off := &offerer{
		node: a.opts.NodeName, store: a.store, mode: mode,
		viewer: &calicoview.Reader{Calico: calico, Node: a.opts.NodeName},
		held:   a.held, timeout: time.Second, recorder: recorder, metrics: a.metrics,
		nodes:    kube.CoreV1().Nodes(),
		cooldown: &calicoview.Cooldown{REST: kube.Discovery().RESTClient(), Every: time.Minute},
		// On etcdv3 a Calico node's name may not be its Node's.
		calicoNodes: calicoNodes{calico},
		offers:      offered,
		cached:      cached,
	}
	set := &settler{
		node: a.opts.NodeName, store: a.store, sandboxes: calicoSandboxes{calico: calico}, mode: mode,
		held: a.held, recorder: recorder, metrics: a.metrics, pods: a.cluster.Pod, offers: offered, guard: &addrGuard{},
	}
	return off, set
}

// nodeChanged follows the opt-in: the gauge, and the CNI chain.
func (a *Agent) nodeChanged(n *metav1.PartialObjectMetadata) {
	in := 0.0
	if selection.NodeOptedIn(selection.Of(n)) {
		in = 1
	}
	a.metrics.nodeOptedIn.Set(in)
	if a.cni != nil {
		a.cni.Poke()
	}
}

// Run serves until ctx ends or a part fails. The socket opens only once
// the caches have synced, so no DEL is decided on an empty cache; until
// then capo-ipam journals, which is safe.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var cniDone chan struct{} // closed when the CNI manager returned; nil without one
	var rm *cnichain.Removal
	defer func() {
		a.readiness.Stop()
		cancel() // first: the CNI manager waits for it
		if cniDone != nil {
			<-cniDone
			a.cni.OnExit(rm)
		}
	}()
	// Named before anything can stall (caches, the datastore): an agent
	// that runs at all, even one that never gets to serve, keeps capo-ipam
	// from taking capo as uninstalled.
	a.markPresence()
	errc := make(chan error, 3)
	go func() { errc <- a.serveMetrics(ctx) }()
	served, err := a.start(ctx, errc)
	if err != nil || served == nil {
		return err
	}
	if a.cni != nil {
		rm = cnichain.NewRemoval(a.kube, a.meta, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), a.opts.UninstallGrace)
		go rm.Watch(ctx)
		cniDone = make(chan struct{})
		a.loop(ctx, "cni", func(ctx context.Context) { a.cni.Run(ctx); close(cniDone) })
	}
	a.readiness.Serve()
	daemon.ReleaseStartupMemory()
	slog.Info("capo-agent serving; ready once a reservation write lands", "node", a.opts.NodeName, "socket", a.opts.Socket, "metrics", a.opts.MetricsAddr, "health", a.opts.HealthAddr)
	select {
	case <-ctx.Done():
		// The socket's last answers, and the returns they started, finish
		// before the agent goes: a return cut off would stay reserved.
		<-served
		return nil
	case err := <-errc:
		return err
	}
}

// start syncs the caches and the config, opens the socket and starts the
// loops. served is closed when the socket's server has finished; nil with
// no error means ctx ended first.
func (a *Agent) start(ctx context.Context, errc chan<- error) (served chan struct{}, err error) {
	configSynced := config.Watch(ctx, a.kube, a.opts.ConfigNamespace, a.opts.ConfigMap, a.config, a.onConfig)
	a.loop(ctx, "batcher", a.batcher.Run)
	if !a.cluster.run(ctx) {
		return nil, errors.New("informer caches did not sync")
	}
	for !configSynced() {
		if !pause.Sleep(ctx, 50*time.Millisecond) {
			return nil, nil
		}
	}
	go a.lock.Run(ctx)
	if !a.checkCalico(ctx) {
		return nil, nil
	}
	l, err := listenSocket(a.opts.Socket)
	if err != nil {
		return nil, err
	}
	served = make(chan struct{})
	go func() { errc <- a.server.serve(ctx, l); close(served) }()
	a.loop(ctx, "prober", a.prober.Run)
	a.loop(ctx, "drainer", a.drainer.run)
	a.loop(ctx, "sweeper", func(ctx context.Context) { a.sweeper.run(ctx, a.reapplied) })
	a.loop(ctx, "counter", a.countLoop)
	if a.rewrite != nil {
		a.loop(ctx, "rewrite", a.rewrite.run)
	}
	return served, nil
}

// checkCalico checks Calico once before the socket opens, its lock read
// first (up to firstCheckWait): a returning member's ADD just after the
// agent starts (a node's reboot) has the member's own journaled teardown
// replayed first, which a gate not checked yet would refuse, and the
// member would get a fresh address. A check that fails leaves the gate
// closed, as before: capo-ipam journals. False when ctx ended.
func (a *Agent) checkCalico(ctx context.Context) bool {
	for start := time.Now(); !a.lock.Known() && time.Since(start) < firstCheckWait; {
		if !pause.Sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	_ = a.gate.Once(ctx) // a failure is logged, and the gate stays closed
	return ctx.Err() == nil
}

// firstCheckWait bounds the wait for Calico's lock before the first check.
const firstCheckWait = 10 * time.Second

// loop runs one of the agent's loops; one that ends while the agent
// runs makes it not ready.
func (a *Agent) loop(ctx context.Context, name string, fn func(context.Context)) {
	go func() {
		fn(ctx)
		if ctx.Err() == nil {
			a.readiness.LoopStopped(name)
		}
	}()
}
