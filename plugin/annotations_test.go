package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/wire"
)

func TestApplyCalicoAnnotations(t *testing.T) {
	base := json.RawMessage(`{"type":"calico-ipam","assign_ipv4":"true"}`)
	cases := []struct {
		name    string
		ns, pod map[string]string
		want    map[string]any // nil: delegate unchanged
		wantErr string
	}{
		{name: "none", want: nil},
		{
			name: "pod pools by name", pod: map[string]string{AnnotationIPv4Pools: `["gold"]`},
			want: map[string]any{"type": "calico-ipam", "assign_ipv4": "true", "ipv4_pools": []any{"gold"}},
		},
		{
			name: "namespace pools by CIDR", ns: map[string]string{AnnotationIPv4Pools: `["10.9.0.0/24"]`, AnnotationIPv6Pools: `["fd00:9::/64"]`},
			want: map[string]any{"type": "calico-ipam", "assign_ipv4": "true", "ipv4_pools": []any{"10.9.0.0/24"}, "ipv6_pools": []any{"fd00:9::/64"}},
		},
		{
			name: "pod overrides namespace, key by key", ns: map[string]string{AnnotationIPv4Pools: `["ns-pool"]`, AnnotationIPv6Pools: `["ns-v6"]`}, pod: map[string]string{AnnotationIPv4Pools: `["pod-pool"]`},
			want: map[string]any{"type": "calico-ipam", "assign_ipv4": "true", "ipv4_pools": []any{"pod-pool"}, "ipv6_pools": []any{"ns-v6"}},
		},
		{
			name: "families: IPv6 only", pod: map[string]string{AnnotationIPFamilies: `["IPv6"]`},
			want: map[string]any{"type": "calico-ipam", "assign_ipv4": "false", "assign_ipv6": "true"},
		},
		{
			name: "families: both", ns: map[string]string{AnnotationIPFamilies: `["IPv4","IPv6"]`},
			want: map[string]any{"type": "calico-ipam", "assign_ipv4": "true", "assign_ipv6": "true"},
		},
		{name: "malformed pools", pod: map[string]string{AnnotationIPv4Pools: `gold`}, wantErr: `ipv4pools="gold" on pod kafka/b-0 is not a JSON list`},
		{name: "malformed namespace pools", ns: map[string]string{AnnotationIPv6Pools: `{"a":1}`}, wantErr: "on the namespace of pod kafka/b-0"},
		{name: "unknown family", pod: map[string]string{AnnotationIPFamilies: `["IPv5"]`}, wantErr: `"IPv5" is not IPv4 or IPv6`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := applyCalicoAnnotations(base, tc.ns, tc.pod, "kafka/b-0")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if changed || string(out) != string(base) {
					t.Fatalf("changed the delegate: %s", out)
				}
				return
			}
			var got map[string]any
			_ = json.Unmarshal(out, &got)
			if !changed || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

type fakeAnnotations struct {
	ns, pod  map[string]string
	decision *wire.Decision
	err      error
}

func (f fakeAnnotations) Get(context.Context, wire.PodRef) (*wire.AnnotationsResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &wire.AnnotationsResponse{Namespace: f.ns, Pod: f.pod, Decision: f.decision}, nil
}

func TestAddAppliesAnnotationsToTheDelegateOnly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stdin")
	dir := script(t, "calico-ipam", `cat > `+out+`; printf '{"cniVersion":"0.3.1","ips":[]}'`)
	conf := mustConf(t, `{"cniVersion":"0.3.1","name":"net1","mtu":1.50e3,"policy":{"type":"k8s"},"ipam":{"type":"capo-ipam"}}`)
	args := &skel.CmdArgs{ContainerID: "c", IfName: "eth0", Args: "K8S_POD_NAMESPACE=kafka;K8S_POD_NAME=b-0"}
	ann := fakeAnnotations{pod: map[string]string{AnnotationIPv4Pools: `["gold"]`}, decision: &wire.Decision{Selected: true, Rule: "pod annotation"}}
	j := &fakeJournal{}
	if err := add(context.Background(), args, conf, addDeps{delegate: &ExecDelegate{Paths: []string{dir}}, journal: j, ann: ann, stdout: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if string(got) != `{"cniVersion":"0.3.1","name":"net1","mtu":1.50e3,"policy":{"type":"k8s"},"ipam":{"ipv4_pools":["gold"],"type":"calico-ipam"}}` {
		t.Fatalf("delegate got %s", got)
	}
	// The agent's decision at ADD is kept for a DEL that finds the pod gone.
	if len(j.recorded) != 1 || j.recorded[0].AtAdd == nil || !j.recorded[0].AtAdd.Selected {
		t.Fatalf("ADD record %+v lacks the agent's decision", j.recorded)
	}
	// Without policy type k8s the calico plugin reads no pod, and neither does capo.
	if err := add(context.Background(), args, mustConf(t, `{"name":"n","ipam":{"type":"capo-ipam"}}`), addDeps{delegate: &ExecDelegate{Paths: []string{dir}}, journal: &fakeJournal{}, ann: ann, stdout: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); strings.Contains(string(got), "gold") {
		t.Fatalf("annotations applied without policy type k8s: %s", got)
	}
	ann.err = errors.New("connection refused")
	if err := add(context.Background(), args, mustConf(t, `{"name":"n","policy":{"type":"k8s"},"ipam":{"type":"capo-ipam"}}`), addDeps{delegate: &ExecDelegate{Paths: []string{dir}}, journal: &fakeJournal{}, ann: ann, stdout: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("an unreadable pod must fail the ADD as under calico-ipam: %v", err)
	}
	// Another delegate is left alone, as the calico plugin leaves non-calico-ipam types.
	hl := script(t, "host-local", `cat > `+out+`; printf '{"cniVersion":"0.3.1","ips":[]}'`)
	if err := add(context.Background(), args, mustConf(t, `{"name":"n","policy":{"type":"k8s"},"ipam":{"type":"capo-ipam","delegate":{"type":"host-local"}}}`), addDeps{delegate: &ExecDelegate{Paths: []string{hl}}, journal: &fakeJournal{}, ann: ann, stdout: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); strings.Contains(string(got), "gold") {
		t.Fatalf("annotations applied to a non-calico-ipam delegate: %s", got)
	}
}

// With the agent away, capo-ipam runs capo-ipam-kube from CNI_PATH and reads
// its answer; a missing or failing helper is an error that says what to do.
func TestKubeAnnotationsRunTheHelper(t *testing.T) {
	ref := wire.PodRef{Namespace: "kafka", Name: "b-0"}
	args := filepath.Join(t.TempDir(), "args")
	ok := script(t, wire.KubeHelper, `echo "$@" > `+args+`; printf '{"namespace":{"cni.projectcalico.org/ipv4pools":"[\"ns\"]"},"pod":{}}'`)
	got, err := kubeAnnotations{kubeconfig: "/etc/cni/net.d/calico-kubeconfig", paths: []string{"/nonexistent", ok}}.Get(context.Background(), ref)
	if err != nil || got.Namespace[AnnotationIPv4Pools] != `["ns"]` {
		t.Fatalf("%+v %v", got, err)
	}
	if b, _ := os.ReadFile(args); strings.TrimSpace(string(b)) != "--kubeconfig /etc/cni/net.d/calico-kubeconfig --namespace kafka --pod b-0" {
		t.Fatalf("helper ran with %q", b)
	}
	for _, tc := range []struct {
		name, body, want string
		timeout          time.Duration
	}{
		{name: "fails", body: `echo 'API server answered 403 Forbidden' >&2; exit 1`, want: "capo-ipam-kube: API server answered 403 Forbidden"},
		{name: "garbage", body: `echo nope`, want: "answer is not valid"},
		{name: "hangs", body: `sleep 5`, want: "did not answer in time", timeout: 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			_, err := kubeAnnotations{kubeconfig: "k", paths: []string{script(t, wire.KubeHelper, tc.body)}}.Get(ctx, ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	_, err = kubeAnnotations{kubeconfig: "k", paths: []string{t.TempDir()}}.Get(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "capo-ipam-kube is missing from CNI_PATH") || !strings.Contains(err.Error(), "capo-install") {
		t.Fatalf("missing helper: %v", err)
	}
}
