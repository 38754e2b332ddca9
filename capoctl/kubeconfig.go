package capoctl

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// resolved is one cluster, as kubectl would reach it: the Kubernetes client
// and Calico's are both built from it, so they cannot disagree (before,
// Calico's client read only the first file of KUBECONFIG=a:b).
type resolved struct {
	rest *rest.Config
	// inline is that same rest config as a kubeconfig, for libcalico-go;
	// nil in a pod with no kubeconfig, where both use the in-cluster account.
	inline []byte
}

// kubeFlags are kubectl's connection flags, the same names and meanings:
// --kubeconfig, and client-go's override flags (--context, --cluster,
// --user, -n/--namespace, --server, --token, --as, --as-group,
// --certificate-authority, --insecure-skip-tls-verify,
// --request-timeout, ...), which cli-runtime's ConfigFlags wraps. They are
// bound from client-go directly: genericclioptions links kustomize (19 MB
// of capoctl's binary) for flags capoctl does not have.
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func (k *kubeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	clientcmd.BindOverrideFlags(&k.overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
}

// loader is the kubeconfig as kubectl loads it: --kubeconfig, else
// KUBECONFIG's files merged, else ~/.kube/config; the flags on top.
func (k *kubeFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &k.overrides)
}

// resolve reaches the cluster the flags name.
func resolve(k *kubeFlags) (resolved, error) {
	loader := k.loader()
	rc, err := loader.ClientConfig()
	if err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	if len(raw.Contexts) == 0 && k.overrides.ClusterInfo.Server == "" {
		return resolved{rest: rc}, nil // in-cluster
	}
	inline, err := clientcmd.Write(*kubeconfigOf(rc))
	if err != nil {
		return resolved{}, err
	}
	return resolved{rest: rc, inline: inline}, nil
}

// kubeconfigOf writes a rest config back as a one-context kubeconfig, files
// inlined, so that every flag that shaped it shapes Calico's client too.
func kubeconfigOf(rc *rest.Config) *clientcmdapi.Config {
	cluster := &clientcmdapi.Cluster{
		Server: rc.Host, CertificateAuthority: rc.CAFile, CertificateAuthorityData: rc.CAData,
		InsecureSkipTLSVerify: rc.Insecure, TLSServerName: rc.ServerName,
	}
	user := &clientcmdapi.AuthInfo{
		ClientCertificate: rc.CertFile, ClientCertificateData: rc.CertData, ClientKey: rc.KeyFile, ClientKeyData: rc.KeyData,
		Token: rc.BearerToken, TokenFile: rc.BearerTokenFile, Username: rc.Username, Password: rc.Password,
		Impersonate: rc.Impersonate.UserName, ImpersonateUID: rc.Impersonate.UID, ImpersonateGroups: rc.Impersonate.Groups,
		Exec: rc.ExecProvider, AuthProvider: rc.AuthProvider,
	}
	if len(rc.Impersonate.Extra) > 0 {
		user.ImpersonateUserExtra = rc.Impersonate.Extra
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["capo"] = cluster
	cfg.AuthInfos["capo"] = user
	cfg.Contexts["capo"] = &clientcmdapi.Context{Cluster: "capo", AuthInfo: "capo"}
	cfg.CurrentContext = "capo"
	return cfg
}

// calicoConfig reaches Calico's datastore as calicoctl does: etcdv3 from
// the environment when DATASTORE_TYPE says so, else the Kubernetes
// datastore of the cluster r resolved.
func calicoConfig(r resolved) (*apiconfig.CalicoAPIConfig, error) {
	if etcdMode() {
		return apiconfig.LoadClientConfigFromEnvironment()
	}
	cfg := apiconfig.NewCalicoAPIConfig()
	cfg.Spec.DatastoreType = apiconfig.Kubernetes
	cfg.Spec.KubeconfigInline = string(r.inline)
	cfg.Spec.K8sClientQPS = 50
	return cfg, nil
}

func etcdMode() bool { return os.Getenv("DATASTORE_TYPE") == string(apiconfig.EtcdV3) }

// connect reaches the Kubernetes API and Calico's datastore of one cluster,
// and makes sure capo can use Calico there (apigroup.Verify): an endpoint
// that does not serve Calico's types (the wrong cluster, a proxy answering
// 404 to everything, Calico not installed) is an error naming them, never
// an empty list.
func connect(k *kubeFlags) (*clients, error) {
	r, err := resolve(k)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(r.rest)
	if err != nil {
		return nil, err
	}
	calico, err := calicoFor(r, kube)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, store: calicostore.New(calico, reserve.DefaultLimits), calico: calicoClient{calico}, exec: execIn(r.rest, kube)}, nil
}

// checkCalicoAPI refuses to read Calico where a type capo uses is not
// served in the group Calico uses: libcalico-go would print an empty list.
func checkCalicoAPI(kube kubernetes.Interface, cfg *apiconfig.CalicoAPIConfig) (apigroup.Mode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return apigroup.Verify(ctx, kube.Discovery(), cfg.Spec.DatastoreType == apiconfig.EtcdV3, "")
}

// calicoFor is the Calico client of r's cluster, once its API group is
// checked: in native projectcalico.org/v3, capo's own client for every
// Calico CRD capo reads or writes (pkg/calico/client).
func calicoFor(r resolved, kube kubernetes.Interface) (clientv3.Interface, error) {
	cfg, err := calicoConfig(r)
	if err != nil {
		return nil, err
	}
	m, err := checkCalicoAPI(kube, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.rest.Host, err)
	}
	calico, err := clientv3.New(*cfg)
	if err != nil {
		return nil, fmt.Errorf("calico datastore: %w", err)
	}
	return client.For(calico, m, func() (*rest.Config, error) { return r.rest, nil })
}
