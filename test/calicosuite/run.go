package calicosuite

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// kubeconfig is the one every netconf of Calico's suite names.
const kubeconfig = "/home/user/certs/kubeconfig"

// suiteTimeout bounds one run of the suite; a hung plugin call fails its
// spec after 5 s already (gexec's Wait in Calico's helpers).
const suiteTimeout = 20 * time.Minute

// host is the private host the runs share: the bed's etcd and API server,
// a kube-controller-manager, and the CNI bin dir the suite runs from.
type host struct {
	bed   *testbed.Bed
	built *Built
	dir   string
	bin   string
	logf  func(string, ...any)
}

// setUp lays out the bin dir and starts kube-controller-manager: Calico's
// suite deletes pods and nodes in the foreground (the garbage collector
// finishes it) and its host-local specs use the node's pod CIDR (node
// IPAM allocates it, from the range Calico's own harness gives).
func (h *host) setUp() error {
	h.bin = filepath.Join(h.dir, "bin")
	if err := os.MkdirAll(h.bin, 0o755); err != nil {
		return err
	}
	for name, src := range map[string]string{
		"calico": h.built.Bin.Calico, "calico-ipam": h.built.Bin.Calico, "host-local": h.built.HostLocal,
		"capo-ipam": h.built.Bin.CapoIPAM, "capo-ipam-kube": h.built.Bin.CapoIPAMKube,
	} {
		if err := os.Symlink(src, filepath.Join(h.bin, name)); err != nil {
			return err
		}
	}
	_, err := h.bed.Spawn("kube-controller-manager", filepath.Join(h.dir, "kube-controller-manager.log"), h.built.ControllerManager,
		"--kubeconfig="+h.bed.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=garbage-collector-controller,node-ipam-controller,namespace-controller,serviceaccount-controller",
		"--allocate-node-cidrs=true", "--cluster-cidr=192.168.0.0/16",
		"--root-ca-file="+h.bed.CAFile(), "--service-account-private-key-file="+h.bed.ServiceAccountKeyFile(),
		"--use-service-account-credentials=false", "--v=1")
	return err
}

// run runs the suite once on ds, with ipam in the calico plugin's ipam
// slot, on fresh node state and with no pod or node left by an earlier
// run; focus, if any, names the only specs to run.
func (h *host) run(ds, ipam string, focus []string) Run {
	start := time.Now()
	r := Run{Datastore: ds, IPAM: ipam}
	name := ds + "-" + ipam
	if len(focus) > 0 {
		name += "-retry"
	}
	err := h.clearCluster()
	if err == nil {
		err = freshDirs()
	}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer dropDirs()
	err = h.bed.WriteKubeconfig(kubeconfig)
	if err == nil && ipam == CapoIPAM {
		var agent *testbed.Process
		if agent, err = h.startAgent(testbed.Datastore(ds), name); err == nil {
			defer agent.Stop()
		}
	}
	if err == nil {
		r.Specs, err = h.suite(ds, ipam, name, focus)
	}
	if err != nil {
		r.Err = err.Error()
	}
	r.Took = time.Since(start)
	h.logf("calicosuite: %s: %d passed, %d failed, %d skipped in %s %s", name, r.Count(Passed), r.Count(Failed), r.Count(Skipped), r.Took.Round(time.Second), r.Err)
	return r
}

// clearCluster deletes every pod and node an earlier run left: the suite
// cleans the Calico datastore before each spec, not the API server.
func (h *host) clearCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	nss, err := h.bed.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		err := h.bed.Kube.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("deleting the pods of %s: %w", ns.Name, err)
		}
	}
	return h.bed.Kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
}

// suite runs Calico's suite binary as Calico's Makefile runs it (ut-datastore),
// one spec at a time, and reads its report.
func (h *host) suite(ds, ipam, name string, focus []string) ([]Spec, error) {
	work := filepath.Join(h.dir, "work-"+name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	// RunIPAMPlugin gives the IPAM plugin CNI_PATH=d, relative: capo-ipam
	// finds its delegate there.
	if err := os.Symlink(h.bin, filepath.Join(work, "d")); err != nil {
		return nil, err
	}
	report := filepath.Join(h.dir, name+".xml")
	logPath := filepath.Join(h.dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	args := []string{"-test.timeout=" + suiteTimeout.String(), "-ginkgo.noColor", "-ginkgo.succinct", "-ginkgo.reportFile=" + report}
	if len(focus) > 0 {
		quoted := make([]string, len(focus))
		for i, f := range focus {
			quoted[i] = regexp.QuoteMeta(strings.TrimSuffix(f, duplicateSuffix(f)))
		}
		args = append(args, "-ginkgo.focus="+strings.Join(quoted, "|"))
	}
	cmd := exec.Command(h.built.Suite, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = work, out, out
	cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + work,
		"BIN=" + h.bin, "PLUGIN=calico", "CNI_SPEC_VERSION=0.3.1",
		"ETCD_IP=127.0.0.1", "ETCD_ENDPOINTS=http://127.0.0.1:2379",
		"DATASTORE_TYPE=" + ds, "KUBECONFIG=" + kubeconfig,
		"CAPO_CALICOSUITE_IPAM=" + ipam, "CAPO_CALICOSUITE_IPAM_LOG=" + filepath.Join(h.dir, name+"-capo-ipam.log"),
	}
	runErr := cmd.Run()
	specs, err := ReadJUnit(report)
	if err != nil {
		return nil, fmt.Errorf("%w (the suite: %v; its output: %s)", err, runErr, logPath)
	}
	return specs, nil
}

// startAgent runs capo-agent for this host's node as its DaemonSet pod
// would, on the default socket and state dir (private to the run).
func (h *host) startAgent(ds testbed.Datastore, name string) (*testbed.Process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append([]string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "NODENAME=" + Hostname, "POD_NAMESPACE=kube-system"}, h.bed.CalicoEnv(ds)...)
	argv = append(argv, h.built.Bin.CapoAgent, "--metrics-addr="+addr, "--health-addr="+addr, "--log-level=debug")
	p, err := h.bed.Spawn("capo-agent", filepath.Join(h.dir, name+"-capo-agent.log"), argv...)
	if err != nil {
		return nil, err
	}
	if err := h.bed.WaitHTTP(p, "http://"+addr+"/readyz", false, time.Minute); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, port, _ := strings.Cut(l.Addr().String(), ":")
	return strconv.Atoi(port)
}
