package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/test/testbed"
)

// forgedReserve is issue 27's theft: a process on the node that reaches the
// agent's socket posts /v1/reserve naming each selected member's sandbox but
// a pod of its own namespace, of the same name, selected too. For every
// other member it first removes capo-ipam's ADD record, as a crash would,
// so the agent can only go by Calico's allocation. Every forged request is
// refused or finds nothing left to reserve; no address is ever held for the
// other namespace's pod (check).
func forgedReserve() fault {
	return fault{name: "forged reserve requests on the socket", setup: func(t *testing.T, fx *faultEnv) {
		createEvilTwins(t, fx.env)
	}, inject: func(t *testing.T, fx *faultEnv) {
		c := wire.NewClient(fx.env.AgentSocket())
		for i, sb := range fx.selected {
			if i%2 == 1 {
				if err := fx.env.Journal().ForgetAddrs(testbed.NetworkName, sb.ContainerID, sb.IfName); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := c.Reserve(ctx, &wire.ReserveRequest{
				ContainerID: sb.ContainerID, IfName: sb.IfName, Network: testbed.NetworkName,
				Pod: wire.PodRef{Namespace: evilNamespace(fx.env), Name: sb.Pod.Name},
			})
			cancel()
			var refused bool
			if err != nil {
				refused = strings.Contains(err.Error(), "refused: the request names pod "+evilNamespace(fx.env)+"/")
			}
			if !refused && (err != nil || resp.Outcome != wire.NothingToReserve) {
				t.Errorf("the forged reserve of %s's sandbox for %s/%s: %+v %v", sb.Pod.Name, evilNamespace(fx.env), sb.Pod.Name, resp, err)
			}
		}
	}}
}

func evilNamespace(env *testbed.Env) string { return env.Namespace + "-evil" }

// createEvilTwins makes the other tenant: a namespace opted in, with a
// StatefulSet member of each name the storm's members have, on this node.
func createEvilTwins(t *testing.T, env *testbed.Env) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: evilNamespace(env), Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	for i := range stormSelected {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("redis-%d", i), Namespace: ns.Name},
			Spec:       corev1.PodSpec{NodeName: env.Node, Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}}},
		}
		testbed.StatefulPod("redis")(p)
		if _, err := env.Kube.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// heldAcross counts the reservations of the env's node held for a pod of
// a namespace other than the env's: an address taken across namespaces.
func heldAcross(t *testing.T, env *testbed.Env) int {
	t.Helper()
	n := 0
	for ip, e := range env.Reservations() {
		if e.Namespace != env.Namespace {
			n++
			t.Errorf("%s is held for %s/%s, a pod of another namespace", ip, e.Namespace, e.Pod)
		}
	}
	return n
}

// forgedReclaim is issue 27's reclaim that trusts the socket: the agent is
// killed and a uid-0 process serves its socket in its place. It answers a
// new pod's ADD with an offer of a member's address, naming the member's
// live sandbox on this node as a lost node's to free first; every DEL it
// answers 503 (journaled). capo-ipam must not free a sandbox it recorded at
// ADD here: the thief gets a fresh address and the member keeps its own.
func forgedReclaim() fault {
	var srv *http.Server
	var thief *testbed.Sandbox
	return fault{name: "a forged reclaim offer on the socket", inject: func(t *testing.T, fx *faultEnv) {
		victim := fx.selected[len(fx.selected)-1]
		fx.env.Agent.Kill()
		srv = serveImpostor(t, fx.env.AgentSocket(), &wire.Return{
			IPs: []string{victim.IP()}, Reclaim: []wire.Reclaim{{ContainerID: victim.ContainerID, Node: "lost-node"}},
		})
		thief = fx.env.NewSandbox(fx.env.CreatePod("thief"), fx.conflist)
		if err := thief.Add(context.Background()); err != nil {
			t.Fatalf("the thief's ADD (given a live sandbox's address?): %v", err)
		}
		if thief.IP() == victim.IP() {
			t.Errorf("the thief got %s, the address of %s, whose sandbox still runs", thief.IP(), victim.Pod.Name)
		}
	}, heal: func(t *testing.T, fx *faultEnv) {
		_ = srv.Close()
		fx.env.Agent = fx.env.StartAgent()
		if err := thief.Del(context.Background()); err != nil { // the thief is done: its record goes
			t.Errorf("the thief's DEL: %v", err)
		}
	}}
}

// serveImpostor serves the agent's socket as a process that is not the
// agent: every ADD is offered ret, every DEL answered 503.
func serveImpostor(t *testing.T, socket string, ret *wire.Return) *http.Server {
	t.Helper()
	_ = os.Remove(socket) // the killed agent's
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set(wire.VersionHeader, strconv.Itoa(wire.Version))
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.AnnotationsPath, func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusOK, wire.AnnotationsResponse{Decision: &wire.Decision{Selected: true}, Return: ret})
	})
	mux.HandleFunc("POST "+wire.ReturnOutcomePath, func(w http.ResponseWriter, _ *http.Request) { answer(w, http.StatusOK, struct{}{}) })
	mux.HandleFunc("POST "+wire.ReservePath, func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusServiceUnavailable, wire.ErrorResponse{Error: "impostor"})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}
