package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// calicoModuleDir is where the pinned calico module sits in the module cache.
func calicoModuleDir(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/projectcalico/calico")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the calico module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// applyCalicoCRDs creates the CRDs shipped in the pinned calico module and
// waits until the API server serves them.
func (b *Bed) applyCalicoCRDs(ctx context.Context, root string) error {
	mod, err := calicoModuleDir(root)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(mod, "libcalico-go", "config", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs under %s: %v", mod, err)
	}
	return b.createCRDs(ctx, files)
}

// createCRDs creates the CustomResourceDefinitions of files (one a file)
// and waits until the API server serves them.
func (b *Bed) createCRDs(ctx context.Context, files []string) error {
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		obj, err := readObject(f)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %s from %s: %w", obj.GetName(), f, err)
		}
		names = append(names, obj.GetName())
	}
	return waitEstablished(ctx, dyn, names)
}

// readObject reads the one object of a YAML file.
func readObject(f string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return obj, nil
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, names []string) error {
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range names {
		for {
			obj, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err == nil && established(obj) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after 60s (last error %v)", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// CalicoAPIConfig is how Calico's own components reach the datastore.
func (b *Bed) CalicoAPIConfig(ds Datastore) *apiconfig.CalicoAPIConfig {
	cfg := apiconfig.NewCalicoAPIConfig()
	switch ds {
	case Kubernetes:
		cfg.Spec.DatastoreType = apiconfig.Kubernetes
		cfg.Spec.Kubeconfig = b.Kubeconfig
		cfg.Spec.K8sClientQPS = 200 // the bed's own setup traffic, not a component under test
	case Etcd:
		cfg.Spec.DatastoreType = apiconfig.EtcdV3
		cfg.Spec.EtcdEndpoints = b.EtcdURL
	}
	return cfg
}

// CalicoEnv is the same settings as environment variables, the way
// calico-node and capo-agent read them.
func (b *Bed) CalicoEnv(ds Datastore) []string {
	if ds == Etcd {
		return []string{"DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS=" + b.EtcdURL, "KUBECONFIG=" + b.Kubeconfig}
	}
	return []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + b.Kubeconfig}
}

// initCalico marks the datastore ready (ClusterInformation default), as
// calico-node does on first start; the CNI plugin refuses to work before.
func (b *Bed) initCalico(ctx context.Context, ds Datastore) error {
	c, err := clientv3.New(*b.CalicoAPIConfig(ds))
	if err != nil {
		return fmt.Errorf("calico client (%s): %w", ds, err)
	}
	if err := c.EnsureInitialized(ctx, "v3.31.0", "capo-testbed"); err != nil {
		return fmt.Errorf("initialising calico datastore %s: %w", ds, err)
	}
	b.calico[ds] = c
	return nil
}
