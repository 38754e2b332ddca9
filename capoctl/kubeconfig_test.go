package capoctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/pkg/reserve"
)

// Two kubeconfig files as kubectl merges them: a defines both clusters and
// no current context; b names the current context. kubectl uses cluster two.
const (
	kubeconfigA = `apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443", insecure-skip-tls-verify: true}
- name: two
  cluster: {server: "https://two.example:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret-a}
contexts:
- name: one
  context: {cluster: one, user: u}
- name: two
  context: {cluster: two, user: u}
`
	kubeconfigB = `apiVersion: v1
kind: Config
current-context: two
`
)

func writeKubeconfigs(t *testing.T) (a, b string) {
	dir := t.TempDir()
	a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for p, data := range map[string]string{a: kubeconfigA, b: kubeconfigB} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// The Kubernetes client and Calico's reach the same cluster, whatever
// picks it: KUBECONFIG's merge, --context or --kubeconfig.
func TestOneKubeconfigForBothClients(t *testing.T) {
	a, b := writeKubeconfigs(t)
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	t.Setenv("DATASTORE_TYPE", "")
	for name, tc := range map[string]struct {
		flags kubeFlags
		host  string
	}{
		"KUBECONFIG=a:b":       {kubeFlags{}, "https://two.example:6443"},
		"--context":            {kubeFlags{context: "one"}, "https://one.example:6443"},
		"--kubeconfig a":       {kubeFlags{kubeconfig: a, context: "one"}, "https://one.example:6443"},
		"--as and the context": {kubeFlags{context: "two", as: "alice"}, "https://two.example:6443"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := tc.flags.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if r.rest.Host != tc.host {
				t.Fatalf("Kubernetes client: %s, want %s", r.rest.Host, tc.host)
			}
			cfg, err := calicoConfig(r)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Spec.Kubeconfig != "" {
				t.Fatalf("Calico's client would load %q on its own", cfg.Spec.Kubeconfig)
			}
			// Build the Calico client's rest config as libcalico-go does.
			cc, err := clientcmd.NewClientConfigFromBytes([]byte(cfg.Spec.KubeconfigInline))
			if err != nil {
				t.Fatal(err)
			}
			crest, err := cc.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if crest.Host != tc.host || crest.BearerToken != "secret-a" {
				t.Fatalf("Calico's client: %s (token %q), want %s", crest.Host, crest.BearerToken, tc.host)
			}
			if crest.Impersonate.UserName != tc.flags.as || r.rest.Impersonate.UserName != tc.flags.as {
				t.Fatalf("--as %q: Calico's client acts as %q, Kubernetes' as %q", tc.flags.as, crest.Impersonate.UserName, r.rest.Impersonate.UserName)
			}
		})
	}
}

// kubectl's flags reach the dialer, and -n is --namespace.
func TestKubectlFlags(t *testing.T) {
	c := newCtl(t)
	var got kubeFlags
	dial := func(k kubeFlags) (kubernetes.Interface, reserve.Store, error) { got = k; return c.kube, c.store, nil }
	var out, errw strings.Builder
	c.reserve("w1", entry("10.0.0.1", "kafka-0", 0))
	code := run([]string{"list", "--kubeconfig", "/k", "--context", "prod", "--as", "alice", "-n", "other"}, strings.NewReader(""), &out, &errw, dial, now, "capoctl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if got != (kubeFlags{kubeconfig: "/k", context: "prod", as: "alice"}) {
		t.Fatalf("dialer got %+v", got)
	}
	if strings.Contains(out.String(), "kafka-0") {
		t.Fatalf("-n other still lists kafka's pods:\n%s", out.String())
	}
}

func TestCompletion(t *testing.T) {
	c := newCtl(t)
	for shell, want := range map[string][]string{
		"bash": {"complete -o default -F _capoctl capoctl kubectl-capo", "list returns release explain adopt-capo completion", "--kubeconfig", "--context", "-n "},
		"zsh":  {"bashcompinit", "_capoctl"},
		"fish": {"complete -c capoctl -l kubeconfig", "complete -c capoctl -s n", "__fish_use_subcommand"},
	} {
		code, out, errw := c.run("", "completion", shell)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", shell, code, errw)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s script lacks %q:\n%s", shell, w, out)
			}
		}
	}
	if code, _, _ := c.run("", "completion", "tcsh"); code != 2 {
		t.Errorf("unknown shell: exit %d", code)
	}
}

// --help and unknown commands answer without a cluster.
func TestHelpNeedsNoCluster(t *testing.T) {
	dial := func(kubeFlags) (kubernetes.Interface, reserve.Store, error) {
		t.Fatal("dialed the cluster")
		return nil, nil, nil
	}
	for args, want := range map[string]int{"--help": 0, "-h": 0, "help": 0, "lsit": 2} {
		var out, errw strings.Builder
		if code := run(strings.Fields(args), strings.NewReader(""), &out, &errw, dial, now, "capoctl"); code != want || !strings.Contains(errw.String(), "capoctl list") {
			t.Errorf("capoctl %s: exit %d, want %d; usage:\n%s", args, code, want, errw.String())
		}
	}
}

func TestPluginName(t *testing.T) {
	if Name("/usr/local/bin/kubectl-capo") != "kubectl capo" || Name("capoctl") != "capoctl" {
		t.Fatal("Name")
	}
	var out, errw strings.Builder
	run(nil, strings.NewReader(""), &out, &errw, nil, now, "kubectl capo")
	if !strings.Contains(errw.String(), "kubectl capo list") || strings.Contains(errw.String(), "capoctl list") {
		t.Fatalf("usage as the plugin:\n%s", errw.String())
	}
}
