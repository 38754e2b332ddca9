package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// envLabel ties a test's pool to its node, so concurrent or earlier tests'
// pools never hand out addresses here.
const envLabel = "capo-testbed-env"

// Env is one test's slice of the bed on one datastore: a node, an IP pool
// only that node uses, and a namespace for its pods.
type Env struct {
	T         testing.TB
	Bed       *Bed
	DS        Datastore
	ID        string
	Node      string
	Namespace string
	Pool      *net.IPNet
	Pool6     *net.IPNet // with EnvOptions.DualStack
	Calico    clientv3.Interface
	Kube      kubernetes.Interface
	Dir       string
	Agent     *Agent // the node's capo-agent, unless EnvOptions.NoAgent
	// BinDir is the node's CNI bin dir: calico and calico-ipam of the env's
	// Calico release, and capo-ipam.
	BinDir string

	logOnce sync.Once
	log     *os.File
}

// EnvOptions shape an Env. The zero value is a /26 pool in one block.
type EnvOptions struct {
	PoolPrefix int // size of the pool, e.g. 29 for 8 addresses; default 26
	// OptIn annotates the node and labels the namespace before the agent
	// starts, so its first look already sees them.
	OptIn   bool
	NoAgent bool // do not start capo-agent for the node
	// DualStack adds an IPv6 pool (a /120) and has the chain assign both
	// families (assign_ipv6: "true").
	DualStack bool
	// CalicoRelease picks the calico and calico-ipam binaries (one of
	// CalicoReleases); the default is the pinned release.
	CalicoRelease string
}

// NewEnv makes a fresh node, pool and namespace; t.Cleanup tears down every
// sandbox the test left and the pool.
func (b *Bed) NewEnv(t testing.TB, ds Datastore, opts EnvOptions) *Env {
	t.Helper()
	if opts.PoolPrefix == 0 {
		opts.PoolPrefix = 26
	}
	if opts.PoolPrefix < 24 || opts.PoolPrefix > 30 {
		t.Fatalf("testbed: PoolPrefix %d: an env's pool is a /24 to a /30", opts.PoolPrefix)
	}
	n := int(b.envSeq.Add(1))
	if n >= envsPerRegion {
		t.Fatalf("testbed: more than %d envs in one run", envsPerRegion)
	}
	e := &Env{
		T: t, Bed: b, DS: ds, ID: fmt.Sprintf("r%de%d", b.region, n),
		Calico: b.calico[ds], Kube: b.Kube,
	}
	var err error
	if e.BinDir, err = b.CalicoBinDir(opts.CalicoRelease); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	e.Node = "node-" + e.ID
	e.Namespace = "ns-" + e.ID
	e.Dir = filepath.Join(b.Dir, e.ID)
	// Each env owns 10.<128+8*region+n/256>.<n%256>.0/24; the pool is its first /PoolPrefix.
	e.Pool = &net.IPNet{IP: net.IPv4(10, byte(128+8*b.region+n/256), byte(n%256), 0).To4(), Mask: net.CIDRMask(opts.PoolPrefix, 32)}
	ctx := context.Background()
	if err := e.create(ctx, opts); err != nil {
		t.Fatalf("testbed env %s on %s: %v", e.ID, ds, err)
	}
	t.Cleanup(func() { e.teardown() })
	if opts.OptIn {
		e.OptInNode()
		e.EnableNamespace()
	}
	if !opts.NoAgent {
		e.Agent = e.StartAgent()
	}
	return e
}

func (e *Env) create(ctx context.Context, opts EnvOptions) error {
	// calico-node writes this on a real node; the plugin refuses to run without it.
	if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "nodename"), []byte(e.Node), 0o644); err != nil {
		return err
	}
	labels := map[string]string{envLabel: e.ID, "kubernetes.io/hostname": e.Node}
	node, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.Node, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	// Ready, as a joined node's kubelet reports it.
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := e.Kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	if e.DS == Etcd {
		// On etcd, Calico keeps its own Node; on Kubernetes it reads the Node above.
		// calico-node ties it to the Kubernetes node, as kube-controllers' IPAM GC needs.
		cn := &libapiv3.Node{
			ObjectMeta: metav1.ObjectMeta{Name: e.Node, Labels: labels},
			Spec:       libapiv3.NodeSpec{OrchRefs: []libapiv3.OrchRef{{Orchestrator: "k8s", NodeName: e.Node}}},
		}
		if _, err := e.Calico.Nodes().Create(ctx, cn, options.SetOptions{}); err != nil {
			return fmt.Errorf("calico node: %w", err)
		}
	}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	pool := &apiv3.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: e.PoolName()},
		Spec: apiv3.IPPoolSpec{
			CIDR:         e.Pool.String(),
			BlockSize:    max(opts.PoolPrefix, 26),
			NodeSelector: fmt.Sprintf("%s == '%s'", envLabel, e.ID),
			IPIPMode:     apiv3.IPIPModeNever,
			VXLANMode:    apiv3.VXLANModeNever,
		},
	}
	if e.nativeV3() {
		return e.createV3Pool(ctx, pool)
	}
	if _, err := e.Calico.IPPools().Create(ctx, pool, options.SetOptions{}); err != nil {
		return fmt.Errorf("ippool %s: %w", e.Pool, err)
	}
	if opts.DualStack {
		_, e.Pool6, _ = net.ParseCIDR(fmt.Sprintf("fd00:ca:%x:%x::/120", e.Bed.region, int(e.Pool.IP.To4()[1])<<8|int(e.Pool.IP.To4()[2])))
		pool6 := &apiv3.IPPool{
			ObjectMeta: metav1.ObjectMeta{Name: "pool6-" + e.ID},
			Spec: apiv3.IPPoolSpec{
				CIDR: e.Pool6.String(), BlockSize: 122, NodeSelector: pool.Spec.NodeSelector,
				IPIPMode: apiv3.IPIPModeNever, VXLANMode: apiv3.VXLANModeNever,
			},
		}
		if _, err := e.Calico.IPPools().Create(ctx, pool6, options.SetOptions{}); err != nil {
			return fmt.Errorf("ippool %s: %w", e.Pool6, err)
		}
	}
	return nil
}

// pluginLog is where the plugins' stderr goes (the runtime's log on a node);
// a failing test names it.
func (e *Env) pluginLog() io.Writer {
	e.logOnce.Do(func() {
		path := filepath.Join(e.Dir, "plugins.log")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			e.T.Fatalf("plugin log: %v", err)
		}
		e.log = f
		e.T.Cleanup(func() {
			if e.T.Failed() {
				e.T.Logf("plugin stderr of this test: %s (kept with CAPO_TESTBED_KEEP=1)", path)
			}
			f.Close()
		})
	})
	return e.log
}

// CapoIPAMLog is capo-ipam's log file so far.
func (e *Env) CapoIPAMLog() string {
	b, _ := os.ReadFile(filepath.Join(e.Dir, "capo-ipam.log"))
	return string(b)
}

func (e *Env) teardown() {
	ctx := context.Background()
	if e.nativeV3() {
		e.deleteV3Pool(ctx)
		return
	}
	// The node's reservations share bucket objects with other nodes':
	// release them, and the store deletes what is left empty.
	store := calicostore.New(e.Calico, reserve.DefaultLimits)
	if held, err := store.ListNode(ctx, e.Node); err == nil && len(held) > 0 {
		refs := make([]reserve.Ref, 0, len(held))
		for _, h := range held {
			refs = append(refs, h.Ref())
		}
		if _, err := store.Release(ctx, refs); err != nil {
			e.T.Logf("testbed: releasing the reservations of %s: %v", e.Node, err)
		}
	}
	if _, err := e.Calico.IPPools().Delete(ctx, "pool-"+e.ID, options.DeleteOptions{}); err != nil {
		e.T.Logf("testbed: deleting pool of %s: %v", e.ID, err)
	}
	if e.Pool6 != nil {
		_, _ = e.Calico.IPPools().Delete(ctx, "pool6-"+e.ID, options.DeleteOptions{})
	}
}

// AddPool adds another IP pool that only the env's node uses: offset and
// prefix carve it out of the env's /24 (e.g. 64 and 27 for .64/27).
func (e *Env) AddPool(name string, offset, prefix int) *net.IPNet {
	e.T.Helper()
	ip := append(net.IP(nil), e.Pool.IP.To4()...)
	ip[3] = byte(offset)
	cidr := &net.IPNet{IP: ip, Mask: net.CIDRMask(prefix, 32)}
	pool := &apiv3.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiv3.IPPoolSpec{
			CIDR: cidr.String(), BlockSize: max(prefix, 26),
			NodeSelector: fmt.Sprintf("%s == '%s'", envLabel, e.ID), IPIPMode: apiv3.IPIPModeNever, VXLANMode: apiv3.VXLANModeNever,
		},
	}
	if _, err := e.Calico.IPPools().Create(context.Background(), pool, options.SetOptions{}); err != nil {
		e.T.Fatalf("pool %s: %v", name, err)
	}
	e.T.Cleanup(func() { _, _ = e.Calico.IPPools().Delete(context.Background(), name, options.DeleteOptions{}) })
	return cidr
}

// AnnotateNamespace sets annotations on the env's namespace.
func (e *Env) AnnotateNamespace(kv map[string]string) {
	e.patch(func(ctx context.Context, p []byte) error {
		_, err := e.Kube.CoreV1().Namespaces().Patch(ctx, e.Namespace, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}, map[string]any{"metadata": map[string]any{"annotations": kv}})
}

// PoolName is the name of the env's IPv4 pool.
func (e *Env) PoolName() string { return "pool-" + e.ID }
