package kubeapi

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/capo-net/capo/pkg/selection"
)

// PodExists tells a pod that is there from one the API server says is
// not, and never takes a refusal for absence.
func TestPodExists(t *testing.T) {
	r := Reader{Kubeconfig: testKubeconfig(t, "s3cret")}
	if ok, err := r.PodExists(context.Background(), "kafka", "b-0"); !ok || err != nil {
		t.Fatalf("existing pod: %v %v", ok, err)
	}
	if ok, err := r.PodExists(context.Background(), "kafka", "gone"); ok || err != nil {
		t.Fatalf("missing pod: %v %v", ok, err)
	}
	if _, err := (Reader{Kubeconfig: testKubeconfig(t, "wrong")}).PodExists(context.Background(), "kafka", "gone"); err == nil {
		t.Fatal("a refusal was taken for an answer")
	}
}

// NodeOptedIn reads capo's opt-in off the Node, by annotation or label; a
// node the API server does not have, or a refusal, is no answer.
func TestNodeOptedIn(t *testing.T) {
	r := Reader{Kubeconfig: testKubeconfig(t, "s3cret")}
	for node, want := range map[string]bool{"in": true, "labelled": true, "out": false} {
		if got, err := r.NodeOptedIn(context.Background(), node); got != want || err != nil {
			t.Errorf("node %s: opted in %v %v, want %v", node, got, err, want)
		}
	}
	if _, err := r.NodeOptedIn(context.Background(), "deleted"); err == nil {
		t.Error("a node the API server does not have was taken for one opted out")
	}
	if _, err := (Reader{Kubeconfig: testKubeconfig(t, "wrong")}).NodeOptedIn(context.Background(), "out"); err == nil {
		t.Error("a refusal was taken for an answer")
	}
}

// optedIn is selection.NodeOptedIn, which capo-ipam-kube does not link.
func TestOptedInIsTheSelectionRule(t *testing.T) {
	for _, v := range []string{"", "enabled", "disabled", "Enabled"} {
		for _, onLabel := range []bool{false, true} {
			m := map[string]string{selection.NodeAnnotation: v}
			o := &selection.Object{Annotations: m}
			if onLabel {
				o = &selection.Object{Labels: map[string]string{selection.NodeOptInLabel: v}}
			}
			if got, want := optedIn(o.Labels, o.Annotations), selection.NodeOptedIn(o); got != want {
				t.Errorf("%q (label %v): %v, selection says %v", v, onLabel, got, want)
			}
		}
	}
}

// testKubeconfig is a kubeconfig for apiServer with token.
func testKubeconfig(t *testing.T, token string) string {
	t.Helper()
	srv, ca := apiServer(t)
	return writeKubeconfig(t, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: `+srv.URL+`
    certificate-authority-data: "`+base64.StdEncoding.EncodeToString([]byte(ca))+`"
users:
- name: calico
  user:
    token: `+token+`
contexts:
- name: c
  context: {cluster: local, user: calico}
current-context: c
`)
}
