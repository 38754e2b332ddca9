package config

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// capoSample is Capo's own shipped config file, unchanged.
const capoSample = `apiVersion: config.capo.io/v1
kind: CapoConfig
health:
  healthProbeBindAddress: ":8081"
metrics:
  bindAddress: ":8080"
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: ip-reserve
  resourceNamespace: ip-reserve
ipReserveMaxCount: 300
ipReserveTime: 40m
ipReleasePeriod: 5s
labelSelector:
  matchExpressions:
    - key: statefulset.kubernetes.io/pod-name
      operator: Exists
    - key: brokerId
      operator: Exists
`

func matches(c *Config, l map[string]string) bool {
	for _, s := range c.Selectors {
		if s.Selector.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

func TestCapoConfigAcceptedAsIs(t *testing.T) {
	c, err := Parse([]byte(capoSample))
	if err != nil {
		t.Fatal(err)
	}
	if c.IPReserveTime != 40*time.Minute || c.IPReserveMaxCount != 300 || c.IPReleasePeriod != 5*time.Second {
		t.Fatalf("got %+v", c)
	}
	// Capo's requirements match when any one holds.
	if !matches(c, map[string]string{"brokerId": "1"}) || !matches(c, map[string]string{"statefulset.kubernetes.io/pod-name": "r-0"}) {
		t.Fatal("each requirement alone must select")
	}
	if matches(c, map[string]string{"app": "web"}) {
		t.Fatal("a pod with neither label must not be selected")
	}
}

func TestDefaultsAreCapos(t *testing.T) {
	c := Default()
	if c.IPReserveTime != 40*time.Minute || c.IPReserveMaxCount != 300 || c.IPReleasePeriod != 5*time.Second ||
		c.ReserveTimeout != 8*time.Second || c.DeletedPodMemory != 30*time.Minute || len(c.Selectors) != 2 {
		t.Fatalf("defaults: %+v", c)
	}
	if !matches(c, map[string]string{"brokerId": "0"}) {
		t.Fatal("default selectors must select Kafka brokers")
	}
}

func TestPodSelectorsAndMatchLabels(t *testing.T) {
	c, err := Parse([]byte(`apiVersion: config.capo.io/v1
kind: CapoConfig
labelSelector:
  matchLabels: {app: zookeeper, tier: db}
podSelectors:
- matchLabels: {app: redis, role: master}
reserveTimeout: 2s
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l    map[string]string
		want bool
	}{
		{map[string]string{"app": "zookeeper"}, true},                         // Capo: one requirement is enough
		{map[string]string{"tier": "db"}, true},                               // likewise
		{map[string]string{"app": "redis"}, false},                            // podSelectors need the whole selector
		{map[string]string{"app": "redis", "role": "master"}, true},           //
		{map[string]string{"statefulset.kubernetes.io/pod-name": "x"}, false}, // defaults replaced
	} {
		if got := matches(c, tc.l); got != tc.want {
			t.Errorf("labels %v: selected=%v, want %v", tc.l, got, tc.want)
		}
	}
	if c.ReserveTimeout != 2*time.Second {
		t.Fatalf("reserveTimeout %v", c.ReserveTimeout)
	}
}

// A returning StatefulSet pod gets its address back on the node that held
// it unless the config says otherwise; Capo's file leaves that default.
func TestReturnAddress(t *testing.T) {
	c, err := Parse([]byte(capoSample))
	if err != nil || c.ReturnAddress != ReturnSameNode {
		t.Fatalf("Capo's config: %v %v", c.ReturnAddress, err)
	}
	for _, m := range []ReturnMode{ReturnSameNode, ReturnAnyNode, ReturnOff} {
		c, err := Parse([]byte("apiVersion: config.capo.io/v1\nkind: CapoConfig\nreturnAddress: " + string(m) + "\n"))
		if err != nil || c.ReturnAddress != m {
			t.Fatalf("%s: %v %v", m, c, err)
		}
	}
}

func TestInvalidConfigs(t *testing.T) {
	head := "apiVersion: config.capo.io/v1\nkind: CapoConfig\n"
	cases := []struct{ name, body, want string }{
		{"not yaml", "{{{", "not a valid CapoConfig"},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", `kind "ConfigMap"`},
		{"typo", head + "ipReserveTim: 5m\n", "unknown field"},
		{"bad duration", head + "ipReserveTime: soon\n", "not a valid CapoConfig"},
		{"zero ttl", head + "ipReserveTime: 0s\n", "ipReserveTime 0s"},
		{"negative max", head + "ipReserveMaxCount: -1\n", "ipReserveMaxCount -1"},
		{"fast period", head + "ipReleasePeriod: 10ms\n", "ipReleasePeriod"},
		{"bad operator", head + "labelSelector:\n  matchExpressions:\n  - {key: a, operator: Near}\n", "matchExpressions[0]"},
		{"empty pod selector", head + "podSelectors:\n- {}\n", "would select every pod"},
		{"two errors", head + "ipReserveTime: 0s\nipReserveMaxCount: 0\n", "ipReserveMaxCount 0"},
		{"return mode", head + "returnAddress: everywhere\n", `returnAddress "everywhere": must be sameNode, anyNode or off`},
		{"owner kind without version", head + "ownerKinds:\n- {group: example.com, kind: Broker}\n", "kind and version are required"},
		{"owner kind listed twice", head + "ownerKinds:\n- {group: example.com, version: v1, kind: Broker}\n- {group: example.com, version: v2, kind: Broker}\n", "listed twice"},
		{"owner kind known already", head + "ownerKinds:\n- {group: apps.kruise.io, version: v1beta1, kind: StatefulSet}\n", "without being told"},
		{"owner kind typo", head + "ownerKinds:\n- {group: example.com, version: v1, knd: Broker}\n", "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestOwnerKinds(t *testing.T) {
	c, err := Parse([]byte("apiVersion: config.capo.io/v1\nkind: CapoConfig\nownerKinds:\n- {group: example.com, version: v1, kind: Broker, resource: brokers}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OwnerKinds) != 1 || c.OwnerKinds[0].Key() != "Broker.example.com" || c.OwnerKinds[0].Resource != "brokers" {
		t.Fatalf("ownerKinds %+v", c.OwnerKinds)
	}
	if len(Default().OwnerKinds) != 0 {
		t.Fatalf("default ownerKinds %+v, want none", Default().OwnerKinds)
	}
}
