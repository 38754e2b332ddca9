// Package testbed runs capo's end-to-end tests against real things: an etcd
// and a kube-apiserver on loopback, the Calico CRDs and resources, the real
// calico and calico-ipam binaries, and pods whose sandboxes are network
// namespaces driven through libcni the way containerd drives them.
//
// It must run as root. Everything it makes (processes, namespaces, files) is
// removed when the test binary ends, is interrupted, or, if it was killed,
// by the next run's sweep.
package testbed

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Datastore is one of Calico's two datastores.
type Datastore string

const (
	Kubernetes Datastore = "kubernetes"
	Etcd       Datastore = "etcdv3"
)

// Datastores lists both: every end-to-end scenario runs on each.
var Datastores = []Datastore{Kubernetes, Etcd}

// Bed is the process-wide set of servers and binaries.
type Bed struct {
	Dir          string // everything the bed writes lives here
	Bin          *Binaries
	CNIBinDir    string // calico, calico-ipam, capo-ipam: the node's /opt/cni/bin
	EtcdURL      string
	APIServerURL string
	Kubeconfig   string // admin kubeconfig
	REST         *rest.Config
	Kube         kubernetes.Interface

	calico map[Datastore]clientv3.Interface
	extra  extraBuilds
	logf   func(string, ...any)
	sp     *spawner
	opts   Options
	pki    *pki
	procs  []*proc
	seq    atomic.Int64
	envSeq atomic.Int64
	region int
	lock   *os.File // holds the region

	mu      sync.Mutex
	cleanup []func() // netns and other host state, undone on Stop
}

// Main is TestMain for packages that use the bed: it starts it, runs the
// tests, and tears it down, also on SIGINT/SIGTERM.
func Main(m *testing.M, out **Bed) int { return MainWith(m, out, Options{}) }

// MainWith is Main on a bed started with opts (see Options).
func MainWith(m *testing.M, out **Bed, opts Options) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("testbed: -short given, skipping end-to-end tests")
		return 0
	}
	if Listing() {
		return m.Run() // -test.list runs no test: no bed to start
	}
	if os.Geteuid() != 0 {
		fmt.Println("testbed: not root, skipping end-to-end tests (they create network namespaces and run Calico's CNI; run as root)")
		return 0
	}
	// libcalico-go logs every call at info through logrus; keep test output for tests.
	logrus.SetLevel(logrus.WarnLevel)
	b, err := StartWith(context.Background(), func(f string, a ...any) { log.Printf(f, a...) }, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		return 1
	}
	*out = b
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "testbed: %v: cleaning up\n", s)
		b.Stop()
		os.Exit(2)
	}()
	code := m.Run()
	signal.Stop(sig)
	b.Stop()
	return code
}

// Listing says whether the test binary was asked only for its tests'
// names (-test.list, as test/stages.sh asks to shard a package).
func Listing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// Start builds what is missing and starts the servers.
func Start(ctx context.Context, logf func(string, ...any)) (*Bed, error) {
	return StartWith(ctx, logf, Options{})
}

// StartWith is Start with options (see Options).
func StartWith(ctx context.Context, logf func(string, ...any), opts Options) (*Bed, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the end-to-end tests create network namespaces and must run as root")
	}
	if err := EnsureNetnsMount(); err != nil {
		return nil, err
	}
	sweepStale(logf)
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", dirPrefix, os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b := &Bed{Dir: dir, sp: newSpawner(), calico: map[Datastore]clientv3.Interface{}, logf: logf, opts: opts}
	var err2 error
	if b.region, b.lock, err2 = claimRegion(); err2 != nil {
		return nil, err2
	}
	if err := b.start(ctx, root, logf); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *Bed) start(ctx context.Context, root string, logf func(string, ...any)) error {
	var err error
	if b.Bin, err = BuildBinaries(root, b.Dir, b.opts.NoCapoBinaries, logf); err != nil {
		return err
	}
	if err := b.installCNIBinaries(); err != nil {
		return err
	}
	pk, err := writePKI(b.Dir, b.opts.serverIPs())
	if err != nil {
		return err
	}
	b.pki = pk
	etcd, etcdURL, err := startEtcd(b.sp, b.Bin.Etcd, b.Dir, b.opts.EtcdPort)
	if err != nil {
		return err
	}
	b.procs, b.EtcdURL = append(b.procs, etcd), etcdURL
	api, apiURL, err := startAPIServer(b.sp, b.Bin.KubeAPIServer, b.Dir, etcdURL, pk, b.opts)
	if err != nil {
		return err
	}
	b.procs, b.APIServerURL = append(b.procs, api), apiURL
	b.Kubeconfig = filepath.Join(b.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(b.Kubeconfig, apiURL, pk.CAPEM, adminToken); err != nil {
		return err
	}
	if b.REST, err = clientcmd.BuildConfigFromFlags("", b.Kubeconfig); err != nil {
		return err
	}
	b.REST.QPS, b.REST.Burst = 200, 400
	if b.Kube, err = kubernetes.NewForConfig(b.REST); err != nil {
		return err
	}
	if b.opts.CalicoCRDs == NativeV3 {
		if err := b.applyV3CRDs(ctx, root); err != nil {
			return err
		}
		if err := b.initNativeV3(ctx); err != nil {
			return err
		}
		// libcalico-go v3.31 speaks only v1 on Kubernetes: etcdv3 alone gets its client.
		return b.initCalico(ctx, Etcd)
	}
	if err := b.applyCalicoCRDs(ctx, root); err != nil {
		return err
	}
	for _, ds := range Datastores {
		if err := b.initCalico(ctx, ds); err != nil {
			return err
		}
	}
	return nil
}

// installCNIBinaries lays out the node's CNI bin dir: the one calico binary
// acts as calico or calico-ipam by its file name.
func (b *Bed) installCNIBinaries() error {
	b.CNIBinDir = filepath.Join(b.Dir, "cni-bin")
	if err := os.MkdirAll(b.CNIBinDir, 0o755); err != nil {
		return err
	}
	for name, src := range map[string]string{"calico": b.Bin.Calico, "calico-ipam": b.Bin.Calico, "capo-ipam": b.Bin.CapoIPAM, "capo-ipam-kube": b.Bin.CapoIPAMKube} {
		if src == "" {
			continue // not built (Options.NoCapoBinaries)
		}
		if err := copyFile(src, filepath.Join(b.CNIBinDir, name), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Calico is the libcalico-go client for a datastore.
func (b *Bed) Calico(ds Datastore) clientv3.Interface { return b.calico[ds] }

// onStop registers host state to undo when the bed stops.
func (b *Bed) onStop(f func()) {
	b.mu.Lock()
	b.cleanup = append(b.cleanup, f)
	b.mu.Unlock()
}

// Stop undoes everything the bed made. Safe to call more than once.
func (b *Bed) Stop() {
	b.mu.Lock()
	fns := b.cleanup
	b.cleanup = nil
	b.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	for i := len(b.procs) - 1; i >= 0; i-- {
		b.procs[i].stop()
	}
	b.procs = nil
	if os.Getenv("CAPO_TESTBED_KEEP") == "" {
		_ = os.RemoveAll(b.Dir)
	}
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}

// Unique returns a name unique within this run.
func (b *Bed) Unique(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, b.seq.Add(1))
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
