package kubeapi

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capo-net/capo/pkg/wire"
)

func apiServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, `{"kind":"Status","message":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/api/v1/namespaces/kafka":
			_, _ = w.Write([]byte(`{"kind":"Namespace","metadata":{"name":"kafka","annotations":{"cni.projectcalico.org/ipv4pools":"[\"ns\"]"}}}`))
		case "/api/v1/nodes/in":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"in","annotations":{"capo.io/ip-reserve":"enabled"}}}`))
		case "/api/v1/nodes/labelled":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"labelled","labels":{"capo.io/ip-reserve":"enabled"}}}`))
		case "/api/v1/nodes/out":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"out","annotations":{"capo.io/ip-reserve":"disabled"}}}`))
		case "/api/v1/namespaces/kafka/pods/b-0":
			_, _ = w.Write([]byte(`{"kind":"Pod","metadata":{"name":"b-0","annotations":{"cni.projectcalico.org/ipFamilies":"[\"IPv4\"]"}},"spec":{}}`))
		default:
			http.Error(w, `{"kind":"Status","reason":"NotFound"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, string(ca)
}

func writeKubeconfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "calico-kubeconfig")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReaderWithInstallCNIKubeconfig(t *testing.T) {
	srv, ca := apiServer(t)
	// The shape calico-node's install-cni writes: CA data and a token.
	kc := writeKubeconfig(t, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: `+srv.URL+`
    certificate-authority-data: "`+base64.StdEncoding.EncodeToString([]byte(ca))+`"
users:
- name: calico
  user:
    token: s3cret
contexts:
- name: calico-context
  context:
    cluster: local
    user: calico
current-context: calico-context
`)
	got, err := Reader{Kubeconfig: kc}.Get(context.Background(), wire.PodRef{Namespace: "kafka", Name: "b-0"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace["cni.projectcalico.org/ipv4pools"] != `["ns"]` || got.Pod["cni.projectcalico.org/ipFamilies"] != `["IPv4"]` || got.Decision != nil {
		t.Fatalf("got %+v", got)
	}
	if _, err := (Reader{Kubeconfig: kc}).Get(context.Background(), wire.PodRef{Namespace: "kafka", Name: "gone"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing pod: %v", err)
	}
}

func TestKubeconfigFilesAndRefusals(t *testing.T) {
	srv, ca := apiServer(t)
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(ca), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret\n"), 0o600)
	// Relative file paths resolve beside the kubeconfig.
	kc := filepath.Join(dir, "kc")
	_ = os.WriteFile(kc, []byte(`clusters: [{name: c, cluster: {server: "`+srv.URL+`", certificate-authority: ca.crt}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if _, err := (Reader{Kubeconfig: kc}).Get(context.Background(), wire.PodRef{Namespace: "kafka", Name: "b-0"}); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		`clusters: []`: "names no cluster",
		`clusters: [{name: c, cluster: {server: "` + srv.URL + `"}}]` + "\nusers: [{name: u, user: {exec: {command: aws}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x": "exec or auth-provider plugin",
		`clusters: [{name: c, cluster: {server: "` + srv.URL + `"}}]` + "\nusers: [{name: u, user: {}}]":                                                                                                "no token or client certificate",
		`clusters: [{name: c, cluster: {server: "x", certificate-authority-data: "` + base64.StdEncoding.EncodeToString([]byte("junk")) + `"}}]`:                                                        "no PEM certificate",
		`{{{`: "kubeconfig",
	} {
		if _, err := loadKubeconfig(writeKubeconfig(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", body, err, want)
		}
	}
	// An untrusted server is refused.
	bad := writeKubeconfig(t, `clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: s3cret}}]`)
	if _, err := (Reader{Kubeconfig: bad}).Get(context.Background(), wire.PodRef{Namespace: "kafka", Name: "b-0"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unverified TLS accepted: %v", err)
	}
}
