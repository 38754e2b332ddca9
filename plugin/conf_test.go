package plugin

import (
	"strings"
	"testing"
	"time"
)

func TestParseNetConfSplicesDelegateExactly(t *testing.T) {
	// Odd spacing, numbers Go would re-encode, unknown keys, escapes: all must
	// reach the delegate byte for byte.
	in := `{"cniVersion":"0.3.1", "name":"k8s-pod-network","type":"calico","mtu": 1.50e3,
  "x_unknown":{"b":1,"a":[2,1]}, "ipam" :  {"type":"capo-ipam","delegate":{"type":"calico-ipam","assign_ipv6":"true","ipv4_pools":["10.0.0.0/24"]}} ,"kubernetes":{"kubeconfig":"/etc/k\u00e9"},"z":0.10}`
	conf, err := ParseNetConf([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cniVersion":"0.3.1", "name":"k8s-pod-network","type":"calico","mtu": 1.50e3,
  "x_unknown":{"b":1,"a":[2,1]}, "ipam" :  {"type":"calico-ipam","assign_ipv6":"true","ipv4_pools":["10.0.0.0/24"]} ,"kubernetes":{"kubeconfig":"/etc/k\u00e9"},"z":0.10}`
	if got := string(conf.DelegateNetConf()); got != want {
		t.Fatalf("delegate netconf\n got %s\nwant %s", got, want)
	}
	if conf.Name != "k8s-pod-network" || conf.CNIVersion != "0.3.1" || conf.DelegateType() != "calico-ipam" {
		t.Fatalf("parsed %+v, delegate %q", conf, conf.DelegateType())
	}
	if conf.IPAM.DelegateTimeout.D() != DefaultDelegateTimeout {
		t.Fatalf("default timeout = %v", conf.IPAM.DelegateTimeout.D())
	}
}

func TestParseNetConfDefaults(t *testing.T) {
	conf, err := ParseNetConf([]byte(`{"name":"n","cniVersion":"0.3.1","ipam":{"type":"capo-ipam","delegate_timeout":"7s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(conf.DelegateNetConf()); got != `{"name":"n","cniVersion":"0.3.1","ipam":{"type":"calico-ipam"}}` {
		t.Fatalf("got %s", got)
	}
	if conf.IPAM.DelegateTimeout.D() != 7*time.Second {
		t.Fatalf("timeout %v", conf.IPAM.DelegateTimeout.D())
	}
	conf, err = ParseNetConf([]byte(`{"name":"n","ipam":{"type":"capo-ipam","delegate_timeout":2.5,"delegate":{"type":"host-local"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if conf.IPAM.DelegateTimeout.D() != 2500*time.Millisecond || conf.DelegateType() != "host-local" {
		t.Fatalf("got %v %q", conf.IPAM.DelegateTimeout.D(), conf.DelegateType())
	}
}

func TestParseNetConfErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"not json", `hello`, "not valid JSON"},
		{"truncated", `{"name":"n","ipam":{"type":"capo-ipam"}`, "not valid JSON"},
		{"array", `[1,2]`, "not a JSON object"},
		{"trailing data", `{"name":"n","ipam":{"type":"capo-ipam"}} {}`, "not valid JSON"},
		{"no ipam", `{"name":"n","type":"calico"}`, `no "ipam" block`},
		{"two ipam", `{"ipam":{"type":"capo-ipam"},"ipam":{"type":"capo-ipam"}}`, `more than one "ipam"`},
		{"ipam not object", `{"ipam":"capo-ipam"}`, `"ipam" is not a JSON object`},
		{"settings but no delegate", `{"ipam":{"type":"capo-ipam","assign_ipv6":"true","ipv4_pools":["a"]}}`, "(assign_ipv6, ipv4_pools) and no \"delegate\""},
		{"stray beside delegate", `{"ipam":{"type":"capo-ipam","delegate":{"type":"calico-ipam"},"assign_ipv6":"true"}}`, "belong inside ipam.delegate"},
		{"delegate not object", `{"ipam":{"type":"capo-ipam","delegate":"calico-ipam"}}`, "must be a JSON object"},
		{"delegate no type", `{"ipam":{"type":"capo-ipam","delegate":{"assign_ipv4":"true"}}}`, `has no "type"`},
		{"delegate is capo", `{"ipam":{"type":"capo-ipam","delegate":{"type":"capo-ipam"}}}`, "capo-ipam itself"},
		{"delegate path", `{"ipam":{"type":"capo-ipam","delegate":{"type":"../bin/sh"}}}`, "not a path"},
		{"bad timeout", `{"ipam":{"type":"capo-ipam","delegate_timeout":"soon"}}`, `want a Go duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNetConf([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzParseNetConf(f *testing.F) {
	f.Add([]byte(`{"name":"n","ipam":{"type":"capo-ipam","delegate":{"type":"calico-ipam"}}}`))
	f.Add([]byte(`{"ipam" : {"type":"capo-ipam"} , "a":[1,{"ipam":2}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		conf, err := ParseNetConf(in)
		if err != nil {
			return
		}
		// Whatever parsed must splice into valid JSON with the delegate as ipam.
		out := conf.DelegateNetConf()
		again, err := ParseNetConfAny(out)
		if err != nil {
			t.Fatalf("splice of %q gave invalid JSON %q: %v", in, out, err)
		}
		if again != conf.DelegateType() {
			t.Fatalf("spliced ipam type %q, want %q", again, conf.DelegateType())
		}
	})
}

// The calico plugin's keys are read with the netconf, once: a key of an
// unexpected type leaves its setting empty and fails nothing, as each was
// read on its own before.
func TestParseNetConfCalicoSettings(t *testing.T) {
	for _, tc := range []struct{ in, kubeconfig, policy string }{
		{`{"name":"n","kubernetes":{"kubeconfig":"/k"},"policy":{"type":"k8s"},"ipam":{"type":"capo-ipam"}}`, "/k", "k8s"},
		{`{"name":"n","ipam":{"type":"capo-ipam"}}`, "", ""},
		{`{"name":"n","kubernetes":"x","policy":{"type":"k8s"},"ipam":{"type":"capo-ipam"}}`, "", "k8s"},
		{`{"name":"n","kubernetes":{"kubeconfig":5},"policy":null,"ipam":{"type":"capo-ipam"}}`, "", ""},
	} {
		conf, err := ParseNetConf([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := conf.calico; got.Kubernetes.Kubeconfig != tc.kubeconfig || got.Policy.Type != tc.policy {
			t.Errorf("%s: got kubeconfig %q policy %q, want %q %q", tc.in, got.Kubernetes.Kubeconfig, got.Policy.Type, tc.kubeconfig, tc.policy)
		}
	}
}
