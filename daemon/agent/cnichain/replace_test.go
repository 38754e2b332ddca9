package cnichain

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

var dsGVR = appsv1.SchemeGroupVersion.WithResource("daemonsets")

// replaceDaemonSet deletes the DaemonSet and, after wait, creates one of
// the same name with another UID, as helm upgrade --force or kubectl
// replace --force do; in both the typed and the metadata fakes.
func replaceDaemonSet(t *testing.T, kube *fake.Clientset, meta *metadatafake.FakeMetadataClient, ds *appsv1.DaemonSet, wait time.Duration) {
	ctx := context.Background()
	if err := kube.AppsV1().DaemonSets(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := meta.Resource(dsGVR).Namespace(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if wait < 0 {
		return // deleted for good
	}
	time.Sleep(wait)
	again := ds.DeepCopy()
	again.UID, again.ResourceVersion = "ds-2", ""
	if _, err := kube.AppsV1().DaemonSets(ds.Namespace).Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Error(err)
	}
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: again.ObjectMeta}
	if _, err := meta.Resource(dsGVR).Namespace(ds.Namespace).(metadatafake.MetadataClient).CreateFake(m, metav1.CreateOptions{}); err != nil {
		t.Error(err)
	}
}

func watchedRemoval(t *testing.T, grace time.Duration) (*Removal, *fake.Clientset, *metadatafake.FakeMetadataClient, *appsv1.DaemonSet) {
	pod, ds := agentPodAndSet()
	kube, meta := fake.NewClientset(pod, ds), metaOf(ds)
	r := NewRemoval(kube, meta, pod.Namespace, pod.Name, 0)
	r.grace = grace
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Watch(ctx)
	time.Sleep(200 * time.Millisecond) // the watch is open
	return r, kube, meta, ds
}

// A DaemonSet re-created under the same name runs the same agents: not an
// uninstall, even though the watch saw the old one go.
func TestRemovalNotForADaemonSetReplacedUnderTheSameName(t *testing.T) {
	r, kube, meta, ds := watchedRemoval(t, 2*time.Second)
	replaceDaemonSet(t, kube, meta, ds, 0)
	time.Sleep(200 * time.Millisecond)
	if going, why := r.removing(context.Background()); going {
		t.Fatalf("the DaemonSet was replaced, but removing says %q", why)
	}
}

// The agent may stop before the replacement exists: it waits a grace
// for a DaemonSet of the same name to come back.
func TestRemovalWaitsForAReplacement(t *testing.T) {
	r, kube, meta, ds := watchedRemoval(t, 3*time.Second)
	go replaceDaemonSet(t, kube, meta, ds, 500*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // deleted, not yet re-created
	if going, why := r.removing(context.Background()); going {
		t.Fatalf("the DaemonSet came back within the grace, but removing says %q", why)
	}
}

// A DaemonSet that stays gone for the grace is an uninstall.
func TestRemovalWhenTheDaemonSetStaysGone(t *testing.T) {
	r, kube, meta, ds := watchedRemoval(t, 300*time.Millisecond)
	replaceDaemonSet(t, kube, meta, ds, -1)
	start := time.Now()
	going, why := r.removing(context.Background())
	if !going || !strings.Contains(why, "gone") {
		t.Fatalf("removing = %v %q, want going", going, why)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("decided after %s, before the grace", waited)
	}
}

// Uninstalling restores the chain and nothing else: the ADD records stay
// for an agent that comes later.
func TestUninstallKeepsTheADDRecords(t *testing.T) {
	dir := t.TempDir()
	conf, bin := filepath.Join(dir, "net.d"), filepath.Join(dir, "bin")
	for _, d := range []string{conf, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	orig, err := os.ReadFile("../../../install/testdata/calico-manifest.conflist")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "10-calico.conflist"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"capo-ipam", "capo-ipam-kube"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := install.Options{CNIBinDir: bin, CNIConfDir: conf, Source: filepath.Join(dir, "capo-ipam")}
	if _, err := install.Install(opts); err != nil {
		t.Fatal(err)
	}
	j := journal.Dir{Root: filepath.Join(dir, "state")}
	if err := j.RecordAddrs(&journal.AddrRecord{Network: "k8s-pod-network", ContainerID: "c1", IfName: "eth0", Pod: wire.PodRef{Namespace: "db", Name: "redis-0"}, IPs: []string{"10.0.0.7"}, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r, kube, meta, ds := watchedRemoval(t, 100*time.Millisecond)
	replaceDaemonSet(t, kube, meta, ds, -1)
	m := &Manager{opts: opts, metrics: testMetrics(), journal: j}
	m.OnExit(r)
	if got, _ := os.ReadFile(filepath.Join(conf, "10-calico.conflist")); string(got) != string(orig) {
		t.Fatal("the chain was not restored")
	}
	if recs, _ := j.AddrRecords(); len(recs) != 1 {
		t.Fatalf("%d ADD records after the uninstall, want 1 kept", len(recs))
	}
}

// testMetrics are the manager's metrics, on no registry.
func testMetrics() Metrics {
	return Metrics{
		Installed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "installed"}),
		Reapplied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reapplied"}, []string{"what"}),
		Errors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "errors"}),
	}
}
