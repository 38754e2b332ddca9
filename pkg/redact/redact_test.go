package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJl"
	pem   = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
)

// An old Calico manifest's netconf: a token and inline key data go, the
// paths of etcd's key and certificate and of the kubeconfig stay, and so
// does everything that is no secret.
func TestJSONConflist(t *testing.T) {
	doc := `{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[{"type":"calico",
	"etcd_key_file":"/calico-secrets/etcd-key","etcd_cert_file":"/calico-secrets/etcd-cert",
	"policy":{"type":"k8s","k8s_auth_token":"s3cr3t-token-value"},
	"kubernetes":{"kubeconfig":"/etc/cni/net.d/calico-kubeconfig","k8s_client_key":"inline-key-bytes"},
	"ipam":{"type":"capo-ipam","delegate":{"type":"calico-ipam"}},
	"labels":[{"key":"app","value":"web"}],"note":"` + strings.ReplaceAll(pem, "\n", `\n`) + `"}]}`
	out, n, err := JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, gone := range []string{"s3cr3t-token-value", "inline-key-bytes", "MIIEvQ", "BEGIN PRIVATE KEY"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q left in:\n%s", gone, got)
		}
	}
	for _, kept := range []string{`"/calico-secrets/etcd-key"`, `"/etc/cni/net.d/calico-kubeconfig"`, `"capo-ipam"`, `"key": "app"`, `"k8s-pod-network"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s lost from:\n%s", kept, got)
		}
	}
	if n != 3 {
		t.Errorf("%d values redacted, want 3:\n%s", n, got)
	}
	if strings.Index(got, `"name"`) > strings.Index(got, `"plugins"`) {
		t.Errorf("key order changed:\n%s", got)
	}
	if again, m, err := JSON(out); err != nil || m != 0 || string(again) != got {
		t.Errorf("redacting twice changes it (%d, %v):\n%s", m, err, again)
	}
	if _, _, err := JSON([]byte(`{"token":`)); err == nil {
		t.Error("a truncated document is redacted, not refused")
	}
}

// Key names as Kubernetes, Calico, kubeconfigs and environments spell them.
func TestClassify(t *testing.T) {
	for name, want := range map[string]keyClass{
		"k8s_auth_token": secret, "password": secret, "ETCD_PASSWORD": secret, "clientSecret": secret,
		"Authorization": secret, "api-key": material, "client-key-data": material, "clientKeyData": material,
		"etcd_key_file": material, "k8s_certificate_authority": material, "kubeconfig": material, "tls.key": material,
		"key": plain, "secretName": plain, "tokenSecretRef": plain, "name": plain, "ipam": plain, "type": plain,
		"automountServiceAccountToken": secret, "monkey": plain, "keyId": plain,
	} {
		if got := classify(name); got != want {
			t.Errorf("classify(%q) = %d, want %d", name, got, want)
		}
	}
}

// Text: YAML, logs and JSON inside strings; a block scalar under a
// secret's key goes whole; material goes whatever its key.
func TestText(t *testing.T) {
	in := strings.Join([]string{
		"data:",
		"  config.yaml: |",
		"    apiVersion: config.capo.io/v1",
		"  tls.key: |",
		"    line one of key material",
		"    line two",
		"  password: hunter2",
		"  kubeconfig: /etc/kubernetes/admin.conf",
		"  enabled: true",
		"  note: " + token,
		`level=INFO msg=x token=abcdef user=bob`,
		`conflist: {"k8s_auth_token":"tok-in-json","name":"n"}`,
		`escaped: "{\"k8s_auth_token\":\"tok-escaped\"}"`,
		"header: Authorization: Bearer abcdefghijklmnop",
		`message: 'note: "token: tok-in-a-message\nkey: |" matches nothing'`,
		"  client-key-data: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t",
		"  - key: statefulset.kubernetes.io/pod-name",
		pem,
	}, "\n")
	out, n := Text([]byte(in))
	got := string(out)
	for _, gone := range []string{"line one", "line two", "hunter2", token, "abcdef", "tok-in-json", "tok-escaped", "tok-in-a-message", "abcdefghijklmnop", "LS0tLS1", "MIIEvQ"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q left in:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"apiVersion: config.capo.io/v1", "kubeconfig: /etc/kubernetes/admin.conf", "enabled: true", "user=bob", `"name":"n"`, "key: statefulset.kubernetes.io/pod-name", "matches nothing"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q lost from:\n%s", kept, got)
		}
	}
	if n < 9 {
		t.Errorf("%d redacted:\n%s", n, got)
	}
}

// Value renders what capo read (a ConfigMap, as the bundle does) with
// secrets out of its data, whatever the key that holds them.
func TestValue(t *testing.T) {
	cm := map[string]any{"kind": "ConfigMap", "data": map[string]string{
		"ca.pem": pem, "10-calico.conflist": `{"policy":{"k8s_auth_token":"planted"}}`, "ttl": "40m",
	}}
	out, n, err := Value(cm)
	if err != nil || n != 2 || strings.Contains(string(out), "planted") || strings.Contains(string(out), "PRIVATE") || !strings.Contains(string(out), `"40m"`) {
		t.Fatalf("%d %v\n%s", n, err, out)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("not JSON any more: %v", err)
	}
}
