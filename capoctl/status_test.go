package capoctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

type fakeCalico struct{}

func (fakeCalico) Version(context.Context) (string, bool, error) { return "v3.31.0", true, nil }
func (fakeCalico) Objects(context.Context) (map[string]any, map[string]error) {
	return map[string]any{"ippools.yaml": []string{"default-ipv4-ippool"}}, nil
}

type body []byte

func (b body) DoRaw(context.Context) ([]byte, error) { return b, nil }
func (b body) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b)), nil
}

// agentBed is a cluster with opted-in nodes, agent pods that answer
// through the fake pod proxy, and a controller's Lease.
type agentBed struct {
	kube     *fake.Clientset
	metrics  map[string]string // pod: its /metrics
	info     map[string]string // pod: its node summary
	nodeInfo map[string]string // pod: what its node-info prints
}

func newAgentBed(t *testing.T, nodes ...string) *agentBed {
	b := &agentBed{metrics: map[string]string{}, info: map[string]string{}, nodeInfo: map[string]string{}}
	renewed := metav1.NewMicroTime(now.Add(-3 * time.Second))
	holder, dur := "capo-controller-0", int32(15)
	objs := []runtime.Object{&coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "capo-controller"},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed, LeaseDurationSeconds: &dur},
	}}
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}})
	}
	b.kube = fake.NewClientset(objs...)
	b.kube.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		p, ok := a.(k8stesting.ProxyGetAction)
		if !ok {
			return false, nil, nil
		}
		src := b.metrics
		if p.GetPath() == nodeInfoPath {
			src = b.info
		}
		if s, ok := src[p.GetName()]; ok {
			return true, body(s), nil
		}
		return true, nil, fmt.Errorf("no route to %s", p.GetName())
	})
	return b
}

// addAgent runs an agent pod on node, ready or not, that can reserve.
func (b *agentBed) addAgent(t *testing.T, node string, ready bool, journaled int) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	name := "capo-agent-" + node
	_, err := b.kube.CoreV1().Pods("capo-system").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "capo", "app.kubernetes.io/component": "agent"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agent", Image: "ghcr.io/capo-net/capo:v0.3.0", Command: []string{"/usr/local/bin/capo-agent"}, Args: []string{"--manage-cni", "--cni-conf-dir=/etc/cni/net.d"}}}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.metrics[name] = fmt.Sprintf("# HELP x\ncapo_build_info{goversion=\"go1.26\",version=\"v0.3.0\"} 1\ncapo_agent_can_reserve 1\ncapo_agent_not_ready{reason=\"starting\"} 0\ncapo_agent_journal_depth %d\ncapo_agent_wire_requests_total{result=\"answered\",version=\"2\"} 7\n", journaled)
	b.info[name] = fmt.Sprintf(`{"version":"v0.3.0","wireVersion":%d,"runtimeConf":"10-calico.conflist","capoIPAMInChain":true,"journal":[]}`, wire.Version)
}

// exec answers node-info in an agent's container, as the agent would.
func (b *agentBed) exec(_ context.Context, p *corev1.Pod, container string, cmd []string) ([]byte, error) {
	out, ok := b.nodeInfo[p.Name]
	if !ok || container != "agent" || strings.Join(cmd, " ") != "/usr/local/bin/capo-agent node-info --manage-cni --cni-conf-dir=/etc/cni/net.d" {
		return nil, fmt.Errorf("exec %v in %s/%s: no such command", cmd, p.Name, container)
	}
	return []byte(out), nil
}

func (b *agentBed) run(args ...string) (int, string, string) {
	var out, errw strings.Builder
	dial := func(*kubeFlags) (*clients, error) {
		return &clients{kube: b.kube, store: reservetest.NewStore(reserve.DefaultLimits), calico: fakeCalico{}, exec: b.exec}, nil
	}
	code := run(args, strings.NewReader(""), &out, &errw, dial, now, "capoctl")
	return code, out.String(), errw.String()
}

// status is fine only when every opted-in node has a Ready agent that can
// reserve with capo-ipam in its chain, and a controller leads.
func TestStatus(t *testing.T) {
	b := newAgentBed(t, "w1", "w2")
	b.addAgent(t, "w1", true, 0)
	code, out, _ := b.run("status")
	if code != 1 || !strings.Contains(out, "w2: opted in, but no capo-agent pod runs there") || strings.Contains(out, "All fine") {
		t.Fatalf("a node without its agent: exit %d\n%s", code, out)
	}
	b.addAgent(t, "w2", false, 2)
	code, out, _ = b.run("status")
	if code != 1 || !strings.Contains(out, "w2: agent pod capo-agent-w2 is not Ready") || !strings.Contains(out, "w2: 2 teardowns journaled") {
		t.Fatalf("w2 not ready, two journaled: exit %d\n%s", code, out)
	}
	b.metrics["capo-agent-w2"] = b.metrics["capo-agent-w1"] // nothing journaled now
	pod, _ := b.kube.CoreV1().Pods("capo-system").Get(context.Background(), "capo-agent-w2", metav1.GetOptions{})
	pod.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := b.kube.CoreV1().Pods("capo-system").UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errw := b.run("status")
	if code != 0 || !strings.Contains(out, "All fine.") || !strings.Contains(out, "leader capo-controller-0") || !strings.Contains(out, "Calico: version v3.31.0") {
		t.Fatalf("all fine: exit %d\n%s%s", code, out, errw)
	}
	for _, w := range []string{"w1    true      capo-agent-w1  true   yes          yes       2 (capo-ipam 2)  0        v0.3.0"} {
		if !strings.Contains(out, w) {
			t.Fatalf("status lacks %q:\n%s", w, out)
		}
	}
	if code, out, _ = b.run("status", "-o", "jsonpath={.ok} {.leader.holder} {.nodes[*].journalDepth}"); code != 0 || out != "true capo-controller-0 0 0" {
		t.Fatalf("-o jsonpath: exit %d %q", code, out)
	}
	if code, out, _ = b.run("version", "-o", "json"); code != 0 || !strings.Contains(out, `"w2": "v0.3.0"`) || !strings.Contains(out, `"version": "v3.31.0"`) {
		t.Fatalf("version: exit %d\n%s", code, out)
	}
}

// A lease not renewed in its duration is no leader.
func TestStatusStaleLease(t *testing.T) {
	b := newAgentBed(t, "w1")
	b.addAgent(t, "w1", true, 0)
	l, _ := b.kube.CoordinationV1().Leases("capo-system").Get(context.Background(), "capo-controller", metav1.GetOptions{})
	old := metav1.NewMicroTime(now.Add(-time.Minute))
	l.Spec.RenewTime = &old
	if _, err := b.kube.CoordinationV1().Leases("capo-system").Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := b.run("status"); code != 1 || !strings.Contains(out, "no capo-controller holds the Lease capo-system/capo-controller") {
		t.Fatalf("stale lease: exit %d\n%s", code, out)
	}
}

// The bundle carries status, each node's view and metrics, capo's and
// Calico's objects, and what it could not collect, and never fails for it.
func TestBundle(t *testing.T) {
	b := newAgentBed(t, "w1")
	b.addAgent(t, "w1", true, 0)
	b.nodeInfo["capo-agent-w1"] = `{"wireVersion":2,"conflists":{"10-calico.conflist":"{\"plugins\":[]}"},"capoIPAMInChain":true,"journal":[{"name":"a.json","record":{"why":"agent away"}}]}`
	file := filepath.Join(t.TempDir(), "b.tar.gz")
	code, out, errw := b.run("bundle", "-f", file)
	if code != 0 || !strings.Contains(out, "wrote "+file) {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
	files := readTarGz(t, file)
	for name, want := range map[string]string{
		"b/status.json":                        `"holder": "capo-controller-0"`,
		"b/nodes/w1/cni/10-calico.conflist":    `"plugins": []`,
		"b/nodes/w1/journal.json":              "agent away",
		"b/nodes/w1/agent-metrics.txt":         "capo_agent_can_reserve 1",
		"b/kubernetes/capo-system/leases.yaml": "holderIdentity: capo-controller-0",
		"b/kubernetes/nodes.yaml":              "capo.io/ip-reserve",
		"b/calico/ippools.yaml":                "default-ipv4-ippool",
		"b/capo/reservations.yaml":             "[]",
		"b/logs/capo-agent-w1/agent.log":       "fake logs",
	} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q:\n%s", name, want, files[name])
		}
	}
	if code, _, errw := b.run("bundle", "-f", file); code != 1 || !strings.Contains(errw, "exists") {
		t.Fatalf("an existing file is not overwritten: exit %d %s", code, errw)
	}
}

// Planted secrets: a token and a private key in a node's conflist (as an
// agent that redacted nothing would print them) and in ConfigMaps of
// capo's namespace, capo's own and another's. None reaches the archive,
// and nothing of the namespace that is not capo's is collected.
func TestBundleRedacts(t *testing.T) {
	const token, key = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2ln", "-----BEGIN RSA PRIVATE KEY-----\nMIIplantedkey\n-----END RSA PRIVATE KEY-----"
	b := newAgentBed(t, "w1")
	b.addAgent(t, "w1", true, 0)
	plugin := map[string]any{"type": "calico", "policy": map[string]any{"k8s_auth_token": "plantedtoken"}, "etcd_key_file": "/calico-secrets/etcd-key", "etcd_key": key, "note": token}
	conflist, _ := json.Marshal(map[string]any{"name": "k8s-pod-network", "plugins": []any{plugin}})
	view, _ := json.Marshal(map[string]any{"wireVersion": 2, "conflists": map[string]string{"10-calico.conflist": string(conflist)}, "journal": []any{}})
	b.nodeInfo["capo-agent-w1"] = string(view)
	ctx := context.Background()
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "capo-release"}, Data: map[string]string{"note": "token: plantedtoken\n" + key}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "coredns"}, Data: map[string]string{"Corefile": "not capo's"}},
	} {
		if _, err := b.kube.CoreV1().ConfigMaps("capo-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.kube.CoreV1().Pods("capo-system").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "kube-proxy-x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "b.tar.gz")
	if code, out, errw := b.run("bundle", "-f", file); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
	files := readTarGz(t, file)
	for name, data := range files {
		for _, secret := range []string{"plantedtoken", "MIIplantedkey", token, "not capo's", "kube-proxy-x"} {
			if strings.Contains(data, secret) {
				t.Errorf("%s holds %q:\n%s", name, secret, data)
			}
		}
	}
	if cni := files["b/nodes/w1/cni/10-calico.conflist"]; !strings.Contains(cni, `"/calico-secrets/etcd-key"`) || !strings.Contains(cni, "<redacted>") {
		t.Errorf("the conflist, paths kept and secrets marked:\n%s", cni)
	}
	if !strings.Contains(files["b/kubernetes/capo-system/configmaps.yaml"], "capo-release") {
		t.Errorf("capo's own ConfigMap not collected:\n%s", files["b/kubernetes/capo-system/configmaps.yaml"])
	}
}

func readTarGz(t *testing.T, file string) map[string]string {
	t.Helper()
	files, err := ReadBundle(file)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// --node narrows status to those nodes; a node named that capo does not
// run on is a problem, not silence.
func TestStatusNode(t *testing.T) {
	b := newAgentBed(t, "w1", "w2")
	b.addAgent(t, "w1", true, 0)
	if code, out, _ := b.run("status", "--node", "w1"); code != 0 || strings.Contains(out, "w2") {
		t.Fatalf("--node w1: exit %d\n%s", code, out)
	}
	if code, out, _ := b.run("status", "--node", "w1,w9"); code != 1 || !strings.Contains(out, "w9: not opted in, and no capo-agent pod runs there") {
		t.Fatalf("--node w9: exit %d\n%s", code, out)
	}
}
