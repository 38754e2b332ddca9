package plugin

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/jsonedit"
)

// capo-ipam reads the runtime's stdin and CNI_ARGS, and pod annotations
// any namespace owner writes: none may panic the plugin or reach the
// delegate in a form other than the one parsed.

// FuzzNetConfDelegate (beside conf_test.go's FuzzParseNetConf, which checks
// the splice parses): a netconf that parses gives the delegate the original
// bytes with the ipam value, and only it, replaced by the delegate block.
func FuzzNetConfDelegate(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"0.3.1", "name":"k8s-pod-network","type":"calico","mtu": 1.50e3, "ipam" :  {"type":"capo-ipam","delegate":{"type":"calico-ipam","assign_ipv6":"true"}} ,"z":0.10}`))
	f.Add([]byte(`{"name":"n","cniVersion":"0.3.1","ipam":{"type":"capo-ipam","delegate_timeout":"7s","agent_timeout":2.5}}`))
	f.Add([]byte(`{"name":"n","ipam":{"type":"capo-ipam","delegate":null,"state_dir":"/x"}}`))
	f.Add([]byte(`{"ipam":{"type":"capo-ipam","delegate":{"type":"../bin/sh"}}}`))
	f.Add([]byte(`{"ipam":{"type":"capo-ipam","Delegate":{"type":"calico-ipam"}}}`))
	f.Add([]byte(`{"ipam":{"type":"capo-ipam","delegate_timeout":1e300}}`))
	f.Add([]byte(`{"ipam":{},"ipam":{}}`))
	f.Fuzz(func(t *testing.T, stdin []byte) {
		orig := bytes.Clone(stdin)
		conf, err := ParseNetConf(stdin)
		if !bytes.Equal(stdin, orig) {
			t.Fatal("stdin was modified")
		}
		if err != nil {
			if conf != nil || err.Error() == "" {
				t.Fatalf("an error with a result, or without words: %+v %q", conf, err)
			}
			return
		}
		typ := conf.DelegateType()
		if typ == "" || typ == PluginType || strings.ContainsAny(typ, `/\`) {
			t.Fatalf("delegate type %q accepted", typ)
		}
		if conf.IPAM.DelegateTimeout <= 0 || conf.IPAM.AgentTimeout <= 0 || conf.IPAM.AgentSocket == "" || conf.IPAM.StateDir == "" {
			t.Fatalf("defaults not applied: %+v", conf.IPAM)
		}
		if !bytes.Equal(conf.Raw(), stdin) {
			t.Fatal("Raw is not stdin")
		}
		out := conf.DelegateNetConf()
		s, e, err := jsonedit.Find(out, "ipam")
		if err != nil || !bytes.Equal(out[s:e], conf.IPAM.Delegate) {
			t.Fatalf("the delegate's ipam is not the delegate block: %v\n%s", err, out)
		}
		is, ie, _ := jsonedit.Find(stdin, "ipam")
		if s != is || !bytes.Equal(out[:s], stdin[:is]) || !bytes.Equal(out[e:], stdin[ie:]) {
			t.Fatal("bytes besides the ipam value changed")
		}
		var d struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(conf.IPAM.Delegate, &d); err != nil || d.Type != typ {
			t.Fatalf("delegate type %q, block says %q (%v)", typ, d.Type, err)
		}
	})
}

// FuzzPodOf: what calico-ipam accepts, capo-ipam accepts, naming the same
// pod; CNI_ARGS either fail to parse or name a pod that, written
// back as the runtime writes it, parses to the same pod.
func FuzzPodOf(f *testing.F) {
	f.Add("IgnoreUnknown=1;K8S_POD_NAMESPACE=kafka;K8S_POD_NAME=broker-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=5b1c2d3e")
	f.Add("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=")
	f.Add("K8S_POD_NAME=a=b")
	f.Add("IgnoreUnknown=true;;=;x")
	f.Add("K8S_POD_NAME=p;K8S_POD_NAME=q")
	f.Add("IP=192.168.123.123")
	f.Add("K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns;K8S_POD_INFRA_CONTAINER_ID=whatever;IP=10.0.0.1")
	f.Fuzz(func(t *testing.T, args string) {
		pod, err := podOf(&skel.CmdArgs{Args: args})
		if k8s, ok := calicoIPAMAccepts(args, "DEL"); ok {
			if err != nil {
				t.Fatalf("calico-ipam accepts %q, capo-ipam refuses it: %v", args, err)
			}
			if pod.Namespace != string(k8s.K8S_POD_NAMESPACE) || pod.Name != string(k8s.K8S_POD_NAME) {
				t.Fatalf("%q: capo-ipam reads %+v, calico-ipam %s/%s", args, pod, k8s.K8S_POD_NAMESPACE, k8s.K8S_POD_NAME)
			}
		}
		if err != nil {
			if !strings.Contains(err.Error(), "CNI_ARGS") {
				t.Fatalf("the error does not say what it read: %v", err)
			}
			return
		}
		for _, v := range []string{pod.Namespace, pod.Name, pod.UID} {
			if strings.ContainsAny(v, ";=") {
				t.Fatalf("a value holds a separator: %+v", pod)
			}
		}
		again, err := podOf(&skel.CmdArgs{Args: "K8S_POD_NAMESPACE=" + pod.Namespace + ";K8S_POD_NAME=" + pod.Name + ";K8S_POD_UID=" + pod.UID})
		if err != nil || again != pod {
			t.Fatalf("%+v written back reads as %+v (%v)", pod, again, err)
		}
	})
}

// FuzzApplyCalicoAnnotations: annotations either fail the ADD with an
// error that names them, or give a delegate block that is the original with
// only the pool and family keys set, as Calico would set them.
func FuzzApplyCalicoAnnotations(f *testing.F) {
	f.Add(`{"type":"calico-ipam","assign_ipv4":"true"}`, `["gold"]`, "", "", `["ns-v6"]`)
	f.Add(`{"type":"calico-ipam"}`, "", `["fd00:9::/64"]`, `["IPv6"]`, "")
	f.Add(`{"type":"calico-ipam","ipv4_pools":["x"]}`, "null", "", `["IPv4","IPv6"]`, "")
	f.Add(`{"type":"calico-ipam"}`, "gold", `{"a":1}`, `["IPv5"]`, "")
	f.Add(`{"type":"calico-ipam"}`, "", "", "", "")
	f.Fuzz(func(t *testing.T, delegate, v4, v6, fam, nsV6 string) {
		// The delegate is what ParseNetConf accepted.
		conf, err := ParseNetConf([]byte(`{"name":"n","ipam":{"type":"capo-ipam","delegate":` + delegate + `}}`))
		if err != nil {
			return
		}
		podAnn := map[string]string{AnnotationIPv4Pools: v4, AnnotationIPv6Pools: v6, AnnotationIPFamilies: fam}
		nsAnn := map[string]string{AnnotationIPv6Pools: nsV6}
		out, changed, err := applyCalicoAnnotations(conf.IPAM.Delegate, nsAnn, podAnn, "ns/p")
		if err != nil {
			if out != nil || changed || !strings.Contains(err.Error(), "ns/p") {
				t.Fatalf("an error with a result, or that names no pod: %s %v %v", out, changed, err)
			}
			return
		}
		if !changed {
			if v4+v6+fam+nsV6 != "" || !bytes.Equal(out, conf.IPAM.Delegate) {
				t.Fatalf("unchanged, but %s from %s", out, conf.IPAM.Delegate)
			}
			return
		}
		var before, after map[string]any
		if err := json.Unmarshal(conf.IPAM.Delegate, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("the delegate block is not a JSON object: %v: %s", err, out)
		}
		if v6 == "" {
			v6 = nsV6 // the pod's annotation overrides the namespace's, key by key
		}
		for key, ann := range map[string]string{"ipv4_pools": v4, "ipv6_pools": v6} {
			if ann == "" {
				continue
			}
			var want any
			if err := json.Unmarshal([]byte(ann), &want); err != nil || !reflect.DeepEqual(after[key], want) {
				t.Fatalf("%s is %v, the annotation says %s", key, after[key], ann)
			}
			delete(before, key)
			delete(after, key)
		}
		if fam != "" {
			if !strings.Contains(fam, "IPv4") && after["assign_ipv4"] != "false" || !strings.Contains(fam, "IPv6") && after["assign_ipv6"] != "false" {
				t.Fatalf("families %s gave %v %v", fam, after["assign_ipv4"], after["assign_ipv6"])
			}
			for _, k := range []string{"assign_ipv4", "assign_ipv6"} {
				if after[k] != "true" && after[k] != "false" {
					t.Fatalf("%s is %v", k, after[k])
				}
				delete(before, k)
				delete(after, k)
			}
		}
		if !maps.EqualFunc(before, after, func(a, b any) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("keys besides pools and families changed:\n%v\n%v", before, after)
		}
	})
}
