package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/fsutil"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// A node whose agent is gone for good (capo uninstalled while the node was
// NotReady, or by a forced delete) keeps capo-ipam in its chain: DELs
// would be journaled forever. capo-ipam takes capo as gone, and releases
// as plain calico-ipam, only on proof: the pod the node's last agent ran as
// (it names itself and its node in the state dir) has been absent from the
// API server for goneAfter, and the node is no longer opted in, so capo
// has nothing to reserve there by its own rules. An agent pod replaced by
// one that never starts (its image, the node's resources) leaves the node
// opted in: an agent away, whose DELs are journaled and whose node
// capo-controller covers, however long it lasts. Anything unknown keeps
// capo.
const (
	missingFile = "agent-missing-since" // in the state dir: when a DEL first found the agent's pod gone
	// goneAfter (uninstalled_after in the netconf): how long the agent's
	// pod must stay absent from a node no longer opted in.
	goneAfter = time.Hour
)

// goneState is what a check observed: pure input for decideGone.
type goneState struct {
	mark      *journal.AgentMark // nil: no agent ever named itself here
	exists    bool               // the agent's pod was found
	optedIn   bool               // the mark's node still carries capo's opt-in
	err       error              // the API server could not say
	missing   time.Time          // when the pod was first found absent; zero if never
	now       time.Time
	goneAfter time.Duration
}

// decideGone: gone only when the agent's pod has been absent for goneAfter
// and its node is no longer opted in. startMissing says to record now as
// the first absence.
func decideGone(s goneState) (gone, startMissing bool, why string) {
	switch {
	case s.mark == nil:
		return false, false, "no capo-agent has named its pod on this node"
	case s.err != nil:
		return false, false, "cannot tell whether capo-agent's pod exists and its node is opted in: " + s.err.Error()
	case s.exists:
		return false, false, "capo-agent's pod " + s.mark.Namespace + "/" + s.mark.Pod + " exists"
	case s.missing.IsZero():
		return false, true, fmt.Sprintf("capo-agent's pod %s/%s is gone since now; capo is taken as uninstalled after %s, if node %s is no longer opted in", s.mark.Namespace, s.mark.Pod, s.goneAfter, s.mark.Node)
	case s.optedIn:
		return false, false, fmt.Sprintf("capo-agent's pod %s/%s is gone since %s, but node %s is still opted in: an agent away (a replacement that does not start?), not an uninstall; if capo was removed, opt the node out or run capo-install uninstall", s.mark.Namespace, s.mark.Pod, s.missing.Format(time.RFC3339), s.mark.Node)
	case s.now.Sub(s.missing) < s.goneAfter:
		return false, false, fmt.Sprintf("capo-agent's pod %s/%s is gone since %s and node %s is opted out; capo is taken as uninstalled after %s", s.mark.Namespace, s.mark.Pod, s.missing.Format(time.RFC3339), s.mark.Node, s.goneAfter)
	}
	return true, false, fmt.Sprintf("capo-agent's pod %s/%s has been gone since %s and node %s is no longer opted in: capo is uninstalled from this node", s.mark.Namespace, s.mark.Pod, s.missing.Format(time.RFC3339), s.mark.Node)
}

// goneCheck gathers goneState from the state dir and capo-ipam-kube.
type goneCheck struct {
	stateDir   string
	kubeconfig string
	paths      []string // CNI_PATH, split
	now        func() time.Time
	after      time.Duration // 0: goneAfter
}

// gone says whether capo is known to be uninstalled, and why (or why not).
func (g goneCheck) gone(ctx context.Context) (bool, string) {
	after := g.after
	if after <= 0 {
		after = goneAfter
	}
	s := goneState{now: g.now(), goneAfter: after}
	s.mark = journal.Dir{Root: g.stateDir}.AgentMark()
	if s.mark != nil {
		s.missing = g.missingSince(s.mark)
		s.exists, s.optedIn, s.err = g.ask(ctx, s.mark)
	}
	gone, start, why := decideGone(s)
	switch {
	case start:
		line := s.mark.Namespace + "/" + s.mark.Pod + " " + s.now.UTC().Format(time.RFC3339)
		_ = fsutil.WriteFileAtomic(filepath.Join(g.stateDir, missingFile), []byte(line), 0o600)
	case s.exists:
		_ = os.Remove(filepath.Join(g.stateDir, missingFile))
	}
	return gone, why
}

// missingSince is when a DEL first found m's pod absent: a record about
// another pod (an agent that came and went since) does not count.
func (g goneCheck) missingSince(m *journal.AgentMark) time.Time {
	data, err := os.ReadFile(filepath.Join(g.stateDir, missingFile))
	if err != nil {
		return time.Time{}
	}
	pod, at, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil || pod != m.Namespace+"/"+m.Pod {
		return time.Time{}
	}
	return t
}

// ask asks capo-ipam-kube, which has the HTTPS client capo-ipam lacks,
// whether the agent's pod exists and its node is opted in.
func (g goneCheck) ask(ctx context.Context, m *journal.AgentMark) (exists, optedIn bool, err error) {
	if g.kubeconfig == "" {
		return false, false, errors.New("the netconf names no kubernetes.kubeconfig")
	}
	if m.Node == "" {
		return false, false, errors.New("the agent's mark names no node (written by an older agent): whether the node is still opted in cannot be asked")
	}
	helper := findInPath(g.paths, wire.KubeHelper)
	if helper == "" {
		return false, false, fmt.Errorf("%s is missing from CNI_PATH", wire.KubeHelper)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helper, "--kubeconfig", g.kubeconfig, "--agent-pod", m.Namespace+"/"+m.Pod, "--node", m.Node)
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = &stdout, &stderr, time.Second
	if err := cmd.Run(); err != nil {
		return false, false, fmt.Errorf("%s: %s (%w)", wire.KubeHelper, strings.TrimSpace(stderr.String()), err)
	}
	var out struct {
		Exists  *bool `json:"exists"`
		OptedIn *bool `json:"optedIn"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Exists == nil || out.OptedIn == nil {
		return false, false, fmt.Errorf("%s's answer %q is not valid", wire.KubeHelper, stdout.String())
	}
	return *out.Exists, *out.OptedIn, nil
}
