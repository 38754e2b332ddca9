package apigroup

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func servedGroups(names ...string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return names, nil }
}

func TestDecide(t *testing.T) {
	boom := func(context.Context) ([]string, error) { return nil, errors.New("connection refused") }
	cases := []struct {
		name    string
		in      inputs
		want    Mode
		wantErr string
	}{
		{"etcd needs no group", inputs{Etcd: true, Env: GroupV3, Groups: boom}, Mode{Source: SourceEtcd}, ""},
		{"env wins over netconf and discovery", inputs{Env: GroupV1, Netconf: GroupV3, Groups: servedGroups("projectcalico.org")}, Mode{GroupV1, SourceEnv}, ""},
		{"env bare group", inputs{Env: "projectcalico.org", Groups: boom}, Mode{GroupV3, SourceEnv}, ""},
		{"netconf wins over discovery", inputs{Netconf: GroupV3, Groups: servedGroups("crd.projectcalico.org")}, Mode{GroupV3, SourceNetconf}, ""},
		{"only v3 served", inputs{Groups: servedGroups("apps", "projectcalico.org")}, Mode{GroupV3, SourceDiscovery}, ""},
		{"both served: v1, as Calico", inputs{Groups: servedGroups("projectcalico.org", "crd.projectcalico.org")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"only v1 served", inputs{Groups: servedGroups("crd.projectcalico.org")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"neither served: v1, as Calico", inputs{Groups: servedGroups("apps")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"bad env", inputs{Env: "projectcalico.org/v1", Groups: boom}, Mode{}, "CALICO_API_GROUP"},
		{"bad netconf", inputs{Netconf: "v3", Groups: boom}, Mode{}, "calico_api_group"},
		{"discovery fails", inputs{Groups: boom}, Mode{}, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decide(context.Background(), c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("decide = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSupported(t *testing.T) {
	if err := supported(Mode{GroupV1, SourceDiscovery}); err != nil {
		t.Fatal(err)
	}
	if err := supported(Mode{Source: SourceEtcd}); err != nil {
		t.Fatal(err)
	}
	if err := supported(Mode{GroupV3, SourceNetconf}); err != nil {
		t.Fatalf("v3: %v", err)
	}
	if err := supported(Mode{Source: SourceDiscovery}); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("no group: %v", err)
	}
}

// A DEL journaled before Calico moved the node to v3 is replayed in v3;
// one journaled in the group in force, or on etcdv3, is replayed as it is.
func TestInGroupTellsAJournaledDELTheGroupInForce(t *testing.T) {
	old := []byte(`{"type":"calico","datastore_type":"kubernetes","ipam":{"type":"capo-ipam"}}`)
	v1 := []byte(`{"type":"calico","calico_api_group":"crd.projectcalico.org/v1"}`)
	inV3 := []byte(`{"type":"calico","calico_api_group":"projectcalico.org"}`)
	for name, tc := range map[string]struct {
		netconf []byte
		m       Mode
		want    string // calico_api_group after, "" = unchanged
	}{
		"no key, v3 from the node":  {old, Mode{Group: GroupV3, Source: SourceNetconf}, GroupV3},
		"v1 key, v3 from env":       {v1, Mode{Group: GroupV3, Source: SourceEnv}, GroupV3},
		"no key, v3 by discovery":   {old, Mode{Group: GroupV3, Source: SourceDiscovery}, ""},
		"v1 key, v1 in force":       {v1, Mode{Group: GroupV1, Source: SourceNetconf}, ""},
		"bare v3 name, v3 in force": {inV3, Mode{Group: GroupV3, Source: SourceNetconf}, ""},
		"etcdv3":                    {old, Mode{Source: SourceEtcd}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := InGroup(tc.netconf, tc.m)
			if tc.want == "" {
				if string(got) != string(tc.netconf) {
					t.Fatalf("changed: %s", got)
				}
				return
			}
			var conf map[string]any
			if err := json.Unmarshal(got, &conf); err != nil {
				t.Fatal(err)
			}
			if conf["calico_api_group"] != tc.want || conf["type"] != "calico" {
				t.Fatalf("calico_api_group %v in %s, want %s", conf["calico_api_group"], got, tc.want)
			}
		})
	}
	if got := InGroup([]byte("not json"), Mode{Group: GroupV3, Source: SourceEnv}); string(got) != "not json" {
		t.Fatalf("unreadable netconf changed: %s", got)
	}
}
