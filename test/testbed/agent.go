package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/selection"
)

// AgentSocket is where the env's capo-agent listens (the node's /var/run/capo).
func (e *Env) AgentSocket() string { return filepath.Join(e.Dir, "run", "agent.sock") }

// StateDir is the node's /var/lib/capo.
func (e *Env) StateDir() string { return filepath.Join(e.Dir, "state") }

// Journal is the node's journal, as capo-ipam writes it.
func (e *Env) Journal() journal.Dir { return journal.Dir{Root: e.StateDir()} }

// Agent is a running capo-agent process for the env's node.
type Agent struct {
	env         *Env
	proc        *proc
	MetricsAddr string
	// HealthAddr serves /healthz, /readyz and /livez. The bed's agent
	// serves them beside /metrics (--health-addr equal to
	// --metrics-addr), as tests read /readyz at MetricsAddr; the chart's
	// separate loopback port is run on the real node.
	HealthAddr     string
	logFile        string
	podNS, podName string        // the agent's pod object, reported Ready while it runs
	reflecting     chan struct{} // closed when reflectReadiness has stopped; nil if never started
	readinessLag   time.Duration // AgentOptions.ReadinessLag
	opts           AgentOptions  // as started
}

// AgentOptions are what a test may change about how the agent runs.
type AgentOptions struct {
	ManageCNI  *NodeCNI // manage this node CNI layout (--manage-cni)
	PodName    string   // the agent's own pod (POD_NAME), for its exit check
	Kubeconfig string   // run with these credentials instead of the bed's admin
	Namespace  string   // the agent's namespace (POD_NAMESPACE: its config); default the env's
	Binary     string   // another capo-agent, e.g. the previous release's (PreviousBinaries)
	// Reachable serves /metrics (and the probes) on the host's address,
	// and gives the agent pod that address and a "metrics" port, as the
	// chart's hostNetwork pod has: the API server's pod proxy reaches it
	// there, as capoctl status and bundle do. The test is skipped on a
	// host with no global unicast address (the proxy refuses loopback).
	Reachable bool
	// ReadinessLag is how long /readyz fails before the pod is reported
	// NotReady, as the kubelet's probe (period x failureThreshold: the
	// chart's 5 s x 3 is 15 s); 0 reports it at once.
	ReadinessLag time.Duration
	Env          []string // more environment, e.g. CALICO_API_GROUP=...
	// NotReady starts the process without waiting for /readyz: for tests
	// of a component that must refuse to be ready.
	NotReady bool
	// NoWait starts the process and returns at once: for tests of what it
	// does before it serves, or of a start that fails.
	NoWait bool
}

// StartAgent runs capo-agent for the env's node, configured as a DaemonSet
// pod would be (NODENAME, Calico's datastore variables), and waits until it
// is ready. Its config ConfigMap lives in the env's namespace.
func (e *Env) StartAgent() *Agent { return e.StartAgentWith(AgentOptions{}) }

// StartAgentWith is StartAgent with options.
func (e *Env) StartAgentWith(o AgentOptions) *Agent {
	e.T.Helper()
	port, err := freePort()
	if err != nil {
		e.T.Fatal(err)
	}
	a := &Agent{env: e, MetricsAddr: "127.0.0.1:" + strconv.Itoa(port), readinessLag: o.ReadinessLag, opts: o}
	var hostIP string
	if o.Reachable {
		if hostIP = HostIP(); hostIP == "" {
			e.T.Skip("no global unicast address on this host for the API server's pod proxy to reach")
		}
		a.MetricsAddr = net.JoinHostPort(hostIP, strconv.Itoa(port))
	}
	a.HealthAddr = a.MetricsAddr
	ns := e.Namespace
	if o.Namespace != "" {
		ns = o.Namespace
	}
	argv := []string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "NODENAME=" + e.Node, "POD_NAMESPACE=" + ns, "POD_NAME=" + o.PodName}
	argv = append(argv, e.Bed.CalicoEnv(e.DS)...)
	if o.Kubeconfig != "" {
		argv = append(argv, "KUBECONFIG="+o.Kubeconfig) // env(1): the last assignment wins
	}
	argv = append(argv, o.Env...)
	bin := e.Bed.Bin.CapoAgent
	if o.Binary != "" {
		bin = o.Binary
	}
	argv = append(argv, bin,
		"--socket="+e.AgentSocket(), "--state-dir="+e.StateDir(), "--metrics-addr="+a.MetricsAddr, "--health-addr="+a.HealthAddr,
		"--drain-interval=1s", "--addr-sweep-interval=1s", "--log-level=debug")
	if n := o.ManageCNI; n != nil {
		argv = append(argv, "--manage-cni", "--cni-conf-dir="+n.ConfDir, "--cni-bin-dir="+n.BinDir,
			"--capo-ipam-source="+e.Bed.Bin.CapoIPAM, "--cni-resync=5s", "--uninstall-grace=3s")
	}
	a.logFile = filepath.Join(e.Dir, "agent.log")
	a.proc, err = e.Bed.sp.start("capo-agent", a.logFile, argv...)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(a.Stop)
	started := false
	defer func() { // a start that fails leaves nothing running (for a caller that goes on)
		if !started {
			a.proc.stop()
		}
	}()
	if o.NoWait {
		started = true
		return a
	}
	if o.NotReady { // serving, but not waiting for ready
		if err := waitHTTP(a.proc, "http://"+a.HealthAddr+"/healthz", nil, "", 30*time.Second); err != nil {
			e.T.Fatalf("%s not serving (log %s): %v", a.proc.name, a.logFile, err)
		}
		started = true
		return a
	}
	if err := waitHTTP(a.proc, "http://"+a.HealthAddr+"/readyz", nil, "", 30*time.Second); err != nil {
		e.T.Fatalf("capo-agent not ready (log %s): %v", filepath.Join(e.Dir, "agent.log"), err)
	}
	a.podNS, a.podName = ns, o.PodName
	if a.podName == "" {
		a.podName = "capo-agent-" + e.ID
	}
	if o.Reachable {
		if err := e.createAgentPod(a.podNS, a.podName, hostIP, port); err != nil {
			e.T.Fatal(err)
		}
	}
	if err := e.setAgentPodReady(a.podNS, a.podName, true); err != nil {
		e.T.Fatal(err)
	}
	a.reflectReadiness()
	started = true
	return a
}

// Stop ends the agent as a DaemonSet rollout would (SIGTERM); its pod is
// reported NotReady, as the kubelet's readiness probe would.
func (a *Agent) Stop() {
	a.proc.stop()
	if a.reflecting != nil {
		<-a.reflecting // its last report must not follow this one
	}
	if a.podName != "" {
		if err := a.env.setAgentPodReady(a.podNS, a.podName, false); err != nil {
			a.env.T.Logf("testbed: %v", err)
		}
	}
}

// StartAgain starts a new agent as a was started (a stopped first), as the
// DaemonSet's next pod of the node.
func (a *Agent) StartAgain() *Agent {
	a.env.T.Helper()
	a.Stop()
	return a.env.StartAgentWith(a.opts)
}

// Kill ends the agent with SIGKILL, mid-whatever; its pod is reported
// NotReady, as the kubelet would once the probe fails.
func (a *Agent) Kill() {
	_ = syscall.Kill(-a.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-a.proc.done
	a.Stop()
}

// RSSBytes is the process's resident memory now; PeakRSSBytes its
// high-water mark since it started.
func (a *Agent) RSSBytes() int64     { return rss(a.proc.cmd.Process.Pid) }
func (a *Agent) PeakRSSBytes() int64 { return peakRSS(a.proc.cmd.Process.Pid) }

// AnonRSSBytes is the part of RSSBytes not backed by files: what the
// process allocated, as against the executable's mapped pages.
func (a *Agent) AnonRSSBytes() int64 { return statusBytes(a.proc.cmd.Process.Pid, "RssAnon:") }

// Exited reports whether the process has ended, by a signal or on its own.
func (a *Agent) Exited() bool { return a.proc.exited() }

// Binary is the executable's path.
func (a *Agent) Binary() string { return a.env.Bed.Bin.CapoAgent }

// Pid is the process's id.
func (a *Agent) Pid() int { return a.proc.cmd.Process.Pid }

// Log is what the process has logged so far.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.logFile)
	return string(b)
}

// Metric returns the sum of a metric's samples whose labels contain every
// given label="value" pair.
func (a *Agent) Metric(name string, labels ...string) float64 {
	resp, err := http.Get("http://" + a.MetricsAddr + "/metrics")
	if err != nil {
		a.env.T.Fatalf("scraping agent metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.env.T.Fatal(err)
	}
	return SumMetric(string(b), name, labels...)
}

// WaitMetric waits until Metric(name, labels...) equals want.
func (a *Agent) WaitMetric(want float64, name string, labels ...string) {
	a.env.T.Helper()
	a.waitMetric(func(v float64) bool { return v == want }, want, name, labels...)
}

// WaitMetricAtLeast waits until Metric(name, labels...) reaches want.
func (a *Agent) WaitMetricAtLeast(want float64, name string, labels ...string) {
	a.env.T.Helper()
	a.waitMetric(func(v float64) bool { return v >= want }, want, name, labels...)
}

func (a *Agent) waitMetric(ok func(float64) bool, want float64, name string, labels ...string) {
	a.env.T.Helper()
	Eventually(a.env.T, 20*time.Second, fmt.Sprintf("%s%v to reach %v", name, labels, want), func() bool {
		return ok(a.Metric(name, labels...))
	})
}

// SumMetric adds up the samples of name in Prometheus text exposition whose
// labels include every given label="value" pair.
func SumMetric(text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		metric, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		base, lbls, _ := strings.Cut(metric, "{")
		if base != name {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(lbls, l)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && match {
			sum += v
		}
	}
	return sum
}

// OptInNode sets the node annotation that opts it in.
func (e *Env) OptInNode() {
	e.patch(func(ctx context.Context, p []byte) error {
		_, err := e.Kube.CoreV1().Nodes().Patch(ctx, e.Node, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}, map[string]any{"metadata": map[string]any{"annotations": map[string]string{selection.NodeAnnotation: selection.Enabled}}})
}

// EnableNamespace sets Capo's namespace label on the env's namespace.
func (e *Env) EnableNamespace() {
	e.patch(func(ctx context.Context, p []byte) error {
		_, err := e.Kube.CoreV1().Namespaces().Patch(ctx, e.Namespace, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}, map[string]any{"metadata": map[string]any{"labels": map[string]string{selection.NamespaceLabel: selection.Enabled}}})
}

// Evict does to a pod what the kubelet's node-pressure eviction does to the
// API object: phase Failed, reason Evicted; the object stays, nothing is
// deleted. The caller then tears the sandbox down with Del.
func (e *Env) Evict(name string) {
	e.T.Helper()
	ctx := context.Background()
	p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "Evicted"
	p.Status.Message = "The node was low on resource: memory."
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		e.T.Fatalf("evicting %s: %v", name, err)
	}
}

// MarkRunning records sb's address in its pod's status, phase Running,
// as the kubelet does once the sandbox is up.
func (e *Env) MarkRunning(sb *Sandbox) {
	e.T.Helper()
	ctx := context.Background()
	p, err := e.Kube.CoreV1().Pods(e.Namespace).Get(ctx, sb.Pod.Name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = sb.IP(), []corev1.PodIP{{IP: sb.IP()}}
	if _, err := e.Kube.CoreV1().Pods(e.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		e.T.Fatalf("marking %s running: %v", sb.Pod.Name, err)
	}
}

// SetNodeReady sets the env's Node's Ready condition, as the node
// lifecycle controller does for a node that stopped reporting (Unknown)
// and the kubelet does when it reports again.
func (e *Env) SetNodeReady(status corev1.ConditionStatus) {
	e.T.Helper()
	ctx := context.Background()
	n, err := e.Kube.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "NodeStatusUnknown", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if _, err := e.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		e.T.Fatalf("setting node %s Ready %s: %v", e.Node, status, err)
	}
}

// SetConfig writes the agent's ConfigMap (a CapoConfig in config.yaml).
func (e *Env) SetConfig(yaml string) {
	e.T.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "capo-config", Namespace: e.Namespace}, Data: map[string]string{"config.yaml": yaml}}
	_, err := e.Kube.CoreV1().ConfigMaps(e.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = e.Kube.CoreV1().ConfigMaps(e.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		e.T.Fatalf("config: %v", err)
	}
}

func (e *Env) patch(do func(context.Context, []byte) error, body map[string]any) {
	e.T.Helper()
	p, _ := json.Marshal(body)
	if err := do(context.Background(), p); err != nil {
		e.T.Fatalf("patch %s: %v", p, err)
	}
}

// Readyz is what /readyz answers now: its status code and body.
func (a *Agent) Readyz() (int, string) {
	resp, err := http.Get("http://" + a.MetricsAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
