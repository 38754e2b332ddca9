package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/test/testbed"
)

// The faults of what capo stands on: the servers, Calico.

func apiServerRestart(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	c.bed.StopAPIServer()
	pause.Sleep(ctx, d)
	start := time.Now()
	if err := c.bed.StartAPIServer(); err != nil {
		return "", broken{err}
	}
	return fmt.Sprintf("down %s, ready again in %s", d.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)), nil
}

func etcdRestart(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	c.bed.StopEtcd()
	pause.Sleep(ctx, d)
	if err := c.bed.StartEtcd(); err != nil {
		return "", broken{err}
	}
	return fmt.Sprintf("down %s", d.Round(time.Millisecond)), nil
}

// calicoGC runs Calico's kube-controllers, whose IPAM garbage collector
// frees an allocation whose pod is gone or Failed once LeakGrace passed.
func calicoGC(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	var gc *testbed.KubeControllers
	if err := try(func() { gc = c.bed.StartKubeControllers(bgT{c.t}, c.cfg.Datastore, c.cfg.LeakGrace) }); err != nil {
		return "", err
	}
	defer gc.Stop()
	pause.Sleep(ctx, d+c.cfg.LeakGrace) // long enough to judge what leaked as it started
	return fmt.Sprintf("leak grace %s, for %s", c.cfg.LeakGrace, (d + c.cfg.LeakGrace).Round(time.Millisecond)), nil
}

// datastoreLock locks Calico's datastore as an upgrade or a migration
// does (ClusterInformation datastoreReady false), for d.
func datastoreLock(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	if err := c.lockCalico(ctx, true); err != nil {
		return "", err
	}
	pause.Sleep(ctx, d)
	// Unlocked it must be, whatever the API server does meanwhile.
	if err := retryAPI(context.WithoutCancel(ctx), func(ctx context.Context) error { return c.lockCalico(ctx, false) }); err != nil {
		return "", broken{fmt.Errorf("unlocking: %w", err)}
	}
	return fmt.Sprintf("for %s", d.Round(time.Millisecond)), nil
}

func (c *cluster) lockCalico(ctx context.Context, locked bool) error {
	switch {
	case c.cfg.Datastore == testbed.Kubernetes && c.nodes[0].env.Calico == nil:
		return c.bed.LockCalico(ctx, apigroup.GroupV3, locked)
	case c.cfg.Datastore == testbed.Kubernetes:
		return c.bed.LockCalico(ctx, apigroup.GroupV1, locked)
	}
	cl := c.bed.Calico(testbed.Etcd)
	ci, err := cl.ClusterInformation().Get(ctx, "default", options.GetOptions{})
	if err != nil {
		return err
	}
	ready := !locked
	ci.Spec.DatastoreReady = &ready
	_, err = cl.ClusterInformation().Update(ctx, ci, options.SetOptions{})
	return err
}
