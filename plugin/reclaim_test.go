package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// An offer that names the member's predecessor: capo-ipam frees it by the
// delegate's DEL of that sandbox, then requests the address; if the DEL
// fails, the pod gets an ordinary ADD and the agent hears why.
func TestReturnAddReclaimsFirst(t *testing.T) {
	offer := &wire.Return{IPs: []string{"10.0.0.3"}, Reclaim: []wire.Reclaim{{ContainerID: "0ld5andb0x", Node: "n2"}}}
	cases := []struct {
		name      string
		delErr    error
		refused   string
		wantIP    string
		wantCalls string
		outcome   string
		reason    string
		reclaimed string
	}{
		{"freed, then requested", nil, "", "10.0.0.3", "DEL 0ld5andb0x|ADD 10.0.0.3", wire.Returned, "", "0ld5andb0x"},
		{"the DEL fails", errors.New("datastore unreachable"), "", "10.0.0.50", "DEL 0ld5andb0x|ADD", wire.FellBack, reasonReclaimFailed, ""},
		// Freed, but calico-ipam still refuses (a race): fresh, reported freed.
		{"freed, then refused", nil, "10.0.0.3", "10.0.0.50", "DEL 0ld5andb0x|ADD 10.0.0.3|ADD", wire.FellBack, reasonRefused, "0ld5andb0x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &addrDelegate{refused: map[string]bool{tc.refused: true}, fresh: "10.0.0.50", delErr: tc.delErr}
			rep := &fakeReporter{}
			sb := wire.Sandbox{Network: "net1", ContainerID: "n3w", IfName: "eth0"}
			rt := returning{offer: offer, podName: "ns/redis-3", args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=redis-3", rep: rep, sandbox: sb, local: recordedHere(&fakeJournal{}, "net1")}
			out, err := returnAdd(context.Background(), mustConf(t, testConf), d, rt)
			if err != nil {
				t.Fatal(err)
			}
			if ips, _ := resultIPs(out); strings.Join(ips, ",") != tc.wantIP {
				t.Fatalf("result %s, want %s", out, tc.wantIP)
			}
			if got := strings.Join(d.calls, "|"); got != tc.wantCalls {
				t.Errorf("delegate calls %s, want %s", got, tc.wantCalls)
			}
			if len(rep.got) != 1 {
				t.Fatalf("reported %+v", rep.got)
			}
			o := rep.got[0]
			if o.Outcome != tc.outcome || o.Reason != tc.reason || strings.Join(o.Reclaimed, ",") != tc.reclaimed {
				t.Errorf("reported %+v, want %s %s reclaimed %q", o, tc.outcome, tc.reason, tc.reclaimed)
			}
		})
	}
}

// An offer naming a sandbox capo-ipam recorded at ADD on this node (here
// the sandbox of another pod, redis-5) frees nothing: a lost node's
// sandbox never has a record here. The pod gets an ordinary ADD, the
// agent hears why, and redis-5 keeps its address.
func TestReclaimRefusesThisNodesSandbox(t *testing.T) {
	j := &fakeJournal{}
	_ = j.RecordAddrs(&journal.AddrRecord{Network: "net1", ContainerID: "5andb0x0f5", IfName: "eth0", IPs: []string{"10.0.0.3"}})
	offer := &wire.Return{IPs: []string{"10.0.0.3"}, Reclaim: []wire.Reclaim{{ContainerID: "5andb0x0f5", Node: "n2"}}}
	d := &addrDelegate{fresh: "10.0.0.50"}
	rep := &fakeReporter{}
	conf := mustConf(t, `{"cniVersion":"0.3.1","name":"net1","policy":{"type":"k8s"},"ipam":{"type":"capo-ipam","delegate":{"type":"fake-ipam"}}}`)
	args := &skel.CmdArgs{ContainerID: "n3w", IfName: "eth0", Args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=redis-3"}
	err := add(context.Background(), args, conf, addDeps{delegate: d, journal: j, ann: offering{offer}, reporter: rep, stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.calls, "|"); got != "ADD" {
		t.Fatalf("delegate calls %s, want an ordinary ADD only", got)
	}
	if len(rep.got) != 1 || rep.got[0].Outcome != wire.FellBack || rep.got[0].Reason != reasonReclaimFailed || !strings.Contains(rep.got[0].Why, "has an ADD record on this node") {
		t.Fatalf("reported %+v", rep.got)
	}
}

// offering answers every ADD with an offer.
type offering struct{ ret *wire.Return }

func (o offering) Get(context.Context, wire.PodRef) (*wire.AnnotationsResponse, error) {
	return &wire.AnnotationsResponse{Return: o.ret}, nil
}

// capo-ipam frees nothing the agent names that is not another sandbox.
func TestReclaimNamesAnotherSandboxOnly(t *testing.T) {
	for _, id := range []string{"", "n3w", "a;IP=10.0.0.9", "-x"} {
		d := &addrDelegate{fresh: "10.0.0.50"}
		offer := &wire.Return{IPs: []string{"10.0.0.3"}, Reclaim: []wire.Reclaim{{ContainerID: id}}}
		rt := returning{offer: offer, podName: "ns/redis-3", sandbox: wire.Sandbox{ContainerID: "n3w"}, rep: &fakeReporter{}}
		if _, err := returnAdd(context.Background(), mustConf(t, testConf), d, rt); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(d.calls, "|"); got != "ADD" {
			t.Errorf("%q: delegate calls %s, want an ordinary ADD only", id, got)
		}
	}
}

// A capo-ipam of before reclaims (0.1.0's Return) reads no Reclaim: it
// requests the address, calico-ipam refuses it (still the predecessor's),
// and the pod gets a fresh one; the reservation is the agent's to keep.
func TestOlderCapoIPAMIgnoresReclaim(t *testing.T) {
	b, err := json.Marshal(wire.Return{IPs: []string{"10.0.0.3"}, Reclaim: []wire.Reclaim{{ContainerID: "0ld", Node: "n2"}}})
	if err != nil {
		t.Fatal(err)
	}
	var old struct { // wire.Return as capo 0.1.0 declares it
		IPs    []string `json:"ips,omitempty"`
		Held   []string `json:"held,omitempty"`
		Reason string   `json:"reason,omitempty"`
		Why    string   `json:"why,omitempty"`
	}
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	d := &addrDelegate{refused: map[string]bool{"10.0.0.3": true}, fresh: "10.0.0.50"}
	rep := &fakeReporter{}
	rt := returning{offer: &wire.Return{IPs: old.IPs, Held: old.Held, Reason: old.Reason, Why: old.Why}, podName: "ns/redis-3", args: "K8S_POD_NAME=redis-3", rep: rep}
	out, err := returnAdd(context.Background(), mustConf(t, testConf), d, rt)
	if err != nil {
		t.Fatal(err)
	}
	if ips, _ := resultIPs(out); strings.Join(ips, ",") != "10.0.0.50" || strings.Join(d.calls, "|") != "ADD 10.0.0.3|ADD" {
		t.Fatalf("result %s, calls %v", out, d.calls)
	}
	if len(rep.got) != 1 || rep.got[0].Outcome != wire.FellBack || rep.got[0].Reason != reasonRefused {
		t.Fatalf("reported %+v", rep.got)
	}
}

// The real delegate is run for the predecessor's sandbox: DEL, its
// container ID, the pod's CNI_ARGS as the runtime gave them.
func TestReleaseSandboxRunsTheDelegatesDEL(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	dir := script(t, "fake-ipam", `env > `+out)
	d := &ExecDelegate{Paths: []string{dir}, Env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=n3w", "CNI_ARGS=K8S_POD_NAMESPACE=ns;K8S_POD_NAME=redis-3"}}
	if err := d.ReleaseSandbox(context.Background(), mustConf(t, testConf), "0ld"); err != nil {
		t.Fatal(err)
	}
	env, _ := os.ReadFile(out)
	for _, want := range []string{"CNI_COMMAND=DEL\n", "CNI_CONTAINERID=0ld\n", "CNI_ARGS=K8S_POD_NAMESPACE=ns;K8S_POD_NAME=redis-3\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("delegate env lacks %q:\n%s", want, env)
		}
	}
	if strings.Count(string(env), "CNI_CONTAINERID=") != 1 {
		t.Errorf("CNI_CONTAINERID set more than once:\n%s", env)
	}
}
