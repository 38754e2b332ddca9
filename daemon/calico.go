package daemon

import (
	"fmt"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
)

// calicoClient is a libcalico-go client from DATASTORE_TYPE, KUBECONFIG,
// ETCD_ENDPOINTS and the rest, with qps as the Kubernetes datastore's rate
// limit unless the environment set one. Here, not in pkg/kubeclient, so
// that only the daemons link libcalico-go's client.
func calicoClient(qps float32) (clientv3.Interface, apiconfig.DatastoreType, error) {
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
