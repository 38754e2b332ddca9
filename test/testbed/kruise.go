package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// KruiseSets is OpenKruise's Advanced StatefulSet, in its storage version.
var KruiseSets = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsets"}

// kruiseCRDFile is the CRD's file in the directory CAPO_KRUISE_CRDS names,
// by default ../shared/kruise-crds beside the repository (data, not part
// of it: OpenKruise's, Apache-2.0).
const kruiseCRDFile = "apps.kruise.io_statefulsets.yaml"

func kruiseCRDPath() (string, error) {
	dirs := []string{os.Getenv("CAPO_KRUISE_CRDS")}
	if root, err := moduleRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, "..", "shared", "kruise-crds"), filepath.Join(root, "..", "..", "shared", "kruise-crds"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if p := filepath.Join(d, kruiseCRDFile); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("OpenKruise's %s not found: set CAPO_KRUISE_CRDS to the directory holding it (looked in %v)", kruiseCRDFile, dirs)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleRoot is the directory of the repository's go.mod, from the test's
// working directory (a package directory inside it).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	for err == nil {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
	return "", err
}

// ApplyKruiseCRD installs OpenKruise's Advanced StatefulSet CRD (no
// Kruise controller runs: tests make the pods). Safe to call more than once.
func (b *Bed) ApplyKruiseCRD(ctx context.Context) error {
	path, err := kruiseCRDPath()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
	}
	return waitEstablished(ctx, dyn, []string{obj.GetName()})
}

// Dynamic is a client for any kind on the bed's kube-apiserver.
func (e *Env) Dynamic() dynamic.Interface {
	e.T.Helper()
	dyn, err := dynamic.NewForConfig(e.Bed.REST)
	if err != nil {
		e.T.Fatal(err)
	}
	return dyn
}

// CreateKruiseSet creates an Advanced StatefulSet (apps.kruise.io/v1beta1)
// in the env's namespace; it makes no pods (KruiseOwnedBy does).
func (e *Env) CreateKruiseSet(name string, replicas int64) *unstructured.Unstructured {
	e.T.Helper()
	labels := map[string]any{"app": name}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": name, "namespace": e.Namespace},
		"spec": map[string]any{
			"replicas": replicas, "serviceName": name,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "main", "image": "registry.invalid/app:1"}}},
			},
		},
	}}
	out, err := e.Dynamic().Resource(KruiseSets).Namespace(e.Namespace).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("advanced statefulset %s: %v", name, err)
	}
	return out
}

// PatchKruiseSet merge-patches an Advanced StatefulSet.
func (e *Env) PatchKruiseSet(name string, patch map[string]any) {
	e.T.Helper()
	p, _ := json.Marshal(patch)
	if _, err := e.Dynamic().Resource(KruiseSets).Namespace(e.Namespace).Patch(context.Background(), name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("patching advanced statefulset %s: %v", name, err)
	}
}

// DeleteKruiseSet deletes an Advanced StatefulSet.
func (e *Env) DeleteKruiseSet(name string) {
	e.T.Helper()
	if err := e.Dynamic().Resource(KruiseSets).Namespace(e.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.T.Fatalf("deleting advanced statefulset %s: %v", name, err)
	}
}

// KruiseOwnedBy makes the pod one of set's as Kruise's controller makes
// them: named <set>-<ordinal> (the caller's), labelled
// statefulset.kubernetes.io/pod-name, with a controller ownerReference
// to apps.kruise.io/v1beta1 StatefulSet.
func KruiseOwnedBy(set *unstructured.Unstructured) PodOption {
	return func(p *corev1.Pod) {
		StatefulPod(set.GetName())(p)
		WithOwnerRef(metav1.OwnerReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: set.GetName(), UID: set.GetUID()})(p)
	}
}

// CreateCRD installs a namespaced custom resource of any content, for a
// listed owner kind: group (with a dot), kind, and plural, served in v1.
func (b *Bed) CreateCRD(ctx context.Context, group, kind, plural string) error {
	return b.CreateCRDScoped(ctx, group, kind, plural, "Namespaced")
}

// CreateCRDScoped is CreateCRD with its scope: Namespaced or Cluster.
func (b *Bed) CreateCRDScoped(ctx context.Context, group, kind, plural, scope string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": scope,
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
	}
	return waitEstablished(ctx, dyn, []string{obj.GetName()})
}
