// Package kubeclient builds the daemons' Kubernetes and Calico clients the
// way Calico's own components do: KUBECONFIG or in-cluster credentials, and
// libcalico-go's datastore settings from the environment.
package kubeclient

import (
	"fmt"
	"os"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/pkg/version"
)

// Kubernetes is a clientset for component, from KUBECONFIG if set.
func Kubernetes(component string, qps float32) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kc)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	cfg.UserAgent = component + "/" + version.Version
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	return kubernetes.NewForConfig(cfg)
}

// Calico is a libcalico-go client from DATASTORE_TYPE, KUBECONFIG,
// ETCD_ENDPOINTS and the rest, with qps as the Kubernetes datastore's rate
// limit unless the environment set one.
func Calico(qps float32) (clientv3.Interface, apiconfig.DatastoreType, error) {
	cfg, err := apiconfig.LoadClientConfigFromEnvironment()
	if err != nil {
		return nil, "", fmt.Errorf("calico datastore settings (DATASTORE_TYPE, KUBECONFIG, ETCD_ENDPOINTS, ...): %w", err)
	}
	if cfg.Spec.K8sClientQPS == 0 {
		cfg.Spec.K8sClientQPS = qps
	}
	c, err := clientv3.New(*cfg)
	if err != nil {
		return nil, "", fmt.Errorf("calico client: %w", err)
	}
	return c, cfg.Spec.DatastoreType, nil
}

// Env is the environment variable k, or def.
func Env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
