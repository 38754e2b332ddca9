package testbed

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// Controller is a running capo-controller replica. Its lease and config
// live in the env's namespace, so tests do not share a leader.
type Controller struct {
	Agent    // the same process handle and metrics helpers
	Identity string
}

// StartController runs one capo-controller replica, configured as the
// Deployment's pods are, with a short lease so failover tests are quick.
func (e *Env) StartController(identity string) *Controller {
	return e.StartControllerWith(identity, AgentOptions{})
}

// StartControllerWith is StartController with another namespace or
// credentials (AgentOptions' Kubeconfig and Namespace).
func (e *Env) StartControllerWith(identity string, o AgentOptions) *Controller {
	e.T.Helper()
	port, err := freePort()
	if err != nil {
		e.T.Fatal(err)
	}
	c := &Controller{Agent: Agent{env: e, MetricsAddr: "127.0.0.1:" + strconv.Itoa(port)}, Identity: identity}
	ns := e.Namespace
	if o.Namespace != "" {
		ns = o.Namespace
	}
	argv := []string{"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "POD_NAMESPACE=" + ns, "POD_NAME=" + identity}
	argv = append(argv, e.Bed.CalicoEnv(e.DS)...)
	if o.Kubeconfig != "" {
		argv = append(argv, "KUBECONFIG="+o.Kubeconfig)
	}
	argv = append(argv, o.Env...)
	argv = append(argv, e.Bed.Bin.CapoController, "--metrics-addr="+c.MetricsAddr,
		"--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms", "--log-level=debug")
	c.logFile = filepath.Join(e.Dir, "controller-"+identity+".log")
	c.proc, err = e.Bed.sp.start("capo-controller", c.logFile, argv...)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(c.Stop)
	url := "http://" + c.MetricsAddr + "/readyz"
	if o.NotReady { // serving, but not waiting for ready
		url = "http://" + c.MetricsAddr + "/healthz"
	}
	if err := waitHTTP(c.proc, url, nil, "", 30*time.Second); err != nil {
		c.proc.stop() // a start that fails leaves nothing running (for a caller that goes on)
		e.T.Fatalf("%s not ready (log %s): %v", c.proc.name, c.logFile, err)
	}
	return c
}

// Kill ends the replica without letting it give up its lease, as a node
// crash would.
func (c *Controller) Kill() {
	_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-c.proc.done
}

// Leading reports whether the replica says it holds the lease.
func (c *Controller) Leading() bool { return c.Metric("capo_controller_is_leader") == 1 }

// ClearReservations deletes every capo reservation in the env's datastore,
// for tests whose rules count all of them (max count).
func (e *Env) ClearReservations() {
	e.T.Helper()
	ctx := context.Background()
	list, err := e.Calico.IPReservations().List(ctx, options.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, r := range list.Items {
		if r.Labels[calicostore.ManagedByLabel] != calicostore.ManagedBy {
			continue
		}
		if _, err := e.Calico.IPReservations().Delete(ctx, r.Name, options.DeleteOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
}
