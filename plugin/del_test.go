package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

type fakeAgent struct {
	resp *wire.ReserveResponse
	err  error
	got  *wire.ReserveRequest
}

func (a *fakeAgent) Reserve(_ context.Context, r *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	a.got = r
	return a.resp, a.err
}

type fakeDelegate struct {
	calls []string
	err   error
}

func (d *fakeDelegate) Invoke(_ context.Context, cmd string, _ *NetConf) ([]byte, error) {
	d.calls = append(d.calls, cmd)
	return nil, d.err
}

type fakeJournal struct {
	records  []*journal.Record
	writeErr error
	addrs    map[string][]string
	atAdd    *wire.Decision // in every ADD record
	forgot   []string
	recorded []*journal.AddrRecord
}

func (j *fakeJournal) Write(r *journal.Record) (string, error) {
	if j.writeErr != nil {
		return "", j.writeErr
	}
	j.records = append(j.records, r)
	return "rec", nil
}

func (j *fakeJournal) RecordAddrs(r *journal.AddrRecord) error {
	if j.addrs == nil {
		j.addrs = map[string][]string{}
	}
	j.addrs[r.Network+"/"+r.ContainerID+"/"+r.IfName] = r.IPs
	j.recorded = append(j.recorded, r)
	return nil
}

func (j *fakeJournal) AddrRecord(n, c, i string) *journal.AddrRecord {
	ips, ok := j.addrs[n+"/"+c+"/"+i]
	if !ok {
		return nil
	}
	return &journal.AddrRecord{Network: n, ContainerID: c, IfName: i, IPs: ips, AtAdd: j.atAdd}
}

func (j *fakeJournal) AddrRecords() ([]*journal.AddrRecord, error) {
	var out []*journal.AddrRecord
	for k := range j.addrs {
		parts := strings.SplitN(k, "/", 3)
		out = append(out, j.AddrRecord(parts[0], parts[1], parts[2]))
	}
	return out, nil
}

func (j *fakeJournal) ForgetAddrs(n, c, i string) error {
	j.forgot = append(j.forgot, n+"/"+c+"/"+i)
	return nil
}

const delConf = `{"cniVersion":"0.3.1","name":"k8s-pod-network","ipam":{"type":"capo-ipam"}}`

func delArgs() *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "c1", IfName: "eth0",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=kafka;K8S_POD_NAME=broker-0;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1",
	}
}

func TestDelFlow(t *testing.T) {
	agentDown := errors.New("dial unix /var/run/capo/agent.sock: connect: connection refused")
	cases := []struct {
		name         string
		agent        *fakeAgent
		delegateErr  error
		journalErr   error
		rollback     bool
		wantErr      string
		wantDelegate bool
		wantAsked    bool
		wantJournal  bool
	}{
		{name: "reserved then released", agent: &fakeAgent{resp: &wire.ReserveResponse{Outcome: wire.Reserved, IPs: []string{"10.0.0.1"}}}, wantDelegate: true, wantAsked: true},
		{name: "not selected released", agent: &fakeAgent{resp: &wire.ReserveResponse{Outcome: wire.NotSelected}}, wantDelegate: true, wantAsked: true},
		{name: "node not opted in released", agent: &fakeAgent{resp: &wire.ReserveResponse{Outcome: wire.NodeNotOptedIn}}, wantDelegate: true, wantAsked: true},
		{name: "agent down: journaled, not released", agent: &fakeAgent{err: agentDown}, wantAsked: true, wantJournal: true},
		{name: "agent down and journal broken: blocks", agent: &fakeAgent{err: agentDown}, journalErr: errors.New("read-only file system"), wantAsked: true, wantErr: "could not be journaled"},
		{name: "release fails after reserve: blocks", agent: &fakeAgent{resp: &wire.ReserveResponse{Outcome: wire.Reserved}}, delegateErr: errors.New("datastore timeout"), wantDelegate: true, wantAsked: true, wantErr: "datastore timeout"},
		{name: "rollback of a failed ADD: no reservation", agent: &fakeAgent{err: errors.New("must not be called")}, rollback: true, wantDelegate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDelegate{err: tc.delegateErr}
			j := &fakeJournal{
				writeErr: tc.journalErr, addrs: map[string][]string{"k8s-pod-network/c1/eth0": {"10.0.0.1"}},
				atAdd: &wire.Decision{Selected: true, Rule: "pod annotation"},
			}
			conf := mustConf(t, delConf)
			env := map[string]string{"CNI_CONTAINERID": "c1", "CNI_PATH": "/opt/cni/bin"}
			err := blocking(del(context.Background(), delArgs(), conf, delDeps{agent: tc.agent, delegate: d, journal: j, rollback: tc.rollback, env: env}))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "no such file")) {
				t.Fatalf("blocking error %q would be swallowed by containerd", err)
			}
			if got := len(d.calls) == 1 && d.calls[0] == "DEL"; got != tc.wantDelegate {
				t.Fatalf("delegate calls %v, want release=%v", d.calls, tc.wantDelegate)
			}
			if asked := tc.agent.got != nil; asked != tc.wantAsked {
				t.Fatalf("agent asked=%v, want %v", asked, tc.wantAsked)
			}
			if tc.wantAsked {
				r := tc.agent.got
				if r.Pod != (wire.PodRef{Namespace: "kafka", Name: "broker-0", UID: "u-1"}) || r.Handle() != "k8s-pod-network.c1" || len(r.RecordedIPs) != 1 || r.AtAdd == nil || !r.AtAdd.Selected {
					t.Fatalf("request %+v", r)
				}
			}
			if got := len(j.records) == 1; got != tc.wantJournal {
				t.Fatalf("journal records %d, want %v", len(j.records), tc.wantJournal)
			}
			if tc.wantJournal {
				rec := j.records[0]
				if string(rec.Netconf) != delConf || rec.Env["CNI_PATH"] != "/opt/cni/bin" || !strings.Contains(rec.Why, "connection refused") || rec.Request.ContainerID != "c1" || rec.Request.AtAdd == nil {
					t.Fatalf("record %+v", rec)
				}
			}
			released := tc.wantDelegate && tc.delegateErr == nil
			if got := len(j.forgot) == 1; got != released {
				t.Fatalf("ADD record forgotten=%v, want %v", got, released)
			}
		})
	}
}

func TestDelRejectsMalformedCNIArgs(t *testing.T) {
	args := delArgs()
	args.Args = "K8S_POD_NAME"
	err := del(context.Background(), args, mustConf(t, delConf), delDeps{agent: &fakeAgent{}, delegate: &fakeDelegate{}, journal: &fakeJournal{}})
	if err == nil || !strings.Contains(err.Error(), "CNI_ARGS") {
		t.Fatalf("err = %v", err)
	}
}

func TestResultIPsAcrossVersions(t *testing.T) {
	for v, out := range map[string]string{
		"0.2.0":      `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/32"},"ip6":{"ip":"fd00:0::2/128"}}`,
		"0.3.1":      `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.2/32"},{"version":"6","address":"FD00:0:0::2/128"}],"dns":{}}`,
		"1.0.0":      `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2/32"},{"address":"fd00::2/128","gateway":"fd00::1"}]}`,
		"v4-mapped":  `{"cniVersion":"1.0.0","ips":[{"address":"::ffff:10.0.0.2/128"},{"address":"fd00::2/128"}]}`,
		"no version": `{"ip4":{"ip":"10.0.0.2/32"},"ip6":{"ip":"fd00::2/128"}}`,
	} {
		ips, err := resultIPs([]byte(out))
		if err != nil || strings.Join(ips, ",") != "10.0.0.2,fd00::2" {
			t.Errorf("%s: %v %v", v, ips, err)
		}
	}
	for _, out := range []string{`{"ips":[{"address":"10.0.0.300/32"}]}`, `{"ips":`, `{"ip4":{"ip":"10.0.0.2"}}`} {
		if ips, err := resultIPs([]byte(out)); err == nil {
			t.Errorf("%s: read %v", out, ips)
		}
	}
}

// A DEL names the Calico API group its call uses: the calico plugin's
// calico_api_group, else the CALICO_API_GROUP calico-ipam inherits; none
// when calico-ipam decides by discovery.
func TestDelNamesCalicosAPIGroup(t *testing.T) {
	withGroup := `{"cniVersion":"0.3.1","name":"k8s-pod-network","calico_api_group":"projectcalico.org/v3","ipam":{"type":"capo-ipam"}}`
	for _, tc := range []struct{ name, conf, env, want string }{
		{"netconf", withGroup, "crd.projectcalico.org/v1", "projectcalico.org/v3"},
		{"environment", delConf, "crd.projectcalico.org/v1", "crd.projectcalico.org/v1"},
		{"neither: discovery", delConf, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CALICO_API_GROUP", tc.env)
			a := &fakeAgent{resp: &wire.ReserveResponse{Outcome: wire.Reserved}}
			if err := del(context.Background(), delArgs(), mustConf(t, tc.conf), delDeps{agent: a, delegate: &fakeDelegate{}, journal: &fakeJournal{}}); err != nil {
				t.Fatal(err)
			}
			if a.got.CalicoAPIGroup != tc.want {
				t.Fatalf("the request names %q, want %q", a.got.CalicoAPIGroup, tc.want)
			}
		})
	}
}
