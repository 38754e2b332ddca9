package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/test/testbed"
)

// The agent is up, but its reservation writes are refused (an admission
// policy refusing its identity alone; in life RBAC drift, a webhook) while
// the controller's are allowed, and Calico's GC runs with a short leak
// grace. An evicted member's DEL is journaled; the agent must turn not
// ready so the controller covers the node: the address is never free and
// unreserved, and the next pod does not get it. Before readiness meant
// "can reserve", the agent stayed Ready and the next pod took the address.
func TestAgentWritesRefused(t *testing.T) {
	ctx := context.Background()
	r := refusedWrites(t, testbed.AgentOptions{})
	env, victim, conflist, user := r.env, r.victim, r.conflist, r.user
	// Past the GC's grace: at no moment free without a reservation.
	ip := net.ParseIP(victim.IP())
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if !env.Allocated(ip) && !held(env, victim.IP()) {
			t.Fatalf("%s is free and unreserved: the agent (ready: %v) could not write and the controller did not cover its node", victim.IP(), agentReady(env.Agent))
		}
	}
	next := env.NewSandbox(env.CreatePod("redis-new"), conflist)
	if err := next.Add(ctx); err == nil && next.IP() == victim.IP() {
		t.Fatalf("the next pod got the evicted member's %s", victim.IP())
	}
	if agentReady(env.Agent) {
		t.Fatal("the agent is ready while its writes are refused")
	}
	if got := env.Agent.Metric("capo_agent_not_ready", `reason="forbidden"`); got != 1 {
		t.Fatalf("capo_agent_not_ready{reason=\"forbidden\"} = %v", got)
	}
	// The refusal lifted, the agent proves itself on its own.
	deleteRefusal(t, user)
	eventually(t, 20*time.Second, "the agent ready again", func() bool { return agentReady(env.Agent) })
	env.Agent.WaitMetric(1, "capo_agent_can_reserve")
}

func agentReady(a *testbed.Agent) bool {
	resp, err := http.Get("http://" + a.MetricsAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// agentIdentity gives the env's agent a ServiceAccount of its own (the
// controller keeps the bed's admin), bound to cluster-admin: only the
// admission policy below tells the two apart.
func agentIdentity(t *testing.T, env *testbed.Env) (user, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	name := "capo-agent-" + env.ID
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace}}
	if _, err := bed.Kube.CoreV1().ServiceAccounts(env.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: env.Namespace}},
	}
	if _, err := bed.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	kc, err := bed.ServiceAccountKubeconfig(ctx, env.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return "system:serviceaccount:" + env.Namespace + ":" + name, kc
}

func refusalName(user string) string { return "refuse-" + user[len("system:serviceaccount:"):] }

// refuseWritesOf installs a ValidatingAdmissionPolicy that refuses
// creates and updates of IPReservations by user alone, and waits until a
// dry-run create as user is refused.
func refuseWritesOf(t *testing.T, user, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	name := sanitize(refusalName(user))
	fail, deny := admissionv1.Fail, admissionv1.Deny
	forbidden := metav1.StatusReasonForbidden
	vap := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"crd.projectcalico.org"}, APIVersions: []string{"*"}, Resources: []string{"ipreservations"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "request.userInfo.username != '" + user + "'",
				Message:    "IPReservation writes refused to this identity (test policy)",
				Reason:     &forbidden,
			}},
		},
	}
	if _, err := bed.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{deny}},
	}
	if _, err := bed.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteRefusal(t, user) })
	eventually(t, 20*time.Second, "the policy refusing "+user, func() bool { return apierrors.IsForbidden(dryRunWrite(t, kubeconfig)) })
}

func deleteRefusal(t *testing.T, user string) {
	ctx := context.Background()
	name := sanitize(refusalName(user))
	_ = bed.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	_ = bed.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
}

// dryRunWrite creates an IPReservation as kubeconfig's identity without
// storing it: admission runs as for a real write.
func dryRunWrite(t *testing.T, kubeconfig string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPReservation",
		"metadata": map[string]any{"name": "capo-policy-check"},
		"spec":     map[string]any{"reservedCIDRs": []any{"192.0.2.1/32"}},
	}}
	_, err := dynamicAs(t, kubeconfig).Create(context.Background(), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == ':' || c == '_' {
			out[i] = '-'
		}
	}
	return string(out)
}

// refused is an evicted member's teardown while the agent's reservation
// writes are refused and Calico's GC runs with a 5 s leak grace: eight
// members of a StatefulSet, the fourth evicted and its DEL journaled.
type refused struct {
	env      *testbed.Env
	sbs      []*testbed.Sandbox
	victim   *testbed.Sandbox
	conflist []byte
	user     string
}

func refusedWrites(t *testing.T, agent testbed.AgentOptions) refused {
	t.Helper()
	gc := bed.StartKubeControllers(t, testbed.Kubernetes, 5*time.Second)
	t.Cleanup(gc.Stop)
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, NoAgent: true})
	env.SetConfig(configWith(""))
	user, kubeconfig := agentIdentity(t, env)
	agent.Kubeconfig = kubeconfig
	env.Agent = env.StartAgentWith(agent)
	c := env.StartController("c1")
	eventually(t, 15*time.Second, "the controller leads", c.Leading)

	conflist := env.Conflist(testbed.Capo)
	sbs := env.AddPods("redis", 8, conflist, testbed.OwnedBy(env.CreateStatefulSet("redis", 8)))
	victim := sbs[3]
	env.MarkRunning(victim)
	refuseWritesOf(t, user, kubeconfig)

	env.Evict(victim.Pod.Name)
	if err := victim.Del(context.Background()); err != nil {
		t.Fatalf("DEL with the agent's writes refused must succeed (journaled): %v", err)
	}
	return refused{env: env, sbs: sbs, victim: victim, conflist: conflist, user: user}
}
