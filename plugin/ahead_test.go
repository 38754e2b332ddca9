package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
)

// waitingAgent answers once the delegate has started, or after a second.
type waitingAgent struct {
	started string // the file the delegate touches as it starts
	resp    *wire.ReserveResponse
	err     error
	sawIt   bool
}

func (a *waitingAgent) Reserve(context.Context, *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(a.started); err == nil {
			a.sawIt = true
			break
		}
	}
	return a.resp, a.err
}

// aheadDelegate is a calico-ipam that notes its start, then what it read
// on stdin, then that it released.
func aheadDelegate(t *testing.T) (dir, started, stdin, released string) {
	t.Helper()
	files := t.TempDir()
	started, stdin, released = filepath.Join(files, "started"), filepath.Join(files, "stdin"), filepath.Join(files, "released")
	dir = script(t, "calico-ipam", `touch `+started+`; cat > `+stdin+`; test -s `+stdin+` && touch `+released)
	return dir, started, stdin, released
}

// The DEL's calico-ipam starts while the agent reserves, and reads its
// netconf (and so releases) only after the agent has answered.
func TestDelStartsTheDelegateWhileTheAgentReserves(t *testing.T) {
	dir, started, stdin, released := aheadDelegate(t)
	agent := &waitingAgent{started: started, resp: &wire.ReserveResponse{Outcome: wire.Reserved, IPs: []string{"10.0.0.1"}}}
	if err := del(context.Background(), delArgs(), mustConf(t, delConf), delDeps{agent: agent, delegate: &ExecDelegate{Paths: []string{dir}}, journal: &fakeJournal{}}); err != nil {
		t.Fatal(err)
	}
	if !agent.sawIt {
		t.Fatal("calico-ipam had not started by the time the agent answered")
	}
	if got, _ := os.ReadFile(stdin); string(got) != `{"cniVersion":"0.3.1","name":"k8s-pod-network","ipam":{"type":"calico-ipam"}}` {
		t.Fatalf("calico-ipam read %q", got)
	}
	if _, err := os.Stat(released); err != nil {
		t.Fatal("calico-ipam did not release")
	}
}

// When the agent cannot answer, the DEL is journaled and the calico-ipam
// started ahead is stopped before it reads anything: nothing is released.
func TestDelStopsTheDelegateStartedAheadWhenTheAgentIsAway(t *testing.T) {
	dir, started, stdin, released := aheadDelegate(t)
	agent := &waitingAgent{started: started, err: errors.New("connection refused")}
	j := &fakeJournal{}
	if err := del(context.Background(), delArgs(), mustConf(t, delConf), delDeps{agent: agent, delegate: &ExecDelegate{Paths: []string{dir}}, journal: j}); err != nil {
		t.Fatal(err)
	}
	if !agent.sawIt || len(j.records) != 1 {
		t.Fatalf("started %v, journaled %d", agent.sawIt, len(j.records))
	}
	time.Sleep(100 * time.Millisecond) // a delegate left running would have read by now
	if got, _ := os.ReadFile(stdin); len(got) != 0 {
		t.Fatalf("calico-ipam read %q", got)
	}
	if _, err := os.Stat(released); err == nil {
		t.Fatal("calico-ipam released while the agent was away")
	}
}

// A returning pod's ADD asks calico-ipam with its own CNI_ARGS: the ADD
// started ahead with the runtime's is stopped, not used.
func TestAddStartedAheadIsNotUsedForAReturn(t *testing.T) {
	d := &ExecDelegate{Paths: []string{script(t, "calico-ipam", `cat >/dev/null; echo "$CNI_ARGS" >&2; printf '{"cniVersion":"0.3.1","ips":[]}'`)}}
	conf := mustConf(t, delConf)
	d.StartAhead(context.Background(), "ADD", conf)
	if d.ahead == nil {
		t.Fatal("not started ahead")
	}
	first := d.ahead.cmd.Process.Pid
	if _, err := d.Request(context.Background(), conf, "K8S_POD_NAME=redis-0", "10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	if d.ahead != nil {
		t.Fatal("the call started ahead is still waiting")
	}
	if err := syscallKill0(first); err == nil {
		t.Fatalf("the call started ahead (pid %d) still runs", first)
	}
}

// syscallKill0 reports whether pid is gone (an error) or still there.
func syscallKill0(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(syscall.Signal(0))
}
