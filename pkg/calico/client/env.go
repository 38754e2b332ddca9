package client

import (
	"fmt"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
)

// FromEnvironment is libcalico-go's client from DATASTORE_TYPE, KUBECONFIG,
// ETCD_ENDPOINTS and the rest, as calico-node reads them, with qps as the
// Kubernetes datastore's rate limit unless the environment set one. Only
// the daemons call it, so only they link libcalico-go's client.
func FromEnvironment(qps float32) (clientv3.Interface, apiconfig.DatastoreType, error) {
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
