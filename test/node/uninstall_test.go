package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/nodebed"
)

// cycles of install and uninstall per way of uninstalling: the agent's
// exit races the deletion of its own RBAC, so once is not proof.
const cycles = 3

// Uninstalling capo from an opted-in node gives the node Calico's chain
// back (the conflist byte for byte, no capo-ipam), whichever way it goes:
// `kubectl delete -f` of the manifest `kubectl apply -f` installed (every
// object at once, in file order), or Helm's uninstall order. No Lease stays
// behind; capo-ipam's ADD records do, on purpose: they are harmless, and
// an agent installed later (or one whose DaemonSet was only replaced)
// sweeps them for teardowns that went around capo-ipam.
func TestUninstallRestoresCalico(t *testing.T) {
	ctx := context.Background()
	uninstallForThisTest(t)
	manifest, err := bed.WriteManifest(nil)
	if err != nil {
		t.Fatal(err)
	}
	ways := []struct {
		name               string
		install, uninstall func() error
	}{
		{"kubectl apply -f, kubectl delete -f", func() error {
			_, err := bed.Kubectl(ctx, "apply", "-f", manifest)
			return err
		}, func() error {
			_, err := bed.Kubectl(ctx, "delete", "-f", manifest, "--timeout=90s")
			return err
		}},
		{"helm install, helm uninstall order", func() error { return bed.InstallChart(ctx, nil) }, func() error { return bed.UninstallChart(ctx) }},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			for i := 1; i <= cycles; i++ {
				uninstallCycle(t, i, w.install, w.uninstall)
			}
		})
	}
}

func uninstallCycle(t *testing.T, i int, install, uninstall func() error) {
	ctx := context.Background()
	start := time.Now().Add(-time.Second) // events carry whole seconds
	if err := install(); err != nil {
		t.Fatalf("cycle %d: install: %v", i, err)
	}
	if err := bed.WaitCapoReady(ctx, nodebed.CapoTags[0]); err != nil {
		t.Fatalf("cycle %d: %v\n%s", i, err, bed.Diagnose(ctx))
	}
	if err := noMissingAccount(ctx, start); err != nil {
		t.Errorf("cycle %d: %v", i, err)
	}
	bed.OptInOnly(t)
	nodebed.Eventually(t, 30*time.Second, "capo-ipam in the chain", nodebed.CapoInChain)
	logs := followAgent(t)
	if err := uninstall(); err != nil {
		t.Fatalf("cycle %d: uninstall: %v", i, err)
	}
	if err := bed.WaitCapoGone(ctx); err != nil {
		t.Fatalf("cycle %d: %v", i, err)
	}
	bed.OptOut(t)
	if err := bed.CalicoOnly(); err != nil {
		t.Errorf("cycle %d: after uninstall the node is not Calico's own: %v\nthe agent's last words:\n%s", i, err, logs())
		if err := bed.RestoreCalicoCNI(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bed.Kube.CoordinationV1().Leases(nodebed.Namespace).Get(ctx, "capo-controller", metav1.GetOptions{}); err == nil {
		t.Errorf("cycle %d: the controller's Lease %s/capo-controller outlives the uninstall", i, nodebed.Namespace)
	}
}

// noMissingAccount fails when a controller could not create capo's pods
// because their ServiceAccount did not exist yet: the objects were created
// out of order.
func noMissingAccount(ctx context.Context, since time.Time) error {
	evs, err := bed.Kube.CoreV1().Events(nodebed.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.LastTimestamp.After(since) && strings.Contains(e.Message, "serviceaccount") {
			return fmt.Errorf("%s %s: %s (ServiceAccounts and RBAC must come before the workloads)", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	return nil
}

// followAgent streams the agent pod's log from now on; the returned func
// gives its tail, the agent's own account of its exit.
func followAgent(t *testing.T) func() string {
	t.Helper()
	agent, err := bed.AgentPod(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	cmd := exec.Command(bed.Node.Kubectl, "--kubeconfig="+bed.Kubeconfig, "-n", nodebed.Namespace, "logs", "-f", "--tail=1", agent.Name)
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &buf}, lockedWriter{&mu, &buf}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		return strings.Join(lines[max(0, len(lines)-15):], "\n")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// The documented command (docs/operations.md) for the reservations an uninstall leaves behind
// (on the Kubernetes datastore) removes capo's IPReservations, run as
// written with kubectl.
func TestDocumentedCleanupRemovesReservations(t *testing.T) {
	ctx := context.Background()
	cmd := documentedCleanup(t)
	pool, cidr := bed.NewPool(t, 29)
	ns := bed.Namespace(t, "cleanup", pool, true)
	bed.OptIn(t)
	// etcd-0's successor must not take its address back: the reservation
	// is what the cleanup is to remove.
	bed.StatefulSet(t, ns, "etcd", 1, nodebed.Workload{NoReturn: true})
	old := bed.WaitRunning(t, ns, "app=etcd", 1)["etcd-0"]
	if err := bed.Kube.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 30*time.Second, "etcd-0's address held", func() error { return bed.Held(ctx, cidr, old.Status.PodIP, old) })
	uninstallForThisTest(t)
	if len(capoReservations(t)) == 0 {
		t.Fatal("no capo IPReservation left after the uninstall: nothing for the cleanup to remove")
	}
	out, err := bed.Kubectl(ctx, strings.Fields(strings.TrimPrefix(cmd, "kubectl "))...)
	if err != nil {
		t.Fatal(err)
	}
	if left := capoReservations(t); len(left) > 0 {
		bed.DeleteReservations(t, left)
		t.Fatalf("the documented `%s` left capo's IPReservations %v (kubectl said: %s)", cmd, left, strings.TrimSpace(out))
	}
}

// uninstallForThisTest uninstalls the chart, and puts Calico's chain and
// the chart back for the tests after this one.
func uninstallForThisTest(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := bed.UninstallChart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.RestoreCalicoCNI()
		if err := bed.InstallChart(ctx, nil); err != nil {
			t.Errorf("reinstalling the chart for later tests: %v", err)
		}
	})
}

// documentedCleanup is the kubectl command docs/operations.md gives for deleting capo's
// IPReservations, with <node> filled in.
func documentedCleanup(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(kubectl delete [^`]*ipreservation[^`]*)`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/operations.md gives no kubectl command that deletes IPReservations; update this test with the one it gives")
	}
	return strings.ReplaceAll(string(m[1]), "<node>", bed.NodeName)
}

// capoReservations are the names of capo's IPReservation objects: its
// buckets, and objects of the per-node layout older capo wrote.
func capoReservations(t *testing.T) []string {
	t.Helper()
	list, err := bed.Calico.IPReservations().List(context.Background(), options.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		if _, _, bucket := calicostore.ParseBucketName(r.Name); bucket || strings.HasPrefix(r.Name, "capo-") {
			names = append(names, r.Name)
		}
	}
	return names
}
