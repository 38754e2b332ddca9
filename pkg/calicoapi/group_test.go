package calicoapi

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func served(names ...string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) { return names, nil }
}

func TestDecide(t *testing.T) {
	boom := func(context.Context) ([]string, error) { return nil, errors.New("connection refused") }
	cases := []struct {
		name    string
		in      Inputs
		want    Mode
		wantErr string
	}{
		{"etcd needs no group", Inputs{Etcd: true, Env: GroupV3, Groups: boom}, Mode{Source: SourceEtcd}, ""},
		{"env wins over netconf and discovery", Inputs{Env: GroupV1, Netconf: GroupV3, Groups: served("projectcalico.org")}, Mode{GroupV1, SourceEnv}, ""},
		{"env bare group", Inputs{Env: "projectcalico.org", Groups: boom}, Mode{GroupV3, SourceEnv}, ""},
		{"netconf wins over discovery", Inputs{Netconf: GroupV3, Groups: served("crd.projectcalico.org")}, Mode{GroupV3, SourceNetconf}, ""},
		{"only v3 served", Inputs{Groups: served("apps", "projectcalico.org")}, Mode{GroupV3, SourceDiscovery}, ""},
		{"both served: v1, as Calico", Inputs{Groups: served("projectcalico.org", "crd.projectcalico.org")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"only v1 served", Inputs{Groups: served("crd.projectcalico.org")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"neither served: v1, as Calico", Inputs{Groups: served("apps")}, Mode{GroupV1, SourceDiscovery}, ""},
		{"bad env", Inputs{Env: "projectcalico.org/v1", Groups: boom}, Mode{}, "CALICO_API_GROUP"},
		{"bad netconf", Inputs{Netconf: "v3", Groups: boom}, Mode{}, "calico_api_group"},
		{"discovery fails", Inputs{Groups: boom}, Mode{}, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decide(context.Background(), c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Decide = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSupported(t *testing.T) {
	if err := Supported(Mode{GroupV1, SourceDiscovery}); err != nil {
		t.Fatal(err)
	}
	if err := Supported(Mode{Source: SourceEtcd}); err != nil {
		t.Fatal(err)
	}
	if err := Supported(Mode{GroupV3, SourceNetconf}); err != nil {
		t.Fatalf("v3: %v", err)
	}
	if err := Supported(Mode{Source: SourceDiscovery}); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("no group: %v", err)
	}
}
