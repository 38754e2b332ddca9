package nodebed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/deploy"
)

// Where the chart goes, as the README's install command puts it.
const (
	Namespace = "capo-system"
	Release   = "capo"
	// AgentSelector selects the agent's DaemonSet pods.
	AgentSelector = "app.kubernetes.io/name=capo,app.kubernetes.io/component=agent"
)

// ChartValues are an operator's only overrides for a locally imported
// image: repository, tag and pull policy. (This cluster has no Prometheus
// operator; the chart renders its ServiceMonitor and PrometheusRule only
// where the API serves them.)
func ChartValues(tag string) map[string]any {
	return map[string]any{
		"image": map[string]any{"repository": CapoRepository, "tag": tag, "pullPolicy": "Never"},
	}
}

// Render renders the chart with ChartValues(CapoTags[0]) under extra.
func Render(extra map[string]any) ([]byte, error) {
	return deploy.Render(Release, Namespace, merge(ChartValues(CapoTags[0]), extra))
}

// InstallChart installs the chart as `helm install --create-namespace`
// would: Helm's install order, every object applied, then waits until the
// agent and the controllers run.
func (b *Bed) InstallChart(ctx context.Context, extra map[string]any) error {
	out, err := Render(extra)
	if err != nil {
		return err
	}
	objs, err := sorted(out, releaseutil.InstallOrder)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := b.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if errs := b.Apply(ctx, objs, false); len(errs) > 0 {
		return errors.Join(errs...)
	}
	return b.WaitCapoReady(ctx, CapoTags[0])
}

// UpgradeChart applies the chart with the image's tag changed, as `helm
// upgrade --set image.tag=...` would, and waits until the agent and the
// controllers run it.
func (b *Bed) UpgradeChart(ctx context.Context, tag string) error {
	if err := b.ApplyChart(ctx, tag); err != nil {
		return err
	}
	return b.WaitCapoReady(ctx, tag)
}

// ApplyChart applies the chart with the image's tag and does not wait.
func (b *Bed) ApplyChart(ctx context.Context, tag string) error {
	out, err := deploy.Render(Release, Namespace, ChartValues(tag))
	if err != nil {
		return err
	}
	objs, err := sorted(out, releaseutil.InstallOrder)
	if err != nil {
		return err
	}
	return errors.Join(b.Apply(ctx, objs, false)...)
}

// UninstallChart deletes the chart's objects in Helm's uninstall order, as
// `helm uninstall` does, and waits until capo's pods are gone.
func (b *Bed) UninstallChart(ctx context.Context) error {
	out, err := Render(nil)
	if err != nil {
		return err
	}
	objs, err := sorted(out, releaseutil.UninstallOrder)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := b.deleteObject(ctx, o); err != nil {
			return err
		}
	}
	return b.WaitCapoGone(ctx)
}

// sorted orders rendered manifests by kind as Helm does.
func sorted(rendered []byte, order releaseutil.KindSortOrder) ([]*unstructured.Unstructured, error) {
	_, manifests, err := releaseutil.SortManifests(releaseutil.SplitManifests(string(rendered)), nil, order)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, m := range manifests {
		o, err := deploy.Objects([]byte(m.Content))
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// WriteManifest writes the rendered chart for kubectl apply/delete -f.
func (b *Bed) WriteManifest(extra map[string]any) (string, error) {
	out, err := Render(extra)
	if err != nil {
		return "", err
	}
	path := filepath.Join(b.Dir, fmt.Sprintf("capo-%d.yaml", time.Now().UnixNano()))
	return path, os.WriteFile(path, out, 0o644)
}

// Kubectl runs the kubectl built from the pins, as the cluster admin.
func (b *Bed) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.Node.Kubectl, append([]string{"--kubeconfig=" + b.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func merge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}
