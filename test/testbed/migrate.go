package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Calico's v1 to v3 datastore migration, in the steps its kube-controllers
// takes them for a DatastoreMigration (Calico master, kube-controllers'
// migration controller): lock crd.projectcalico.org/v1 (ClusterInformation
// datastoreReady false) and drain; make projectcalico.org/v3 served (the
// aggregated API server's APIService goes; here, Calico's own v3 CRDs are
// applied); lock v3 (its ClusterInformation created not ready); copy every
// resource, the v1 backend's projectcalico.org/metadata annotation becoming
// real labels and annotations and server-set fields cleared; unlock v3.
// Components then move with CALICO_API_GROUP=projectcalico.org/v3 (the
// calico plugin's calico_api_group in the CNI config, from install-cni).
// The v1 datastore stays locked.

var v1Migrated = []struct{ v1, v3, kind string }{
	{"ippools", "ippools", "IPPool"},
	{"ipreservations", "ipreservations", "IPReservation"},
	{"ipamconfigs", "ipamconfigurations", "IPAMConfiguration"},
	{"blockaffinities", "blockaffinities", "BlockAffinity"},
	{"ipamblocks", "ipamblocks", "IPAMBlock"},
	{"ipamhandles", "ipamhandles", "IPAMHandle"},
	{"felixconfigurations", "felixconfigurations", "FelixConfiguration"},
}

var (
	calicoV1 = schema.GroupVersion{Group: "crd.projectcalico.org", Version: "v1"}
	calicoV3 = schema.GroupVersion{Group: "projectcalico.org", Version: "v3"}
)

// LockCalico sets ClusterInformation default's datastoreReady in group
// ("crd.projectcalico.org/v1" or "projectcalico.org/v3"), creating it
// (from v1's) when absent, as the migration locks and unlocks each side.
func (b *Bed) LockCalico(ctx context.Context, group string, locked bool) error {
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	gv, _ := schema.ParseGroupVersion(group)
	ci := dyn.Resource(gv.WithResource("clusterinformations"))
	obj, err := ci.Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) && gv == calicoV3 {
		if obj, err = dyn.Resource(calicoV1.WithResource("clusterinformations")).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			obj = converted(obj, "ClusterInformation")
			_ = unstructured.SetNestedField(obj.Object, !locked, "spec", "datastoreReady")
			_, err = ci.Create(ctx, obj, metav1.CreateOptions{})
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("ClusterInformation in %s: %w", group, err)
	}
	_ = unstructured.SetNestedField(obj.Object, !locked, "spec", "datastoreReady")
	_, err = ci.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// ServeCalicoV3 applies Calico's own v3 CRDs beside the v1 ones, as the
// migration makes projectcalico.org/v3 served by CRDs.
func (b *Bed) ServeCalicoV3(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	return b.applyV3CRDs(ctx, root)
}

// CopyCalicoToV3 copies every Calico resource capo and calico-ipam use
// from v1 to v3 as the migration converts them, and says how many of each.
func (b *Bed) CopyCalicoToV3(ctx context.Context) (map[string]int, error) {
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, r := range v1Migrated {
		list, err := dyn.Resource(calicoV1.WithResource(r.v1)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return counts, fmt.Errorf("listing v1 %s: %w", r.v1, err)
		}
		for i := range list.Items {
			obj := converted(&list.Items[i], r.kind)
			if _, err := dyn.Resource(calicoV3.WithResource(r.v3)).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return counts, fmt.Errorf("creating v3 %s %s: %w", r.kind, obj.GetName(), err)
			}
			counts[r.kind]++
		}
	}
	return counts, nil
}

// converted is v1's object as the migration writes it in v3: the v1
// backend's metadata annotation read back into labels and annotations,
// everything the server set cleared.
func converted(v1 *unstructured.Unstructured, kind string) *unstructured.Unstructured {
	labels, annotations := v1.GetLabels(), v1.GetAnnotations()
	if raw, ok := annotations["projectcalico.org/metadata"]; ok {
		var meta metav1.ObjectMeta
		if json.Unmarshal([]byte(raw), &meta) == nil {
			labels = maps.Clone(meta.Labels)
			annotations = maps.Clone(meta.Annotations)
		}
	}
	delete(annotations, "projectcalico.org/metadata")
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(calicoV3.String())
	out.SetKind(kind)
	out.SetName(v1.GetName())
	out.SetNamespace(v1.GetNamespace())
	out.SetLabels(labels)
	out.SetAnnotations(annotations)
	if spec, ok := v1.Object["spec"].(map[string]any); ok {
		out.Object["spec"] = spec
		// v1's BlockAffinity keeps deleted as a string ("false"), v3's
		// as a boolean: the v1 backend's model types carry it across.
		if d, ok := spec["deleted"].(string); ok && kind == "BlockAffinity" {
			spec["deleted"] = d == "true"
		}
	}
	return out
}

// MigrationCRDFile is Calico's DatastoreMigration CRD, looked for beside
// the kube-controllers binary in EnvCalicoBin's folder.
const MigrationCRDFile = "migration.projectcalico.org_datastoremigrations.yaml"

// CalicoMigrationFromEnv finds Calico's own migration controller in
// EnvCalicoBin's folder: a kube-controllers built from Calico's master, its
// DatastoreMigration CRD (MigrationCRDFile) and its v1 CRDs
// (crd.projectcalico.org_*.yaml, libcalico-go/config/crd). No release the
// module proxy serves has them.
func CalicoMigrationFromEnv() (bin, crd string, ok bool) {
	dir := os.Getenv(EnvCalicoBin)
	if dir == "" {
		return "", "", false
	}
	bin, crd = filepath.Join(dir, "kube-controllers"), filepath.Join(dir, MigrationCRDFile)
	for _, f := range []string{bin, crd} {
		if _, err := os.Stat(f); err != nil {
			return "", "", false
		}
	}
	return bin, crd, true
}

var datastoreMigrations = schema.GroupVersionResource{Group: "migration.projectcalico.org", Version: "v1", Resource: "datastoremigrations"}

// CalicoMigration is Calico's kube-controllers running its datastore
// migration controller for the bed's Kubernetes datastore.
type CalicoMigration struct {
	proc *proc
	log  string
	dyn  dynamic.Interface
}

// StartCalicoMigration applies the DatastoreMigration CRD, runs
// kube-controllers (the migration controller; no IPAM garbage collection:
// ENABLED_CONTROLLERS names only the namespace controller) until the test
// ends, and asks it to migrate (a DatastoreMigration, as Calico's docs do).
func (b *Bed) StartCalicoMigration(t testing.TB, bin, crd string) *CalicoMigration {
	t.Helper()
	ctx := context.Background()
	if err := b.createCRDs(ctx, []string{crd}); err != nil && !apierrors.IsAlreadyExists(errors.Unwrap(err)) {
		t.Fatalf("testbed: the DatastoreMigration CRD: %v", err)
	}
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		t.Fatal(err)
	}
	if err := upgradeCRDs(ctx, dyn, filepath.Dir(bin)); err != nil {
		t.Fatalf("testbed: upgrading Calico's v1 CRDs to the migrating release's: %v", err)
	}
	dir := filepath.Join(b.Dir, b.Unique("calico-migration-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &CalicoMigration{log: filepath.Join(dir, "kube-controllers.log"), dyn: dyn}
	argv := append([]string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "ENABLED_CONTROLLERS=namespace", "LOG_LEVEL=info"}, b.CalicoEnv(Kubernetes)...)
	argv = append(argv, bin, "--status-file="+filepath.Join(dir, "status.json"), "--health-port=0")
	if m.proc, err = b.sp.start("kube-controllers", m.log, argv...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.proc.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Calico's migration controller log: %s (kept with CAPO_TESTBED_KEEP=1)", m.log)
		}
	})
	dm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "migration.projectcalico.org/v1", "kind": "DatastoreMigration",
		"metadata": map[string]any{"name": "v1-to-v3"},
		"spec":     map[string]any{"type": "APIServerToCRDs"},
	}}
	if _, err := dyn.Resource(datastoreMigrations).Create(ctx, dm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testbed: DatastoreMigration: %v", err)
	}
	return m
}

// Phase is the migration's phase and message.
func (m *CalicoMigration) Phase(ctx context.Context) (phase, message string, err error) {
	u, err := m.dyn.Resource(datastoreMigrations).Get(ctx, "v1-to-v3", metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	message, _, _ = unstructured.NestedString(u.Object, "status", "message")
	return phase, message, nil
}

// Log is where kube-controllers logs.
func (m *CalicoMigration) Log() string { return m.log }

// upgradeCRDs replaces the bed's crd.projectcalico.org CRDs by those in dir
// (crd.projectcalico.org_*.yaml), as upgrading Calico to the release that
// migrates does: its kube-controllers writes fields (KubeControllersConfiguration's
// status) that v3.31's CRDs do not have.
func upgradeCRDs(ctx context.Context, dyn dynamic.Interface, dir string) error {
	files, _ := filepath.Glob(filepath.Join(dir, "crd.projectcalico.org_*.yaml"))
	if len(files) == 0 {
		return fmt.Errorf("no crd.projectcalico.org_*.yaml in %s: put the migrating release's v1 CRDs (libcalico-go/config/crd) beside its kube-controllers", dir)
	}
	for _, f := range files {
		obj, err := readObject(f)
		if err != nil {
			return err
		}
		old, err := dyn.Resource(crdGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{})
		case err == nil:
			obj.SetResourceVersion(old.GetResourceVersion())
			_, err = dyn.Resource(crdGVR).Update(ctx, obj, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("CRD %s from %s: %w", obj.GetName(), f, err)
		}
	}
	return nil
}
