package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// prometheusOperator pins the module whose CRDs the chart's ServiceMonitor
// and PrometheusRule must satisfy.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// ApplyPrometheusCRDs installs the Prometheus operator's ServiceMonitor and
// PrometheusRule CRDs, from the pinned module (fetched through the Go module
// proxy like everything else here). Safe to call more than once.
func (b *Bed) ApplyPrometheusCRDs(ctx context.Context) error {
	out, err := exec.Command("go", "mod", "download", "-json", prometheusOperator).Output()
	if err != nil {
		return fmt.Errorf("go mod download %s: %w", prometheusOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go mod download %s: no directory (%v)", prometheusOperator, err)
	}
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", f))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			return err
		}
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	return waitEstablished(ctx, dyn, names)
}

// Apply server-side-applies objs (dryRun: validated and admitted by the API
// server, stored nowhere) and returns the first error per object.
func (b *Bed) Apply(ctx context.Context, objs []*unstructured.Unstructured, dryRun bool) []error {
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return []error{err}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Kube.Discovery()))
	opts := metav1.ApplyOptions{FieldManager: "capo-testbed", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var errs []error
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err))
			continue
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, opts); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err))
		}
	}
	return errs
}

// ServiceAccountKubeconfig writes a kubeconfig carrying a token of the
// service account, so a process runs with exactly that account's RBAC.
func (b *Bed) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	exp := int64(3600)
	tok, err := b.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	path := filepath.Join(b.Dir, fmt.Sprintf("sa-%s-%s-%d.kubeconfig", namespace, name, time.Now().UnixNano()))
	ca, err := os.ReadFile(filepath.Join(b.Dir, "ca.crt"))
	if err != nil {
		return "", err
	}
	return path, writeKubeconfig(path, b.APIServerURL, ca, strings.TrimSpace(tok.Status.Token))
}
