package testbed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeControllers is Calico's kube-controllers, run as calico-kube-controllers
// runs in a cluster but with only its node controller, whose IPAM garbage
// collector frees allocations it judges leaked: the pod is gone, is
// Failed/Evicted, or holds another address, for longer than the leak grace
// period (15 minutes by default; short here).
type KubeControllers struct {
	proc *proc
	log  string
}

// StartKubeControllers runs kube-controllers against ds with the given leak
// grace period until the test ends. It judges every allocation in the
// datastore, so a test that runs it owns the outcome for its own envs only.
func (b *Bed) StartKubeControllers(t testing.TB, ds Datastore, leakGrace time.Duration) *KubeControllers {
	t.Helper()
	bin, err := b.toolBinary("", KubeControllersPkg, "kube-controllers")
	if err != nil {
		t.Fatalf("testbed: building kube-controllers: %v", err)
	}
	if err := b.setLeakGrace(ds, leakGrace); err != nil {
		t.Fatalf("testbed: KubeControllersConfiguration: %v", err)
	}
	dir := filepath.Join(b.Dir, b.Unique("kube-controllers-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "ENABLED_CONTROLLERS=node", "LOG_LEVEL=info"}, b.CalicoEnv(ds)...)
	argv = append(argv, bin, "-status-file="+filepath.Join(dir, "status.json"))
	k := &KubeControllers{log: filepath.Join(dir, "kube-controllers.log")}
	if k.proc, err = b.sp.start("kube-controllers", k.log, argv...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.proc.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controllers log: %s (kept with CAPO_TESTBED_KEEP=1)", k.log)
		}
	})
	return k
}

// Stop ends it.
func (k *KubeControllers) Stop() { k.proc.stop() }

// noMetrics turns kube-controllers' metrics listener off. Calico's default
// configuration serves it on the host's port 9094, and a second
// kube-controllers on the machine (another bed's, or the other
// datastore's) then exits at once, failing to listen, and frees nothing.
var noMetrics = 0

// setLeakGrace writes the default KubeControllersConfiguration, as an
// operator would to change the grace period.
func (b *Bed) setLeakGrace(ds Datastore, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kcc := b.calico[ds].KubeControllersConfiguration()
	cur, err := kcc.Get(ctx, "default", options.GetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		cur = apiv3.NewKubeControllersConfiguration()
		cur.Name = "default"
		cur.Spec.Controllers.Node = &apiv3.NodeControllerConfig{LeakGracePeriod: &metav1.Duration{Duration: grace}}
		cur.Spec.PrometheusMetricsPort = &noMetrics
		_, err = kcc.Create(ctx, cur, options.SetOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cur.Spec.Controllers.Node == nil {
		cur.Spec.Controllers.Node = &apiv3.NodeControllerConfig{}
	}
	cur.Spec.Controllers.Node.LeakGracePeriod = &metav1.Duration{Duration: grace}
	cur.Spec.PrometheusMetricsPort = &noMetrics
	_, err = kcc.Update(ctx, cur, options.SetOptions{})
	return err
}
