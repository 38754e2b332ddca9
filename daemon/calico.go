package daemon

import (
	"fmt"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/v3client"
	"github.com/capo-net/capo/pkg/kubeclient"
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

// inGroup is c with every Calico CRD capo uses read and written in m's
// group: in native projectcalico.org/v3 through capo's own client
// (pkg/calico/v3client), since libcalico-go v3.31 knows only crd.projectcalico.org/v1.
func inGroup(m apigroup.Mode, component string, qps float32, c clientv3.Interface) (clientv3.Interface, error) {
	if m.Source == apigroup.SourceEtcd || m.Group != apigroup.GroupV3 {
		return c, nil
	}
	cfg, err := kubeclient.REST(component, qps)
	if err != nil {
		return nil, err
	}
	return v3client.NewClient(c, cfg)
}
