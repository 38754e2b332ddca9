package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// Agent is the node agent as capo-ipam sees it.
type Agent interface {
	Reserve(ctx context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error)
}

// Journal is capo-ipam's durable on-host state.
type Journal interface {
	Write(r *journal.Record) (string, error)
	RecordAddrs(r *journal.AddrRecord) error
	AddrRecord(network, containerID, ifName string) *journal.AddrRecord
	AddrRecords() ([]*journal.AddrRecord, error)
	ForgetAddrs(network, containerID, ifName string) error
}

var (
	_ Agent   = (*wire.Client)(nil)
	_ Journal = journal.Dir{}
)

// delDeps are what a DEL needs besides the netconf; cmdDel builds the real ones.
type delDeps struct {
	agent    Agent
	delegate Delegate
	journal  Journal
	rollback bool // Calico is undoing its own failed ADD
	env      map[string]string
	steps    *steps // nil: not timed
	// gone says whether capo is known to be uninstalled (gone.go); nil: never.
	gone func(ctx context.Context) (bool, string)
}

// del reserves, then releases. The release happens only after the agent has
// answered; if it cannot answer, the DEL is journaled and succeeds without
// releasing, so the address stays allocated until the agent replays it.
func del(ctx context.Context, args *skel.CmdArgs, conf *NetConf, d delDeps) error {
	if d.rollback {
		// The sandbox never came up: its ADD is being rolled back. Nothing to keep.
		slog.Info("DEL inside a failed ADD: releasing without reserving")
		return release(ctx, args, conf, d)
	}
	req, err := reserveRequest(args, conf, d.journal)
	if err != nil {
		return err
	}
	// calico-ipam starts while the agent reserves; it reads the netconf, and
	// so can release, only once release sends it.
	defer startAhead(ctx, d.delegate, "DEL", conf)()
	actx, cancel := context.WithTimeout(ctx, conf.IPAM.AgentTimeout.D())
	resp, err := d.agent.Reserve(actx, req)
	cancel()
	d.steps.done("agent")
	if err != nil {
		if ans := (*wire.AnswerError)(nil); errors.As(err, &ans) {
			// The agent is there and said why it did not decide: capo is
			// installed, and the DEL waits for its replay.
			return journalDel(args, conf, d, req, err)
		}
		if d.gone != nil {
			gone, why := d.gone(ctx)
			if gone {
				slog.Warn("capo-agent gave no answer and capo is uninstalled: releasing as plain calico-ipam", "why", why, "err", err)
				return release(ctx, args, conf, d)
			}
			slog.Info("capo is not known to be uninstalled: journaling", "why", why)
		}
		return journalDel(args, conf, d, req, err)
	}
	slog.Info("agent answered", "outcome", resp.Outcome, "ips", resp.IPs, "rule", resp.Rule)
	failpoint.Hit(failpoint.PluginBeforeRelease)
	return release(ctx, args, conf, d)
}

// release runs the delegate's DEL and forgets the ADD record.
func release(ctx context.Context, args *skel.CmdArgs, conf *NetConf, d delDeps) error {
	_, err := d.delegate.Invoke(ctx, "DEL", conf)
	d.steps.done("delegate")
	if err != nil {
		slog.Error("DEL failed", "err", err)
		return err
	}
	if err := d.journal.ForgetAddrs(conf.Name, args.ContainerID, args.IfName); err != nil {
		slog.Warn("could not remove the ADD record", "err", err)
	}
	slog.Info("DEL delegated", "delegate", conf.DelegateType())
	d.steps.done("forget")
	return nil
}

// journalDel records the DEL for the agent and reports success without
// releasing. Only a journal that cannot be written fails the DEL: then
// nothing guarantees the reservation, so the runtime must retry.
func journalDel(args *skel.CmdArgs, conf *NetConf, d delDeps, req *wire.ReserveRequest, agentErr error) error {
	rec := &journal.Record{Created: time.Now().UTC(), Request: *req, Netconf: conf.Raw(), Env: d.env, Why: agentErr.Error()}
	what := agentOutcome(agentErr)
	name, err := d.journal.Write(rec)
	err = failpoint.Or(failpoint.PluginJournalWrite, err)
	if err != nil {
		return fmt.Errorf("%s (%v) and the DEL could not be journaled in %s (%v): the address stays allocated; check the agent and the state dir, the runtime will retry", what, agentErr, conf.IPAM.StateDir, err)
	}
	slog.Warn(what+": DEL journaled, address kept allocated until the agent replays it", "err", agentErr, "record", name)
	return nil
}

// agentOutcome says what kept the agent from deciding: a refusal, another
// answer, or none at all.
func agentOutcome(err error) string {
	var ans *wire.AnswerError
	switch {
	case errors.As(err, &ans) && ans.Refused():
		return "capo-agent refused the request (it names another pod than the node's CNI state does)"
	case errors.As(err, &ans):
		return "capo-agent answered without deciding"
	}
	return "capo-agent gave no answer"
}

func reserveRequest(args *skel.CmdArgs, conf *NetConf, j Journal) (*wire.ReserveRequest, error) {
	pod, err := podOf(args)
	if err != nil {
		return nil, err
	}
	req := &wire.ReserveRequest{ContainerID: args.ContainerID, IfName: args.IfName, Network: conf.Name, Pod: pod, CalicoAPIGroup: callGroup(conf)}
	if r := j.AddrRecord(conf.Name, args.ContainerID, args.IfName); r != nil {
		req.RecordedIPs, req.AtAdd = r.IPs, r.AtAdd
	}
	return req, nil
}

// callGroup is the API group calico-ipam uses on this call, as far as
// capo-ipam can tell: the netconf's calico_api_group, else the
// CALICO_API_GROUP calico-ipam inherits from this process; "" when
// calico-ipam decides by discovery.
func callGroup(conf *NetConf) string {
	if conf.CalicoAPIGroup != "" {
		return conf.CalicoAPIGroup
	}
	return os.Getenv("CALICO_API_GROUP")
}

// cniEnv is the part of the environment a replayed DEL needs.
func cniEnv() map[string]string {
	out := map[string]string{}
	for _, k := range []string{"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH"} {
		out[k] = os.Getenv(k)
	}
	return out
}

// parentIsAdding reports whether our parent, the calico plugin, was started
// for ADD. Calico rolls back a failed ADD by setting CNI_COMMAND=DEL in its
// own environment and calling IPAM DEL; /proc shows the environment it was
// started with. Unknown means no: a needless reservation is the safe error.
func parentIsAdding() bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(data), "\x00") {
		if kv == "CNI_COMMAND=ADD" {
			return true
		}
	}
	return false
}
