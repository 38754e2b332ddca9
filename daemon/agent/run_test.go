package agent

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/projectcalico/calico/libcalico-go/lib/watch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup/apigrouptest"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// fakeCalico is the part of libcalico-go's client the agent builds on; any
// other call panics (the embedded interface is nil).
type fakeCalico struct {
	clientv3.Interface
	objs *reservetest.Objects
}

type fakeReservations struct{ *reservetest.Objects }

func (fakeReservations) Watch(context.Context, options.ListOptions) (watch.Interface, error) {
	return nil, errors.New("no watch in this fake")
}

func (f fakeCalico) IPReservations() clientv3.IPReservationInterface {
	return fakeReservations{Objects: f.objs}
}

func (f fakeCalico) IPAM() ipam.Interface { return nil }

// testAgent is an agent on fake clients, its socket and state in a
// temporary directory, CNI management on.
func testAgent(t *testing.T, metricsAddr string) *Agent {
	dir := t.TempDir()
	opts := Options{
		NodeName: "n1", Socket: filepath.Join(dir, "agent.sock"), StateDir: filepath.Join(dir, "state"),
		MetricsAddr: metricsAddr, ConfigNamespace: "capo-system", ConfigMap: "capo-config",
		DrainInterval: time.Hour, SweepInterval: time.Hour,
		ManageCNI: true, CNIConfDir: filepath.Join(dir, "net.d"), CNIBinDir: filepath.Join(dir, "bin"),
		CapoIPAMSource: filepath.Join(dir, "capo-ipam"), CNIResync: time.Hour,
	}
	kube := fake.NewClientset()
	apigrouptest.ServeV1(t, kube)
	return New(opts, kube, metadatafake.NewSimpleMetadataClient(metaScheme()), fakeCalico{objs: reservetest.NewObjects()})
}

// A fatal error with CNI management on used to hang Run: the wait for the
// CNI manager ran before the cancel that ends it. Run must return the
// error, not ready, within a bound.
func TestRunReturnsAFatalErrorWithCNIManagementOn(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	a := testAgent(t, busy.Addr().String()) // the metrics port is taken: a fatal error
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned no error with its metrics port taken")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of a fatal error")
	}
	if ok, why := a.readiness.Ready(); ok {
		t.Fatalf("ready after Run returned: %q", why)
	}
}

// Stopped by its context, Run returns too, and /readyz says it is stopping.
func TestRunStopsWithItsContext(t *testing.T) {
	a := testAgent(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for ok, _ := a.readiness.Ready(); !ok; ok, _ = a.readiness.Ready() {
		if time.Now().After(deadline) {
			_, why := a.readiness.Ready()
			t.Fatalf("not ready: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of its context ending")
	}
	if ok, why := a.readiness.Ready(); ok || !strings.Contains(why, "(stopping)") {
		t.Fatalf("readiness after Run returned: %v %q, want not ready (stopping)", ok, why)
	}
}

// readyClusterInfo is a datastore calico-node initialised and Calico has
// not locked.
type readyClusterInfo struct {
	clientv3.ClusterInformationInterface
}

func (readyClusterInfo) Get(context.Context, string, options.GetOptions) (*apiv3.ClusterInformation, error) {
	ci := apiv3.NewClusterInformation()
	ready := true
	ci.Spec.DatastoreReady = &ready
	return ci, nil
}

func (fakeCalico) ClusterInformation() clientv3.ClusterInformationInterface {
	return readyClusterInfo{}
}

func metaScheme() *runtime.Scheme {
	s := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(s)
	return s
}
