package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	calicoset "github.com/projectcalico/api/pkg/client/clientset_generated/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NativeV3 is Options.CalicoCRDs for a bed whose Kubernetes datastore
// holds only Calico's native projectcalico.org/v3 CRDs, as a Calico
// install after 3.32 has: no crd.projectcalico.org/v1 CRDs at all.
const NativeV3 = "projectcalico.org/v3"

// EnvV3CRDs names the folder of Calico's own v3 CRDs; the default is
// ../shared/calico-v3-crds beside the checkout, as CI lays it out.
const EnvV3CRDs = "CAPO_CALICO_V3_CRDS"

// V3CRDsDir is where the bed reads Calico's v3 CRDs from.
func V3CRDsDir(root string) (string, error) {
	dir := os.Getenv(EnvV3CRDs)
	if dir == "" {
		dir = filepath.Join(root, "..", "shared", "calico-v3-crds")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "projectcalico.org_*.yaml"))
	if len(files) == 0 {
		return "", fmt.Errorf("no Calico v3 CRDs (projectcalico.org_*.yaml) in %s: the native-v3 bed needs Calico's own CRDs there; set %s to their folder", dir, EnvV3CRDs)
	}
	return dir, nil
}

// applyV3CRDs creates Calico's v3 CRDs from V3CRDsDir and waits until the
// API server serves them.
func (b *Bed) applyV3CRDs(ctx context.Context, root string) error {
	dir, err := V3CRDsDir(root)
	if err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "projectcalico.org_*.yaml"))
	return b.createCRDs(ctx, files)
}

// CalicoV3 is a client of the projectcalico.org/v3 API: on a native-v3
// bed, the Kubernetes datastore's Calico resources.
func (b *Bed) CalicoV3() (calicoset.Interface, error) { return calicoset.NewForConfig(b.REST) }

// initNativeV3 marks the datastore ready as calico-node does, in v3.
func (b *Bed) initNativeV3(ctx context.Context) error {
	c, err := b.CalicoV3()
	if err != nil {
		return err
	}
	ci := &apiv3.ClusterInformation{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	ready := true
	ci.Spec.DatastoreReady = &ready
	ci.Spec.ClusterType = "k8s"
	ci.Spec.CalicoVersion = "capo-testbed"
	ci.Spec.ClusterGUID = "capo-testbed"
	if _, err := c.ProjectcalicoV3().ClusterInformations().Create(ctx, ci, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("v3 ClusterInformation default: %w", err)
	}
	return nil
}

// nativeV3 says the env's Calico resources live in projectcalico.org/v3:
// a native-v3 bed's Kubernetes datastore. Env.Calico is nil there.
func (e *Env) nativeV3() bool { return e.DS == Kubernetes && e.Bed.opts.CalicoCRDs == NativeV3 }

func (e *Env) createV3Pool(ctx context.Context, pool *apiv3.IPPool) error {
	c, err := e.Bed.CalicoV3()
	if err != nil {
		return err
	}
	if _, err := c.ProjectcalicoV3().IPPools().Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("v3 ippool %s: %w", e.Pool, err)
	}
	return nil
}

func (e *Env) deleteV3Pool(ctx context.Context) {
	c, err := e.Bed.CalicoV3()
	if err == nil {
		err = c.ProjectcalicoV3().IPPools().Delete(ctx, e.PoolName(), metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		e.T.Logf("testbed: deleting the v3 pool of %s: %v", e.ID, err)
	}
}

// CalicoFromEnv is EnvOptions.CalicoRelease for the calico and
// calico-ipam found in the folder EnvCalicoBin names: a Calico that can
// run in native v3 mode, which no release the module proxy serves is.
const CalicoFromEnv = "from-" + EnvCalicoBin

// EnvCalicoBin names a folder holding a v3-capable `calico` binary (it
// acts as calico-ipam by its file name, as Calico's binaries do from 3.33).
const EnvCalicoBin = "CAPO_CALICO_BIN"

// SkipWithoutCalicoFromEnv skips t, saying why, when EnvCalicoBin is unset.
func SkipWithoutCalicoFromEnv(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvCalicoBin) == "" {
		t.Skipf("%s is not set: this test needs a calico binary that runs in native projectcalico.org/v3 mode (Calico 3.33 or later, or master built from a snapshot); no release the module proxy serves can", EnvCalicoBin)
	}
}

// calicoFromEnvDir is the bed's CNI bin dir for CalicoFromEnv.
func (b *Bed) calicoFromEnvDir() (string, error) {
	src := filepath.Join(os.Getenv(EnvCalicoBin), "calico")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("%s: no calico binary: %w", EnvCalicoBin, err)
	}
	dir := filepath.Join(b.Dir, "cni-bin-"+CalicoFromEnv)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, from := range map[string]string{"calico": src, "calico-ipam": src, "capo-ipam": b.Bin.CapoIPAM, "capo-ipam-kube": b.Bin.CapoIPAMKube} {
		if err := copyFile(from, filepath.Join(dir, name), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}
