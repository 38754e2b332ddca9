package owners

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKeyOf(t *testing.T) {
	for _, c := range []struct {
		apiVersion, kind, want string
	}{
		{"apps/v1", "StatefulSet", "StatefulSet"},
		{"apps.kruise.io/v1beta1", "StatefulSet", "StatefulSet.apps.kruise.io"},
		{"apps.kruise.io/v1alpha1", "StatefulSet", "StatefulSet.apps.kruise.io"},
		{"batch/v1", "Job", "Job"},
		{"v1", "ReplicationController", "ReplicationController"},
		{"example.com/v1", "Broker", "Broker.example.com"},
	} {
		if got := KeyOf(metav1.OwnerReference{APIVersion: c.apiVersion, Kind: c.kind}); got != c.want {
			t.Errorf("KeyOf(%s %s) = %q, want %q", c.apiVersion, c.kind, got, c.want)
		}
	}
}

// A listed kind is a cluster-wide grant: only a named custom resource's
// kind is taken, and the error says why not.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		want string // "" is valid
	}{
		{Kind{Group: "example.com", Version: "v1", Kind: "Broker"}, ""},
		{Kind{Group: "example.com", Version: "v1", Kind: "Broker", Resource: "brokers"}, ""},
		{Kind{Group: "leaderworkerset.x-k8s.io", Version: "v1", Kind: "LeaderWorkerSet", Resource: "leaderworkersets"}, ""},
		{Kind{Group: "example.com", Kind: "Broker"}, "kind and version are required"},
		{Kind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "StatefulSet"}, "without being told"},
		{Kind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "generated"},
		{Kind{Group: "example.com", Version: "v1", Kind: "Broker", Resource: "Brokers"}, "lower-case plural"},
		{Kind{Group: "", Version: "v1", Kind: "Secret", Resource: "secrets"}, "the core group"},
		{Kind{Group: "*", Version: "v1", Kind: "Broker", Resource: "brokers"}, "wildcard"},
		{Kind{Group: "example.com", Version: "v1", Kind: "*", Resource: "*"}, "wildcard"},
		{Kind{Group: "batch", Version: "v1", Kind: "Job", Resource: "jobs"}, "Kubernetes' own"},
		{Kind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Resource: "clusterroles"}, "Kubernetes' own"},
		{Kind{Group: "Example.COM", Version: "v1", Kind: "Broker"}, "not a DNS subdomain"},
		{Kind{Group: "example.com", Version: "v1", Kind: "Broker", Resource: "brokers/status"}, "not a resource's plural"},
	} {
		err := c.k.Validate()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", c.k, err, c.want)
		}
	}
}

func TestOrdinalsHas(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Ordinals
		has  []int
		not  []int
	}{
		{"plain", Ordinals{Replicas: 3}, []int{0, 1, 2}, []int{3, -1}},
		{"start", Ordinals{Start: 5, Replicas: 2}, []int{5, 6}, []int{4, 7, 0}},
		{"reserved moves the last up", Ordinals{Replicas: 3, Reserved: map[int]bool{1: true}}, []int{0, 2, 3}, []int{1, 4}},
		{"reserved and scaled", Ordinals{Replicas: 2, Reserved: map[int]bool{1: true}}, []int{0, 2}, []int{1, 3}},
		{"reserved below start ignored", Ordinals{Start: 2, Replicas: 2, Reserved: map[int]bool{0: true}}, []int{2, 3}, []int{0, 4}},
		{"zero", Ordinals{}, nil, []int{0}},
	} {
		for _, n := range c.has {
			if !c.o.Has(n) {
				t.Errorf("%s: %+v lacks %d", c.name, c.o, n)
			}
		}
		for _, n := range c.not {
			if c.o.Has(n) {
				t.Errorf("%s: %+v has %d", c.name, c.o, n)
			}
		}
	}
}

func TestParseReserved(t *testing.T) {
	got, err := ParseReserved([]any{int64(1), "3-5", " 7 ", float64(9)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3, 4, 5, 7, 9} {
		if !got[n] {
			t.Errorf("%d not reserved in %v", n, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("got %v, want 6 ordinals", got)
	}
	for _, bad := range [][]any{{"5-3"}, {"x"}, {"-1"}, {true}, {"0-999999999"}} {
		if _, err := ParseReserved(bad); err == nil {
			t.Errorf("ParseReserved(%v): no error", bad)
		}
	}
}
