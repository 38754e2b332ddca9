package returns

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

func setPod(name, setUID string, ann map[string]string) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: "pod-uid", Annotations: ann,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "redis", UID: types.UID("set-" + setUID), Controller: &yes}},
	}}
}

var selected = selection.Decision{Verdict: selection.Selected, Rule: "namespace label"}

func TestCandidate(t *testing.T) {
	rs := setPod("web-1", "a", nil)
	rs.OwnerReferences[0].Kind = "ReplicaSet"
	cases := []struct {
		name string
		mode config.ReturnMode
		pod  *corev1.Pod
		d    selection.Decision
		want string // "" = a candidate
	}{
		{"statefulset pod", config.ReturnSameNode, setPod("redis-3", "a", nil), selected, ""},
		{"any node", config.ReturnAnyNode, setPod("redis-3", "a", nil), selected, ""},
		{"off", config.ReturnOff, setPod("redis-3", "a", nil), selected, "returnAddress is off"},
		{"replicaset pod (its own sandbox re-created)", config.ReturnSameNode, rs, selected, ""},
		{"opted out", config.ReturnSameNode, setPod("redis-3", "a", map[string]string{PodAnnotation: Disabled}), selected, "capo.io/return-address=disabled"},
		{"not selected", config.ReturnSameNode, setPod("redis-3", "a", nil), selection.Decision{Verdict: selection.NotSelected, Rule: "pod matches no configured pod selector"}, "not selected: pod matches no"},
		{"unknown pod", config.ReturnSameNode, nil, selected, "unknown"},
	}
	for _, tc := range cases {
		ok, why := Candidate(tc.mode, tc.pod, tc.d)
		if ok != (tc.want == "") || !strings.Contains(why, tc.want) {
			t.Errorf("%s: %v %q, want %q", tc.name, ok, why, tc.want)
		}
	}
}

func entry(ip, pod, setUID string, at int64) reserve.Entry {
	return reserve.Entry{
		IP: ip, Node: "n1", Namespace: "ns", Pod: pod, Reason: reserve.ReasonCNIDel, ReservedAt: time.Unix(at, 0),
		OwnerKind: "StatefulSet", OwnerName: "redis", OwnerUID: "set-" + setUID, Sandbox: "aaaa",
	}
}

func TestHeldIsThePodsIdentityOnly(t *testing.T) {
	es := []reserve.Entry{
		entry("10.0.0.3", "redis-3", "a", 100),
		entry("10.0.0.9", "redis-3", "a", 200), // a later teardown: the one its peers last knew
		entry("fd00::3", "redis-3", "a", 100),
		entry("10.0.0.4", "redis-4", "a", 100),            // another pod
		entry("10.0.0.5", "redis-3", "b", 300),            // a set of the same name, deleted and re-created
		{IP: "10.0.0.6", Namespace: "ns", Pod: "redis-3"}, // no owner known
	}
	got := IPs(Held(es, setPod("redis-3", "a", nil)))
	if strings.Join(got, ",") != "10.0.0.9,fd00::3" {
		t.Fatalf("held %v", got)
	}
	newSet := setPod("redis-3", "c", nil)
	newSet.UID = "new-pod-uid"
	if got := Held(es, newSet); len(got) != 0 {
		t.Fatalf("a new set's pod inherits %v", got)
	}
}

func TestHeldBySamePodUID(t *testing.T) {
	rs := setPod("web-1", "a", nil)
	rs.OwnerReferences[0].Kind = "ReplicaSet"
	es := []reserve.Entry{
		{IP: "10.0.0.7", Node: "n1", Namespace: "ns", Pod: "web-1", PodUID: "pod-uid", OwnerKind: "ReplicaSet", OwnerUID: "set-a"},
		{IP: "10.0.0.8", Node: "n1", Namespace: "ns", Pod: "web-1", PodUID: "earlier-pod", OwnerKind: "ReplicaSet", OwnerUID: "set-a"},
	}
	if got := IPs(Held(es, rs)); strings.Join(got, ",") != "10.0.0.7" {
		t.Fatalf("held %v, want the same pod's address only", got)
	}
}

func pool() *Pool {
	return &Pool{Name: "pool-a", CIDR: "10.0.0.0/24", Workloads: true, SelectsNode: true, SelectsNamespace: true}
}

func TestCheck(t *testing.T) {
	e := entry("10.0.0.3", "redis-3", "a", 100)
	here := Facts{Node: "n1", Pool: pool()}
	there := Facts{Node: "n2", Pool: pool(), NodeBGP: true}
	with := func(f Facts, edit func(*Facts)) Facts { f.Pool = &Pool{}; *f.Pool = *pool(); edit(&f); return f }
	cases := []struct {
		name string
		mode config.ReturnMode
		f    Facts
		want Reason
		says string
	}{
		{"same node", config.ReturnSameNode, here, "", ""},
		{"held by another pod", config.ReturnSameNode, with(here, func(f *Facts) { f.Holder = &calico.Holder{Handle: "net.x", Namespace: "ns", Pod: "web-1"} }), Allocated, "allocated to pod ns/web-1"},
		{"old sandbox not yet released", config.ReturnSameNode, with(here, func(f *Facts) { f.Holder = &calico.Holder{Handle: "net.aaaa", Namespace: "ns", Pod: "redis-3"} }), Allocated, "still allocated to the sandbox torn down"},
		{"old sandbox's address cooling", config.ReturnSameNode, with(here, func(f *Facts) {
			f.Holder, f.Cooldown = &calico.Holder{Handle: "net.aaaa", Namespace: "ns", Pod: "redis-3"}, 30*time.Second
		}), Cooling, "ipCooldownSeconds 30"},
		{"cooling as Calico keeps it: released, no handle", config.ReturnSameNode, with(here, func(f *Facts) {
			f.Holder, f.Cooldown = &calico.Holder{Cooling: true}, 30*time.Second
		}), Cooling, "ipCooldownSeconds 30"},
		{"another pod's address, cooldown set", config.ReturnSameNode, with(here, func(f *Facts) {
			f.Holder, f.Cooldown = &calico.Holder{Handle: "net.x", Namespace: "ns", Pod: "web-1"}, 30*time.Second
		}), Allocated, "allocated to pod ns/web-1"},
		{"no pool", config.ReturnSameNode, Facts{Node: "n1"}, NoPool, "no IP pool contains 10.0.0.3"},
		{"disabled pool", config.ReturnSameNode, with(here, func(f *Facts) { f.Pool.Disabled = true }), NoPool, "is disabled"},
		{"pool not for workloads", config.ReturnSameNode, with(here, func(f *Facts) { f.Pool.Workloads = false }), NoPool, "does not allow workloads"},
		{"pool moved off the node", config.ReturnSameNode, with(here, func(f *Facts) { f.Pool.SelectsNode = false }), PoolNotForNode, "does not select node n1"},
		{"pool not for the namespace", config.ReturnSameNode, with(here, func(f *Facts) { f.Pool.SelectsNamespace = false }), PoolNotForNode, "does not select the pod's namespace"},
		{"pool annotation by name", config.ReturnSameNode, with(here, func(f *Facts) { f.Requested = []string{"pool-a"} }), "", ""},
		{"pool annotation by cidr", config.ReturnSameNode, with(here, func(f *Facts) { f.Requested = []string{"10.0.0.0/24"} }), "", ""},
		{"pool annotation elsewhere", config.ReturnSameNode, with(here, func(f *Facts) { f.Requested = []string{"gold"} }), PoolNotForNode, "does not include pool pool-a"},
		{"other node, sameNode", config.ReturnSameNode, there, OtherNode, "held for node n1 and returnAddress is sameNode"},
		{"other node, BGP", config.ReturnAnyNode, there, "", ""},
		{"other node, strict affinity", config.ReturnAnyNode, with(there, func(f *Facts) { f.StrictAffinity = true }), StrictAffinity, "strictAffinity is on"},
		{"other node, VXLAN without BGP", config.ReturnAnyNode, with(there, func(f *Facts) { f.Pool.VXLAN, f.NodeBGP = true, false }), "", ""},
		{"other node, no BGP, no VXLAN", config.ReturnAnyNode, with(there, func(f *Facts) { f.NodeBGP = false }), NotRouted, "runs no BGP"},
		{"other node, BGP export off", config.ReturnAnyNode, with(there, func(f *Facts) { f.Pool.DisableBGPExport = true }), NotRouted, "disableBGPExport"},
		{"other node, felix programs routes", config.ReturnAnyNode, with(there, func(f *Facts) { f.Pool.DisableBGPExport, f.NodeBGP, f.ClusterRoutes = true, false, true }), "", ""},
	}
	for _, tc := range cases {
		got, says := Check(tc.mode, e, tc.f)
		if got != tc.want || !strings.Contains(says, tc.says) {
			t.Errorf("%s: %q %q, want %q %q", tc.name, got, says, tc.want, tc.says)
		}
	}
}

// An address also reserved for another identity is that identity's
// promise: it is not given back, whoever else holds it.
func TestHeldForAnother(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "redis-3", UID: "pod-2"}}
	mine := reserve.Entry{IP: "10.0.0.3", Node: "n1", Namespace: "ns", Pod: "redis-3", PodUID: "pod-2"}
	theirs := reserve.Entry{IP: "10.0.0.3", Node: "n2", Namespace: "ns", Pod: "kafka-0", PodUID: "pod-9", Reason: reserve.ReasonNodeLost}
	if r, _ := HeldForAnother([]reserve.Entry{mine}, []reserve.Entry{mine}, pod); r != "" {
		t.Fatalf("refused its own: %s", r)
	}
	r, why := HeldForAnother([]reserve.Entry{mine}, []reserve.Entry{mine, theirs}, pod)
	if r != HeldForOther || !strings.Contains(why, "ns/kafka-0") {
		t.Fatalf("%s %q", r, why)
	}
}

// A member of Kruise's Advanced StatefulSet is a member as apps/v1's is:
// its kind and its set's UID name it; a set of another kind never does.
func TestHeldUnderKruisesStatefulSet(t *testing.T) {
	kruise := func(pod, setUID string) *corev1.Pod {
		p := setPod(pod, setUID, nil)
		p.UID = "new-pod-uid"
		p.OwnerReferences[0].APIVersion = "apps.kruise.io/v1beta1"
		return p
	}
	e := entry("10.0.0.3", "redis-3", "a", 100)
	e.OwnerKind = "StatefulSet.apps.kruise.io"
	if got := IPs(Held([]reserve.Entry{e}, kruise("redis-3", "a"))); len(got) != 1 {
		t.Fatalf("kruise member holds %v, want its 10.0.0.3", got)
	}
	older := kruise("redis-3", "a")
	older.OwnerReferences[0].APIVersion = "apps.kruise.io/v1alpha1" // one object, served in both versions
	if got := Held([]reserve.Entry{e}, older); len(got) != 1 {
		t.Fatalf("kruise member read as v1alpha1 holds %v", got)
	}
	apps := setPod("redis-3", "a", nil)
	apps.UID = "new-pod-uid"
	if got := Held([]reserve.Entry{e}, apps); len(got) != 0 {
		t.Fatalf("an apps/v1 member takes a kruise member's %v", got)
	}
	if got := Held([]reserve.Entry{entry("10.0.0.4", "redis-3", "a", 100)}, kruise("redis-3", "a")); len(got) != 0 {
		t.Fatalf("a kruise member takes an apps/v1 member's %v", got)
	}
}
