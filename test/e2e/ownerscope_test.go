package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/test/testbed"
)

// A listed owner kind the API server serves as cluster-scoped is refused
// at start, with an error that names it and says what to do, and its
// members keep their reservations: looked up in the member's namespace,
// a cluster-scoped owner is never found, and every member would otherwise
// be released as owner-gone on the first pass.
func TestClusterScopedOwnerKindRefused(t *testing.T) {
	ctx := context.Background()
	if err := bed.CreateCRDScoped(ctx, "grids.capo-test.io", "Grid", "grids", "Cluster"); err != nil {
		t.Fatal(err)
	}
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\nownerKinds:\n- {group: grids.capo-test.io, version: v1, kind: Grid, resource: grids}\n"))
	grids := env.Dynamic().Resource(schema.GroupVersionResource{Group: "grids.capo-test.io", Version: "v1", Resource: "grids"})
	g, err := grids.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "grids.capo-test.io/v1", "kind": "Grid", "metadata": map[string]any{"name": "g-" + env.ID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = grids.Delete(context.Background(), g.GetName(), metav1.DeleteOptions{}) })
	owned := testbed.WithOwnerRef(metav1.OwnerReference{APIVersion: "grids.capo-test.io/v1", Kind: "Grid", Name: g.GetName(), UID: g.GetUID()})
	m := env.AddPods(g.GetName(), 1, env.Conflist(testbed.Capo), testbed.StatefulPod(g.GetName()), owned)
	evict(t, env, m[0])

	c := env.StartController("c1")
	time.Sleep(3 * time.Second) // passes at 1s
	if !held(env, m[0].IP()) || c.Metric("capo_controller_releases_total", `reason="owner-gone"`) != 0 {
		t.Fatalf("%s's %s released while its Grid exists", m[0].Pod.Name, m[0].IP())
	}
	if log := c.Log(); !strings.Contains(log, "an owner kind is refused") || !strings.Contains(log, "grids is cluster-scoped") || !strings.Contains(log, "remove the entry from ownerKinds") {
		t.Fatalf("the controller does not say the kind is refused:\n%s", log)
	}
}
