package nodebed

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// StateDir is the chart's host state dir: capo-ipam's journal and ADD records.
var StateDir = journal.Dir{Root: journal.DefaultStateDir}

// OptIn annotates the node, as the README tells an operator to, and waits
// until the agent pod has put capo-ipam into the chain. After t it opts out
// and waits until Calico's chain is back.
func (b *Bed) OptIn(t testing.TB) {
	t.Helper()
	b.annotateNode(t, selection.Enabled)
	Eventually(t, 30*time.Second, "the agent to install capo-ipam on opt-in", CapoInChain)
	t.Cleanup(func() {
		b.annotateNode(t, "")
		Eventually(t, 30*time.Second, "Calico's own chain back after opt-out", b.CalicoOnly)
	})
}

// OptInOnly annotates the node and leaves it so.
func (b *Bed) OptInOnly(t testing.TB) { b.annotateNode(t, selection.Enabled) }

// OptOut removes the annotation.
func (b *Bed) OptOut(t testing.TB) { b.annotateNode(t, "") }

func (b *Bed) annotateNode(t testing.TB, value string) {
	t.Helper()
	b.annotateNodeNamed(t, b.NodeName, value)
}

func (b *Bed) annotateNodeNamed(t testing.TB, node, value string) {
	t.Helper()
	var v any = value
	if value == "" {
		v = nil // a merge patch deletes a key set to null
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{selection.NodeAnnotation: v}}})
	if _, err := b.Kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// CapoInChain reports whether capo-ipam is installed and wraps Calico's
// ipam in the conflist the runtime reads.
func CapoInChain() error {
	st, err := ReadCNI()
	if err != nil {
		return err
	}
	if !st.CapoInstalled {
		return fmt.Errorf("capo-ipam and %s are not both in %s: found %v", wire.KubeHelper, CNIBinDir, st.CapoFiles)
	}
	var list struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Type     string
				Delegate struct{ Type string }
			}
		}
	}
	if err := json.Unmarshal(st.Conflist, &list); err != nil || len(list.Plugins) == 0 {
		return fmt.Errorf("%s unreadable (%v): %s", Conflist, err, st.Conflist)
	}
	if ipam := list.Plugins[0].IPAM; ipam.Type != "capo-ipam" || ipam.Delegate.Type != "calico-ipam" {
		return fmt.Errorf("%s: the calico plugin's ipam is %q delegating to %q, want capo-ipam over calico-ipam", Conflist, ipam.Type, ipam.Delegate.Type)
	}
	return nil
}

// Held checks what capo promises for an address of a pod gone from it:
// Calico skips it (it is in an IPReservation), capo's record names the
// pod, and Calico IPAM no longer has it allocated. The pod's UID tells
// its incarnations apart (a StatefulSet pod comes back under its name).
func (b *Bed) Held(ctx context.Context, pool *net.IPNet, ip string, pod *corev1.Pod) error {
	return b.HeldOn(ctx, b.NodeName, pool, ip, pod)
}

// HeldOn is Held for a pod that ran on the named node, where capo's
// record for it is kept.
func (b *Bed) HeldOn(ctx context.Context, node string, pool *net.IPNet, ip string, pod *corev1.Pod) error {
	reserved, err := b.Reserved(ctx)
	if err != nil {
		return err
	}
	if !reserved[ip] {
		return fmt.Errorf("%s (of pod %s/%s) is in no IPReservation: Calico may hand it out", ip, pod.Namespace, pod.Name)
	}
	entries, err := b.ReservationsOn(ctx, node)
	if err != nil {
		return err
	}
	if e, ok := entries[ip]; !ok || e.Pod != pod.Name || e.Namespace != pod.Namespace || e.PodUID != string(pod.UID) {
		return fmt.Errorf("capo's record for %s is %+v, want pod %s/%s uid %s", ip, entries[ip], pod.Namespace, pod.Name, pod.UID)
	}
	allocs, err := b.Allocations(ctx, pool)
	if err != nil {
		return err
	}
	if a, ok := allocs[ip]; ok {
		return fmt.Errorf("%s is reserved but still allocated in Calico IPAM to handle %s (pod %s/%s)", ip, a.Handle, a.Namespace, a.Pod)
	}
	return nil
}

// AllocatedTo checks that Calico IPAM holds ip for the pod's current
// sandbox (handle k8s-pod-network.<sandbox id>) and that it is not reserved.
func (b *Bed) AllocatedTo(ctx context.Context, pool *net.IPNet, ip string, pod *corev1.Pod) error {
	allocs, err := b.Allocations(ctx, pool)
	if err != nil {
		return err
	}
	want := "k8s-pod-network." + pod.Annotations["cni.projectcalico.org/containerID"]
	if a := allocs[ip]; a.Handle != want || a.Pod != pod.Name {
		return fmt.Errorf("%s: Calico IPAM has %+v, want handle %s of pod %s", ip, a, want, pod.Name)
	}
	reserved, err := b.Reserved(ctx)
	if err != nil {
		return err
	}
	if reserved[ip] {
		return fmt.Errorf("%s is allocated to %s and also reserved", ip, pod.Name)
	}
	return nil
}
