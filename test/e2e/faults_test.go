package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// The fault matrix: a storm of selected and unselected DELs (the kubelet
// evicting pods) while one fault at a time hits capo or what it stands on.
// After each, once the fault is gone, the promise must hold: every selected
// address is reserved or still allocated to its pod and never to another,
// every DEL succeeded (or, where the state dir is full and nobody can take
// the DEL, failed so that the runtime retries), and the journal is empty.
func TestFaultMatrix(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		var rows []faultResult
		for _, f := range faults() {
			t.Run(f.name, func(t *testing.T) { rows = append(rows, runFault(t, ds, f)) })
		}
		var b strings.Builder
		fmt.Fprintf(&b, "\n%-44s %5s %9s %10s %17s %16s\n", "fault ("+string(ds)+")", "DELs", "reserved", "journaled", "freed-unreserved", "other-namespace")
		for _, r := range rows {
			fmt.Fprintf(&b, "%-44s %5d %9d %10d %17d %16d\n", r.fault, r.dels, r.reserved, r.journaled, r.freedUnreserved, r.otherNamespace)
		}
		t.Log(b.String())
	})
}

// fault is one thing going wrong mid-storm, and its end.
type fault struct {
	name      string
	setup     func(t *testing.T, fx *faultEnv) // before the pods start
	inject    func(t *testing.T, fx *faultEnv) // a third of the way into the storm
	heal      func(t *testing.T, fx *faultEnv) // the fault is gone
	mayRetry  bool                             // a DEL may fail for the runtime to retry
	rewriting bool                             // the runtime reads the conflist on disk for each DEL
}

type faultEnv struct {
	env        *testbed.Env
	node       *testbed.NodeCNI
	controller *testbed.Controller
	standby    *testbed.Controller
	gc         *testbed.KubeControllers
	conflist   []byte
	selected   []*testbed.Sandbox // the storm's members, for a fault that needs them
}

type faultResult struct {
	fault                                      string
	dels, reserved, journaled, freedUnreserved int
	otherNamespace                             int // addresses held for another namespace's pod
}

func faults() []fault {
	restartAgent := func(t *testing.T, fx *faultEnv) { fx.env.Agent = fx.env.StartAgent() }
	return []fault{
		{name: "agent SIGKILL", inject: func(t *testing.T, fx *faultEnv) { fx.env.Agent.Kill() }, heal: restartAgent},
		// On the Kubernetes datastore the calico plugin's own DEL fails while
		// the API server is away (it reads the workload endpoint first), as
		// it does without capo: the runtime retries those.
		{name: "kube-apiserver stopped 20s", mayRetry: true, inject: func(t *testing.T, fx *faultEnv) {
			bed.StopAPIServer()
			time.Sleep(20 * time.Second)
			if err := bed.StartAPIServer(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "controller leader SIGKILL", setup: func(t *testing.T, fx *faultEnv) {
			fx.standby = fx.env.StartController("standby")
		}, inject: func(t *testing.T, fx *faultEnv) {
			leader, standby := fx.controller, fx.standby
			if standby.Leading() {
				leader, standby = standby, leader
			}
			leader.Kill()
			eventually(t, 30*time.Second, "the standby leads", standby.Leading)
		}},
		{name: "calico-node rewrites the conflist", rewriting: true, setup: func(t *testing.T, fx *faultEnv) {
			fx.node = fx.env.SetupNodeCNI()
			fx.env.Agent = fx.env.StartAgentWith(testbed.AgentOptions{ManageCNI: fx.node})
			eventually(t, 10*time.Second, "capo in the node's chain", func() bool {
				b, _ := os.ReadFile(fx.node.ConfFile)
				return strings.Contains(string(b), "capo-ipam")
			})
		}, inject: func(t *testing.T, fx *faultEnv) { fx.node.CalicoNodeRewrites(fx.env) }},
		{name: "state dir full while the agent is away", mayRetry: true, setup: func(t *testing.T, fx *faultEnv) {
			mountTmpfs(t, fx.env.StateDir(), "1m")
			fx.env.Agent = fx.env.StartAgent()
		}, inject: func(t *testing.T, fx *faultEnv) {
			fx.env.Agent.Kill()
			fill(t, fx.env.StateDir())
		}, heal: func(t *testing.T, fx *faultEnv) {
			_ = os.Remove(filepath.Join(fx.env.StateDir(), "filler"))
			restartAgent(t, fx)
		}},
		{name: "Calico's kube-controllers GC running", inject: func(t *testing.T, fx *faultEnv) {
			fx.gc = bed.StartKubeControllers(t, fx.env.DS, 3*time.Second)
		}, heal: func(t *testing.T, fx *faultEnv) {
			time.Sleep(8 * time.Second) // a few GC passes past the grace period
			fx.gc.Stop()
		}},
		forgedReserve(),
		forgedReclaim(),
	}
}

const (
	stormSelected   = 12
	stormUnselected = 6
)

func runFault(t *testing.T, ds testbed.Datastore, f fault) faultResult {
	ctx := context.Background()
	managed := f.setup != nil
	fx := &faultEnv{env: bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 27, OptIn: true, NoAgent: managed})}
	env := fx.env
	env.SetConfig(configWith("ipReserveTime: 1h\nreserveTimeout: 2s\n"))
	fx.controller = env.StartController("leader")
	if f.setup != nil {
		f.setup(t, fx)
	}
	if env.Agent == nil {
		env.Agent = env.StartAgent()
	}
	fx.conflist = withAgentTimeout(t, env.Conflist(testbed.Capo), "3s")
	if fx.node != nil {
		fx.conflist = nil // the runtime reads the node's own conflist
	}
	set := env.CreateStatefulSet("redis", stormSelected)
	var selected, unselected []*testbed.Sandbox
	for i := range stormSelected {
		selected = append(selected, addPod(t, fx, fmt.Sprintf("redis-%d", i), testbed.OwnedBy(set)))
	}
	for i := range stormUnselected {
		unselected = append(unselected, addPod(t, fx, fmt.Sprintf("web-%d", i), testbed.WithLabels(map[string]string{"app": "web"})))
	}
	fx.selected = selected
	all := append(append([]*testbed.Sandbox{}, selected...), unselected...)
	for _, sb := range all {
		env.MarkRunning(sb)
		env.Evict(sb.Pod.Name) // the kubelet's eviction: status first, then the DEL
	}

	failed := storm(t, fx, f, all)
	if f.heal != nil {
		f.heal(t, fx)
	}
	for _, sb := range failed { // the runtime retries a failed DEL
		if err := del(ctx, fx, sb); err != nil {
			t.Errorf("DEL of %s retried after the fault: %v", sb.Pod.Name, err)
		}
	}
	eventually(t, 60*time.Second, "the journal drained", func() bool {
		p, _ := env.Journal().Pending()
		return len(p) == 0
	})
	eventually(t, 30*time.Second, "teardowns that went around capo settled", func() bool {
		recs, _ := env.Journal().AddrRecords()
		return len(recs) == 0
	})
	// Under IP pressure: new pods take every address that is free.
	fillPool(t, fx)
	return check(t, f.name, env, selected, len(all))
}

func addPod(t *testing.T, fx *faultEnv, name string, opts ...testbed.PodOption) *testbed.Sandbox {
	t.Helper()
	pod := fx.env.CreatePod(name, opts...)
	var sb *testbed.Sandbox
	if fx.node != nil {
		sb = fx.env.NewDiskSandbox(pod, fx.node)
	} else {
		sb = fx.env.NewSandbox(pod, fx.conflist)
	}
	if err := sb.Add(context.Background()); err != nil {
		t.Fatalf("ADD %s: %v", name, err)
	}
	return sb
}

func del(ctx context.Context, fx *faultEnv, sb *testbed.Sandbox) error {
	if fx.node == nil {
		return sb.Del(ctx)
	}
	// Calico's install writes the conflist in place (os.WriteFile), so a
	// read can catch it half-written. The runtime runs no plugin on a
	// conflist it cannot parse (it keeps failing the teardown until it
	// can); here the DEL waits for a whole file the same way.
	var onDisk []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fx.node.ConfFile)
		if err != nil {
			return err
		}
		if onDisk = b; json.Valid(b) || time.Now().After(deadline) {
			break
		}
	}
	return sb.DelWith(ctx, onDisk)
}

// storm tears all down on four workers and injects the fault a third of the
// way in. It returns the sandboxes whose DEL failed.
func storm(t *testing.T, fx *faultEnv, f fault, all []*testbed.Sandbox) []*testbed.Sandbox {
	ctx := context.Background()
	work := make(chan *testbed.Sandbox)
	var mu sync.Mutex
	var failed []*testbed.Sandbox
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sb := range work {
				if err := del(ctx, fx, sb); err != nil {
					mu.Lock()
					failed = append(failed, sb)
					mu.Unlock()
					if !f.mayRetry {
						t.Errorf("DEL of %s failed under %q: %v", sb.Pod.Name, f.name, err)
					}
				}
			}
		}()
	}
	for i, sb := range all {
		if i == len(all)/3 {
			f.inject(t, fx)
		}
		work <- sb
	}
	close(work)
	wg.Wait()
	return failed
}

// fillPool starts new pods until the pool has no address left to give.
func fillPool(t *testing.T, fx *faultEnv) {
	for i := 0; ; i++ {
		sb := fx.env.NewSandbox(fx.env.CreatePod(fmt.Sprintf("filler-%d", i)), withAgentTimeout(t, fx.env.Conflist(testbed.Capo), "3s"))
		if err := sb.Add(context.Background()); err != nil {
			return
		}
		if i > 64 {
			t.Fatal("the pool never filled")
		}
	}
}

// check holds the promise against Calico's datastore.
func check(t *testing.T, name string, env *testbed.Env, selected []*testbed.Sandbox, dels int) faultResult {
	t.Helper()
	res := faultResult{fault: name, dels: dels, journaled: strings.Count(env.CapoIPAMLog(), "DEL journaled")}
	held := env.Reservations()
	st, err := env.IPAMState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range selected {
		ip := sb.IP()
		owner := st.Holder(net.ParseIP(ip))
		e, reserved := held[ip]
		switch {
		case reserved && (e.Namespace != sb.Pod.Namespace || e.Pod != sb.Pod.Name):
			t.Errorf("%s of %s/%s is held for %s/%s", ip, sb.Pod.Namespace, sb.Pod.Name, e.Namespace, e.Pod)
		case owner != "" && owner != sb.Handle():
			res.freedUnreserved++
			t.Errorf("%s of %s was given to %s", ip, sb.Pod.Name, owner)
		case reserved:
			res.reserved++
		case owner == "":
			res.freedUnreserved++
			t.Errorf("%s of %s is free and not reserved", ip, sb.Pod.Name)
		}
	}
	res.otherNamespace = heldAcross(t, env)
	return res
}

// withAgentTimeout sets capo-ipam's agent_timeout in a conflist: a DEL waits
// that long for the agent before it journals.
func withAgentTimeout(t *testing.T, conflist []byte, d string) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(conflist, &c); err != nil {
		t.Fatal(err)
	}
	ipam := c["plugins"].([]any)[0].(map[string]any)["ipam"].(map[string]any)
	ipam["agent_timeout"] = d
	out, _ := json.Marshal(c)
	return out
}

func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// fill writes until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}
