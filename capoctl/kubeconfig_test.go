package capoctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
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
		flags []string
		host  string
	}{
		"KUBECONFIG=a:b":       {nil, "https://two.example:6443"},
		"--context":            {[]string{"--context=one"}, "https://one.example:6443"},
		"--kubeconfig a":       {[]string{"--kubeconfig=" + a, "--context=one"}, "https://one.example:6443"},
		"--as and the context": {[]string{"--context=two", "--as=alice"}, "https://two.example:6443"},
		"--server and --token": {[]string{"--server=https://three.example:6443", "--token=secret-a"}, "https://three.example:6443"},
	} {
		t.Run(name, func(t *testing.T) {
			cf := parseFlags(t, tc.flags...)
			r, err := resolve(cf)
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
			if crest.Impersonate.UserName != cf.overrides.AuthInfo.Impersonate || r.rest.Impersonate.UserName != cf.overrides.AuthInfo.Impersonate {
				t.Fatalf("--as %q: Calico's client acts as %q, Kubernetes' as %q", cf.overrides.AuthInfo.Impersonate, crest.Impersonate.UserName, r.rest.Impersonate.UserName)
			}
		})
	}
}

// kubectl's flags reach the dialer, and -n is --namespace.
func TestKubectlFlags(t *testing.T) {
	c := newCtl(t)
	var got *kubeFlags
	dial := func(cf *kubeFlags) (*clients, error) {
		got = cf
		return &clients{kube: c.kube, store: c.store}, nil
	}
	var out, errw strings.Builder
	c.reserve("w1", entry("10.0.0.1", "kafka-0", 0))
	code := run([]string{"list", "--kubeconfig", "/k", "--context", "prod", "--as", "alice", "-n", "other"}, strings.NewReader(""), &out, &errw, dial, now, "capoctl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if got.kubeconfig != "/k" || got.overrides.CurrentContext != "prod" || got.overrides.AuthInfo.Impersonate != "alice" || got.overrides.Timeout != "0" {
		t.Fatalf("dialer got %+v", got)
	}
	if strings.Contains(out.String(), "kafka-0") {
		t.Fatalf("-n other still lists kafka's pods:\n%s", out.String())
	}
}

func TestCompletion(t *testing.T) {
	c := newCtl(t)
	for shell, want := range map[string][]string{
		// cobra's scripts ask capoctl itself (__complete), so they know
		// every command and flag, and complete from the cluster.
		"bash":       {"complete -o default -F __start_capoctl capoctl", "complete -o default -F __start_capoctl kubectl-capo", "__complete"},
		"zsh":        {"#compdef capoctl", "__complete"},
		"fish":       {"complete -c capoctl", "__complete"},
		"powershell": {"Register-ArgumentCompleter", "__complete"},
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
	dial := func(*kubeFlags) (*clients, error) {
		t.Fatal("dialed the cluster")
		return nil, nil
	}
	for args, want := range map[string]int{"--help": 0, "-h": 0, "help": 0, "lsit": 2} {
		var out, errw strings.Builder
		if code := run(strings.Fields(args), strings.NewReader(""), &out, &errw, dial, now, "capoctl"); code != want || !strings.Contains(out.String()+errw.String(), "list") {
			t.Errorf("capoctl %s: exit %d, want %d; usage:\n%s%s", args, code, want, out.String(), errw.String())
		}
	}
}

func TestPluginName(t *testing.T) {
	if Name("/usr/local/bin/kubectl-capo") != "kubectl capo" || Name("capoctl") != "capoctl" {
		t.Fatal("Name")
	}
	var out, errw strings.Builder
	run(nil, strings.NewReader(""), &out, &errw, nil, now, "kubectl capo")
	if !strings.Contains(out.String(), "kubectl capo [command]") || strings.Contains(out.String(), "capoctl [command]") {
		t.Fatalf("usage as the plugin:\n%s", out.String())
	}
	out.Reset()
	run([]string{"list", "--help"}, strings.NewReader(""), &out, &errw, nil, now, "kubectl capo")
	if !strings.Contains(out.String(), "kubectl capo list [--node N]") || !strings.Contains(out.String(), "--request-timeout") {
		t.Fatalf("list's own usage as the plugin:\n%s", out.String())
	}
}

// parseFlags is kubectl's connection flags as given on a command line.
func parseFlags(t *testing.T, args ...string) *kubeFlags {
	t.Helper()
	cf := &kubeFlags{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cf.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cf
}
