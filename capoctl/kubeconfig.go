package capoctl

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/capo-net/capo/pkg/calicoapi"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// kubeFlags are kubectl's connection flags.
type kubeFlags struct{ kubeconfig, context, as string }

// resolved is one cluster, as kubectl would reach it: the Kubernetes client
// and Calico's are both built from it, so they cannot disagree (before,
// Calico's client read only the first file of KUBECONFIG=a:b).
type resolved struct {
	rest *rest.Config
	// inline is the chosen context alone, files inlined, for libcalico-go;
	// nil in a pod with no kubeconfig, where both use the in-cluster account.
	inline []byte
}

// resolve loads the kubeconfig as kubectl does: --kubeconfig, else
// KUBECONFIG's files merged, else ~/.kube/config; --context, else the
// current context; --as on top.
func (k kubeFlags) resolve() (resolved, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.AuthInfo.Impersonate = k.as
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	if len(raw.Contexts) == 0 {
		return resolved{rest: rc}, nil // in-cluster
	}
	if k.context != "" {
		raw.CurrentContext = k.context
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return resolved{}, fmt.Errorf("kubeconfig: %w", err)
	}
	if k.as != "" {
		for _, a := range raw.AuthInfos {
			a.Impersonate = k.as
		}
	}
	inline, err := clientcmd.Write(raw)
	if err != nil {
		return resolved{}, err
	}
	return resolved{rest: rc, inline: inline}, nil
}

// calicoConfig reaches Calico's datastore as calicoctl does: etcdv3 from
// the environment when DATASTORE_TYPE says so, else the Kubernetes
// datastore of the cluster r resolved.
func calicoConfig(r resolved) (*apiconfig.CalicoAPIConfig, error) {
	if os.Getenv("DATASTORE_TYPE") == string(apiconfig.EtcdV3) {
		return apiconfig.LoadClientConfigFromEnvironment()
	}
	cfg := apiconfig.NewCalicoAPIConfig()
	cfg.Spec.DatastoreType = apiconfig.Kubernetes
	cfg.Spec.KubeconfigInline = string(r.inline)
	cfg.Spec.K8sClientQPS = 50
	return cfg, nil
}

// connect reaches the Kubernetes API and Calico's datastore of one cluster.
func connect(k kubeFlags) (kubernetes.Interface, reserve.Store, error) {
	r, err := k.resolve()
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(r.rest)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := calicoConfig(r)
	if err != nil {
		return nil, nil, err
	}
	if err := checkCalicoAPI(kube, cfg); err != nil {
		return nil, nil, err
	}
	calico, err := clientv3.New(*cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("calico datastore: %w", err)
	}
	return kube, calicostore.New(calico, reserve.DefaultLimits), nil
}

// checkCalicoAPI refuses to read Calico where a type capo uses is not
// served in the group Calico uses: libcalico-go would print an empty list.
func checkCalicoAPI(kube kubernetes.Interface, cfg *apiconfig.CalicoAPIConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := calicoapi.Verify(ctx, kube.Discovery(), cfg.Spec.DatastoreType == apiconfig.EtcdV3, "", calicoapi.All)
	return err
}
