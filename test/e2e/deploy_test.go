package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/deploy"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/test/testbed"
)

func renderChart(t *testing.T, release, namespace string, values map[string]any, apiVersions ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := deploy.Render(release, namespace, values, apiVersions...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	if _, err := bed.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Every object the chart renders, with default and non-default values, is
// accepted by a real API server (schema, validation, admission), Prometheus
// operator CRDs included; the plain manifests too.
func TestChartAppliesToARealAPIServer(t *testing.T) {
	ctx := context.Background()
	if err := bed.ApplyPrometheusCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	id := bed.Unique("")
	cases := map[string]map[string]any{
		"defaults, with the Prometheus operator": nil,
		"etcd, no monitoring, three controllers": {
			"datastore":  map[string]any{"type": "etcdv3", "etcdEndpoints": "https://10.0.0.10:2379", "etcdTLSSecret": "calico-etcd-secrets"},
			"controller": map[string]any{"replicas": 3, "tolerations": []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}}},
			"agent":      map[string]any{"manageCNI": false, "cniBinDir": "/usr/libexec/cni"},
			"metrics":    map[string]any{"serviceMonitor": map[string]any{"enabled": false}, "grafanaDashboard": map[string]any{"enabled": false}},
			"config":     map[string]any{"ipReserveMaxCount": 5000, "podSelectors": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "In", "values": []any{"zookeeper", "kafka"}}}}}},
		},
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			ns := "capo-dry-" + id + "-" + strings.Fields(name)[0][:4]
			createNamespace(t, strings.TrimSuffix(ns, ","))
			objs := renderChart(t, "capo", strings.TrimSuffix(ns, ","), values, deploy.MonitoringAPI...)
			for _, err := range bed.Apply(ctx, objs, true) {
				t.Error(err)
			}
		})
	}
	// The API server here is 1.30+: the admission policy's file applies too.
	t.Run("plain manifests", func(t *testing.T) {
		createNamespace(t, "capo-system")
		for _, file := range []string{deploy.ManifestsFile(), deploy.AdmissionManifestsFile()} {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := deploy.Objects(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range bed.Apply(ctx, objs, true) {
				t.Error(err)
			}
		}
	})
}

// The agent and the controller run with tokens bound to exactly the chart's
// roles, through every path that reads or writes something.
func TestChartRBACIsEnough(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, NoAgent: true})
	ns := "capo-rbac-" + env.ID
	createNamespace(t, ns)
	var rbac []*unstructured.Unstructured
	for _, o := range renderChart(t, "capo", ns, nil, deploy.ManifestAPIVersions...) {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			rbac = append(rbac, o)
		}
	}
	for _, err := range bed.Apply(ctx, rbac, false) {
		t.Fatal(err)
	}
	agentKC, err := bed.ServiceAccountKubeconfig(ctx, ns, "capo-agent")
	if err != nil {
		t.Fatal(err)
	}
	ctrlKC, err := bed.ServiceAccountKubeconfig(ctx, ns, "capo-controller")
	if err != nil {
		t.Fatal(err)
	}
	env.Agent = env.StartAgentWith(testbed.AgentOptions{Kubeconfig: agentKC, Namespace: ns})

	// Agent: decide and reserve, from the ADD record and from Calico's handle.
	conflist := env.Conflist(testbed.Capo)
	sbs := env.AddPods("kafka", 7, conflist, testbed.OwnedBy(env.CreateStatefulSet("kafka", 7)))
	if err := (journal.Dir{Root: env.StateDir()}).ForgetAddrs(testbed.NetworkName, sbs[0].ContainerID, "eth0"); err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs[:2] {
		env.Evict(sb.Pod.Name)
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
		if !held(env, sb.IP()) {
			t.Fatalf("%s not reserved under the chart's agent role", sb.IP())
		}
	}
	// A teardown that went around capo-ipam: the sweep reads handles and
	// pools, and reserves.
	env.Evict(sbs[2].Pod.Name)
	if err := sbs[2].DelWith(ctx, env.Conflist(testbed.PlainCalico)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the bypassed teardown reserved", func() bool { return held(env, sbs[2].IP()) })
	if got := env.Agent.Metric("capo_agent_del_decisions_total", `outcome="failed"`); got != 0 {
		t.Fatalf("%v teardowns failed under the chart's agent role", got)
	}

	// Controller: a TTL release, a lost node, an Event, a release by hand.
	setConfig := func(yaml string) {
		cm, err := bed.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "capo-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["config.yaml"] = yaml
		if _, err := bed.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setConfig(configWith("ipReserveTime: 1h\n"))
	c := env.StartControllerWith("rbac", testbed.AgentOptions{Kubeconfig: ctrlKC, Namespace: ns})
	eventually(t, 15*time.Second, "the controller leads", c.Leading)
	lost := sbs[4]
	env.MarkRunning(lost)
	c.WaitMetricAtLeast(1, "capo_controller_release_pass_duration_seconds_count")
	env.SetNodeReady(corev1.ConditionFalse)
	c.WaitMetricAtLeast(1, "capo_controller_lost_nodes")
	env.DeletePod(lost.Pod.Name, 0)
	eventually(t, 10*time.Second, "the lost node's pod reserved", func() bool { return held(env, lost.IP()) })
	// The pool's use as the leader publishes it: 8 addresses, the held ones
	// counted as taken (the controller reads the pool under its own role).
	pool := `pool="` + env.PoolName() + `"`
	eventually(t, 70*time.Second, "the pool's use published", func() bool {
		return c.Metric("capo_controller_pool_addresses", pool, `state="reserved"`) >= 3
	})
	// The states partition the pool: they add up to its size.
	size, alloc, res, free := c.Metric("capo_controller_pool_size_addresses", pool), c.Metric("capo_controller_pool_addresses", pool, `state="allocated"`),
		c.Metric("capo_controller_pool_addresses", pool, `state="reserved"`), c.Metric("capo_controller_pool_addresses", pool, `state="free"`)
	if size != 8 || alloc+res+free != size || alloc < 4 {
		t.Errorf("pool use: size %v allocated %v reserved %v free %v; want 8 addresses in states adding up to them, at least the 4 running pods allocated", size, alloc, res, free)
	}
	env.SetNodeReady(corev1.ConditionTrue)
	// Releases judged by an owner or a namespace, confirmed by a GET of it.
	gone := memberEntry(env, time.Now(), "10.254.9.1", "gone-0", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "uid-never-existed"}})
	elsewhere := memberEntry(env, time.Now(), "10.254.9.2", "x-0", nil)
	elsewhere.Namespace = "ns-never-" + env.ID
	seed(t, env, gone, elsewhere)
	c.WaitMetric(1, "capo_controller_releases_total", `reason="owner-gone"`)
	c.WaitMetric(1, "capo_controller_releases_total", `reason="namespace-gone"`)
	if n := c.Metric("capo_controller_releases_held_back_total", `cause="read-failed"`); n != 0 {
		t.Errorf("%v releases held back because their live read failed under the chart's controller role", n)
	}
	askRelease(t, env, ns, sbs[1].IP())
	eventually(t, 10*time.Second, "the release by hand", func() bool { return !held(env, sbs[1].IP()) })
	eventually(t, 10*time.Second, "an Event on the evicted pod", func() bool {
		evs, err := bed.Kube.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=IPReservationReleased"})
		return err == nil && len(evs.Items) > 0
	})
	setConfig(configWith("ipReserveTime: 1s\n"))
	eventually(t, 15*time.Second, "TTL releases", func() bool { return len(env.Reservations()) == 0 })

	// The chart's admission policy: capo's identities write capo's objects
	// (all of the above passed under it), never an operator's.
	operators := operatorReservation(t, "operators-"+env.ID)
	for _, kc := range []string{agentKC, ctrlKC} {
		eventually(t, 20*time.Second, "the chart's policy refusing an update of the operator's IPReservation", func() bool {
			return apierrors.IsForbidden(dryRunUpdate(t, kc, operators))
		})
		if err := dryRunDelete(t, kc, operators); !apierrors.IsForbidden(err) {
			t.Errorf("deleting the operator's IPReservation as %s: %v, want forbidden", kc, err)
		}
		if err := dryRunWrite(t, kc); !apierrors.IsForbidden(err) {
			t.Errorf("creating an IPReservation not labelled capo's as %s: %v, want forbidden", kc, err)
		}
	}

	for who, log := range map[string]string{"agent": env.Agent.Log(), "controller": c.Log()} {
		if strings.Contains(strings.ToLower(log), "forbidden") {
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(strings.ToLower(line), "forbidden") {
					t.Errorf("%s: %s", who, line)
					break
				}
			}
		}
	}
}

var ipReservations = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipreservations"}

// operatorReservation is an IPReservation an operator wrote, as bed's admin.
func operatorReservation(t *testing.T, name string) string {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPReservation",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"reservedCIDRs": []any{"192.0.2.77/32"}},
	}}
	if _, err := dynamicAs(t, bed.Kubeconfig).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dynamicAs(t, bed.Kubeconfig).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func dynamicAs(t *testing.T, kubeconfig string) dynamic.ResourceInterface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(ipReservations)
}

// dryRunUpdate adds an address to the object as kubeconfig's identity,
// without storing it: admission runs as for a real write.
func dryRunUpdate(t *testing.T, kubeconfig, name string) error {
	obj, err := dynamicAs(t, bed.Kubeconfig).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(obj.Object, []any{"192.0.2.77/32", "192.0.2.78/32"}, "spec", "reservedCIDRs")
	_, err = dynamicAs(t, kubeconfig).Update(context.Background(), obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func dryRunDelete(t *testing.T, kubeconfig, name string) error {
	return dynamicAs(t, kubeconfig).Delete(context.Background(), name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
}
