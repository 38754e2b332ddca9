// Package kubeclient builds the daemons' Kubernetes clients the way
// Calico's own components do: KUBECONFIG or in-cluster credentials. It links
// no Calico client (that is daemon.calicoClient's), so capo-install, which
// needs only a clientset, does not carry libcalico-go.
package kubeclient

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/pkg/version"
)

// Kubernetes is a clientset for component, from KUBECONFIG if set. It
// speaks protobuf: built-in objects decode with a fraction of JSON's
// garbage, which is most of an informer's memory while it lists.
func Kubernetes(component string, qps float32) (kubernetes.Interface, error) {
	cfg, err := restConfig(component, qps)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(cfg)
}

// Metadata is a client for objects' metadata only (names, labels,
// annotations), on the same credentials and connection as Kubernetes.
func Metadata(component string, qps float32) (metadata.Interface, error) {
	cfg, err := restConfig(component, qps)
	if err != nil {
		return nil, err
	}
	return metadata.NewForConfig(cfg)
}

// Dynamic is a client for objects of any kind, as unstructured JSON, on
// the same credentials as Kubernetes.
func Dynamic(component string, qps float32) (dynamic.Interface, error) {
	cfg, err := restConfig(component, qps)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// REST is the API server's client configuration, as the other clients
// here have it.
func REST(component string, qps float32) (*rest.Config, error) { return restConfig(component, qps) }

func restConfig(component string, qps float32) (*rest.Config, error) {
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
	return cfg, nil
}

// Env is the environment variable k, or def.
func Env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
