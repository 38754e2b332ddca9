package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/capoctl"
	"github.com/capo-net/capo/test/nodebed"
)

// A CNI config as older Calico manifests wrote it: a token, an etcd key's
// path, and inline key material. Its name sorts after Calico's, so the
// runtime never uses it.
const (
	plantedToken = "planted-token-7f3c"
	plantedKey   = "MIIplantedKeyMaterial"
	plantedConf  = `{"name":"planted-net","cniVersion":"0.3.1","plugins":[{"type":"calico","etcd_key_file":"/calico-secrets/etcd-key",` +
		`"policy":{"type":"k8s","k8s_auth_token":"` + plantedToken + `"},` +
		`"etcd_key":"-----BEGIN RSA PRIVATE KEY-----\n` + plantedKey + `\n-----END RSA PRIVATE KEY-----"}]}`
)

// A pod on the node network reaches the agent's ports (metrics on every
// address, health on loopback) but reads no CNI config and no journal
// there, only the node's summary; capoctl bundle, run by who may exec into
// capo's pods, gets the configs through the agent's node-info, redacted.
func TestNodeNetworkReadsNoNodeFiles(t *testing.T) {
	planted := filepath.Join(nodebed.CNIConfDir, "90-planted.conflist")
	if err := os.WriteFile(planted, []byte(plantedConf), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(planted)

	urls := []string{
		"http://127.0.0.1:9467/debug/capo/node",
		"http://" + bed.NodeIP.String() + ":9467/debug/capo/node",
		"http://127.0.0.1:9469/debug/capo/node",
	}
	got := readFromNodeNetwork(t, urls)
	for _, leak := range []string{plantedToken, plantedKey, "planted-net", "etcd-key", `"conflists"`, `"journal":`, `"netconf"`} {
		if strings.Contains(got, leak) {
			t.Errorf("a pod on the node network read %q:\n%s", leak, got)
		}
	}
	for _, want := range []string{"GET " + urls[0] + " 200 {", "GET " + urls[1] + " 200 {", `"runtimeConf":"10-calico.conflist"`, "GET " + urls[2] + " 404"} {
		if !strings.Contains(got, want) {
			t.Errorf("the pod's reads lack %q:\n%s", want, got)
		}
	}

	files := bundle(t)
	conf := files["b/nodes/"+bed.NodeName+"/cni/90-planted.conflist"]
	if !strings.Contains(conf, `"/calico-secrets/etcd-key"`) || !strings.Contains(conf, `"k8s_auth_token": "<redacted>"`) {
		t.Errorf("the bundle's copy of the planted config, paths kept and secrets marked:\n%s", conf)
	}
	for name, data := range files {
		if strings.Contains(data, plantedToken) || strings.Contains(data, plantedKey) {
			t.Errorf("the bundle's %s holds a planted secret", name)
		}
	}
}

// readFromNodeNetwork runs a hostNetwork pod that GETs each URL once and
// gives what it printed.
func readFromNodeNetwork(t *testing.T, urls []string) string {
	t.Helper()
	ctx := context.Background()
	ns := bed.Namespace(t, "nodenet", "", false)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "reader", Image: nodebed.EchoImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-get=" + strings.Join(urls, ","), "-timeout=5s"},
			}},
		},
	}
	if _, err := bed.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := nodebed.Poll(ctx, time.Minute, func() error {
		p, err := bed.Kube.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("the reader pod has not finished (%v)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := bed.Kube.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// bundle runs capoctl bundle as an operator would, and gives its files.
func bundle(t *testing.T) map[string]string {
	t.Helper()
	kc, file := filepath.Join(t.TempDir(), "kubeconfig"), filepath.Join(t.TempDir(), "b.tar.gz")
	if err := bed.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	args := []string{"bundle", "-f", file, "--kubeconfig=" + kc, "--capo-namespace=" + nodebed.Namespace}
	if code := capoctl.Run("capoctl", args, strings.NewReader(""), &out, &errw); code != 0 {
		t.Fatalf("capoctl bundle: exit %d\n%s%s", code, out.String(), errw.String())
	}
	files, err := capoctl.ReadBundle(file)
	if err != nil {
		t.Fatal(err)
	}
	// This node's: a second node an earlier test stopped may still have
	// its Node and its agent's pod, which nothing can exec into.
	for _, line := range strings.Split(files["b/errors.txt"], "\n") {
		if strings.Contains(line, "node-info") && strings.Contains(line, "nodes/"+bed.NodeName+"/") {
			t.Fatalf("the agent's node-info was not read through pods/exec:\n%s", files["b/errors.txt"])
		}
	}
	return files
}
