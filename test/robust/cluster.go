package robust

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// cluster is the run's Kubernetes cluster on the bed: two or more nodes
// (the bed's envs) sharing one small pool, each with its capo-agent
// managing its own CNI config dir, two capo-controller replicas, and the
// fault-injecting proxy in front of the API server for capo's clients.
// Every pod lives in the first node's namespace.
type cluster struct {
	t     testing.TB
	bed   *testbed.Bed
	cfg   Config
	hist  *History
	ns    string
	nodes []*node
	ctrls []*replica
	proxy *Proxy
	store *calicostore.Store // capo's reservations, as the checker reads them
	// latest is the last sample the checker took: a manual release
	// picks an address from what it held.
	latest atomic.Pointer[sample]
}

// node is one env: its agent, kept running unless a fault holds it down.
type node struct {
	env *testbed.Env
	cni *testbed.NodeCNI

	mu    sync.Mutex
	agent *testbed.Agent
	held  int    // faults keeping it down
	fp    string // CAPO_FAILPOINTS of its next start
	// calicoNode is the name of the node's calico-node pod; calicoNodes
	// counts those it had.
	calicoNode  string
	calicoNodes int
}

// replica is one capo-controller replica, kept running likewise.
type replica struct {
	id  string
	env *testbed.Env

	mu   sync.Mutex
	ctl  *testbed.Controller
	held int
	fp   string
}

func newCluster(t testing.TB, bed *testbed.Bed, cfg Config, hist *History) (*cluster, error) {
	c := &cluster{t: t, bed: bed, cfg: cfg, hist: hist}
	for range cfg.Nodes {
		env := bed.NewEnv(t, cfg.Datastore, testbed.EnvOptions{PoolPrefix: cfg.PoolPrefix, OptIn: true, NoAgent: true, CalicoRelease: cfg.CalicoRelease})
		env.T = bgT{t} // its helpers run off the test's goroutine too
		c.nodes = append(c.nodes, &node{env: env})
	}
	c.ns = c.nodes[0].env.Namespace
	t.Cleanup(c.clear) // after capo's processes stop (cleanups run last first)
	if err := try(func() { c.store = c.nodes[0].env.ReservationStore() }); err != nil {
		return nil, err
	}
	if err := c.sharePool(context.Background()); err != nil {
		return nil, fmt.Errorf("sharing the first node's pool: %w", err)
	}
	var err error
	if c.proxy, err = StartProxy(bed, c.nodes[0].env.Dir, cfg.Seed); err != nil {
		return nil, err
	}
	t.Cleanup(c.proxy.Close)
	if err := try(func() { c.setConfig(config.ReturnSameNode) }); err != nil {
		return nil, err
	}
	for i, n := range c.nodes {
		n.fp = cfg.AgentFailpoints
		if err := try(func() { n.cni = n.env.SetupNodeCNI() }); err != nil {
			return nil, err
		}
		if err := c.startCalicoNode(context.Background(), i, false); err != nil {
			return nil, fmt.Errorf("calico-node's pod on %s: %w", n.env.Node, err)
		}
		if err := n.start(c); err != nil {
			return nil, err
		}
	}
	if slices.Contains(cfg.Faults, fGC) { // built and started once ahead: the fault then only starts it
		if err := try(func() { bed.StartKubeControllers(bgT{t}, cfg.Datastore, cfg.LeakGrace).Stop() }); err != nil {
			return nil, err
		}
	}
	for _, id := range []string{"c1", "c2"} {
		r := &replica{id: id, env: c.nodes[0].env}
		if err := r.start(c); err != nil {
			return nil, err
		}
		c.ctrls = append(c.ctrls, r)
	}
	return c, c.waitInstalled()
}

// sharePool opens the first node's pool to every node and disables the
// others' pools: one small pool, under pressure, that a member may come
// back to from any node (borrowing from another node's block).
func (c *cluster) sharePool(ctx context.Context) error {
	for i, n := range c.nodes {
		edit := func(p *apiv3.IPPool) {
			if i == 0 {
				p.Spec.NodeSelector = "all()"
			} else {
				p.Spec.Disabled = true
			}
		}
		if err := c.editPool(ctx, n.env, edit); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) editPool(ctx context.Context, env *testbed.Env, edit func(*apiv3.IPPool)) error {
	if env.Calico == nil { // native v3: Calico's resources are projectcalico.org/v3 CRDs
		cs, err := c.bed.CalicoV3()
		if err != nil {
			return err
		}
		p, err := cs.ProjectcalicoV3().IPPools().Get(ctx, env.PoolName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(p)
		_, err = cs.ProjectcalicoV3().IPPools().Update(ctx, p, metav1.UpdateOptions{})
		return err
	}
	p, err := env.Calico.IPPools().Get(ctx, env.PoolName(), options.GetOptions{})
	if err != nil {
		return err
	}
	edit(p)
	_, err = env.Calico.IPPools().Update(ctx, p, options.SetOptions{})
	return err
}

// setConfig writes capo's config to every node's namespace (each agent
// reads its own; the controllers read the first's).
func (c *cluster) setConfig(mode config.ReturnMode) {
	cfg := fmt.Sprintf("apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReleasePeriod: 1s\nipReserveTime: %s\nipReserveMaxCount: %d\nreserveTimeout: 3s\nreturnAddress: %s\n",
		c.cfg.TTL, c.cfg.MaxCount, mode)
	for _, n := range c.nodes {
		n.env.SetConfig(cfg)
	}
}

// waitInstalled waits until every node's agent has put capo-ipam in its
// node's conflist.
func (c *cluster) waitInstalled() error {
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.nodes {
		for {
			b, _ := os.ReadFile(n.cni.ConfFile)
			if strings.Contains(string(b), "capo-ipam") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("capo-ipam not in %s after 30s", n.cni.ConfFile)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
