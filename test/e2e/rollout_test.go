package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// Issue 27's rollout that never starts: the DaemonSet's agent pod is
// deleted and its replacement, scheduled on the node, never runs (its image
// cannot be pulled). The state dir still names the old pod, gone longer
// than uninstalled_after. The node is still opted in, so capo-ipam takes it
// as an agent away, not an uninstall: the sandboxes the kubelet re-creates
// under running members are journaled, their addresses kept, and reserved
// once the replacement runs. Calico's datastore holds the promise: no
// member's address free and unreserved, no DEL failed, none held for
// another namespace's pod.
func TestRolloutThatNeverStartsIsAnAgentAway(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		env.Agent.Stop()
		env.Agent = env.StartAgentWith(testbed.AgentOptions{PodName: "capo-agent-x" + env.ID})
		conflist := withUninstalledAfter(t, env.Conflist(testbed.Capo), "2s")
		set := env.CreateStatefulSet("kafka", 3)
		var members []*testbed.Sandbox
		for i := range 3 {
			sb := env.NewSandbox(env.CreatePod(fmt.Sprintf("kafka-%d", i), testbed.OwnedBy(set)), conflist)
			if err := sb.Add(ctx); err != nil {
				t.Fatal(err)
			}
			env.MarkRunning(sb)
			members = append(members, sb)
		}

		env.Agent.Kill()
		zero := int64(0)
		if err := env.Kube.CoreV1().Pods(env.Namespace).Delete(ctx, "capo-agent-x"+env.ID, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		replacement := neverStartingAgentPod(t, env, "capo-agent-y"+env.ID)
		failed := 0
		recreate := func(sb *testbed.Sandbox) { // the kubelet re-creates a running member's sandbox
			if err := sb.Del(ctx); err != nil {
				failed++
				t.Errorf("DEL of %s's old sandbox: %v", sb.Pod.Name, err)
			}
		}
		recreate(members[0]) // the old agent's pod is found gone
		time.Sleep(3 * time.Second)
		recreate(members[1]) // ...for longer than uninstalled_after
		recreate(members[2])
		if pending, _ := env.Journal().Pending(); len(pending) != 3 {
			t.Errorf("%d DELs journaled, want all 3: the node is opted in, its agent only away", len(pending))
		}
		kept(t, env, members)

		// The replacement runs at last: it replays the journal.
		env.Agent = env.StartAgentWith(testbed.AgentOptions{PodName: replacement})
		eventually(t, 30*time.Second, "the journal drained", func() bool {
			p, _ := env.Journal().Pending()
			return len(p) == 0
		})
		kept(t, env, members)
		if failed+heldAcross(t, env) != 0 {
			t.Errorf("%d DELs failed; addresses held across namespaces above", failed)
		}
	})
}

// kept checks each member's address is still allocated to its sandbox or
// reserved for the member, in Calico's datastore.
func kept(t *testing.T, env *testbed.Env, members []*testbed.Sandbox) {
	t.Helper()
	st, err := env.IPAMState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := env.Reservations()
	for _, sb := range members {
		owner := st.Holder(net.ParseIP(sb.IP()))
		e, reserved := held[sb.IP()]
		switch {
		case reserved && (e.Namespace != sb.Pod.Namespace || e.Pod != sb.Pod.Name):
			t.Errorf("%s of %s is held for %s/%s", sb.IP(), sb.Pod.Name, e.Namespace, e.Pod)
		case owner != "" && owner != sb.Handle():
			t.Errorf("%s of %s was given to %s", sb.IP(), sb.Pod.Name, owner)
		case owner == "" && !reserved:
			t.Errorf("%s of %s is free and not reserved", sb.IP(), sb.Pod.Name)
		}
	}
}

// neverStartingAgentPod is the DaemonSet's replacement agent pod, bound to
// the env's node and stuck pulling its image, as the kubelet reports it.
func neverStartingAgentPod(t *testing.T, env *testbed.Env, name string) string {
	t.Helper()
	ctx := context.Background()
	p, err := env.Kube.CoreV1().Pods(env.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "capo-agent"}},
		Spec:       corev1.PodSpec{NodeName: env.Node, Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/capo:missing"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Image: "registry.invalid/capo:missing", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.invalid/capo:missing"`},
	}}}
	if _, err := env.Kube.CoreV1().Pods(env.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}
