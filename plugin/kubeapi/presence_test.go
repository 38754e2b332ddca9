package kubeapi

import (
	"context"
	"encoding/base64"
	"testing"
)

// PodExists tells a pod that is there from one the API server says is
// not, and never takes a refusal for absence.
func TestPodExists(t *testing.T) {
	srv, ca := apiServer(t)
	kc := func(token string) string {
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
	r := Reader{Kubeconfig: kc("s3cret")}
	if ok, err := r.PodExists(context.Background(), "kafka", "b-0"); !ok || err != nil {
		t.Fatalf("existing pod: %v %v", ok, err)
	}
	if ok, err := r.PodExists(context.Background(), "kafka", "gone"); ok || err != nil {
		t.Fatalf("missing pod: %v %v", ok, err)
	}
	if _, err := (Reader{Kubeconfig: kc("wrong")}).PodExists(context.Background(), "kafka", "gone"); err == nil {
		t.Fatal("a refusal was taken for an answer")
	}
}
