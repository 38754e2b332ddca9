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
// as plain calico-ipam, only on positive evidence that lasts: the pod the
// node's last agent ran as (it names itself in the state dir) has been
// absent from the API server for goneAfter. Anything unknown keeps capo.
const (
	missingFile = "agent-missing-since" // in the state dir: when a DEL first found the agent's pod gone
	// goneAfter (uninstalled_after in the netconf) is long against a
	// DaemonSet pod replaced by one that cannot start (its image, its node's
	// resources): until then DELs are journaled and capo-controller covers
	// the node, as for any agent away.
	goneAfter = time.Hour
)

// goneState is what a check observed: pure input for decideGone.
type goneState struct {
	mark      *journal.AgentMark // nil: no agent ever named itself here
	exists    bool               // the agent's pod was found
	err       error              // the API server could not say
	missing   time.Time          // when the pod was first found absent; zero if never
	now       time.Time
	goneAfter time.Duration
}

// decideGone: gone only when the agent's pod has been absent for
// goneAfter. startMissing says to record now as the first absence.
func decideGone(s goneState) (gone, startMissing bool, why string) {
	switch {
	case s.mark == nil:
		return false, false, "no capo-agent has named its pod on this node"
	case s.err != nil:
		return false, false, "cannot tell whether capo-agent's pod exists: " + s.err.Error()
	case s.exists:
		return false, false, "capo-agent's pod " + s.mark.Namespace + "/" + s.mark.Pod + " exists"
	case s.missing.IsZero():
		return false, true, fmt.Sprintf("capo-agent's pod %s/%s is gone since now; capo is taken as uninstalled after %s", s.mark.Namespace, s.mark.Pod, s.goneAfter)
	case s.now.Sub(s.missing) < s.goneAfter:
		return false, false, fmt.Sprintf("capo-agent's pod %s/%s is gone since %s; capo is taken as uninstalled after %s", s.mark.Namespace, s.mark.Pod, s.missing.Format(time.RFC3339), s.goneAfter)
	}
	return true, false, fmt.Sprintf("capo-agent's pod %s/%s has been gone since %s and no agent took its place: capo is uninstalled from this node", s.mark.Namespace, s.mark.Pod, s.missing.Format(time.RFC3339))
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
		s.exists, s.err = g.podExists(ctx, s.mark)
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

// podExists asks capo-ipam-kube, which has the HTTPS client capo-ipam lacks.
func (g goneCheck) podExists(ctx context.Context, m *journal.AgentMark) (bool, error) {
	if g.kubeconfig == "" {
		return false, errors.New("the netconf names no kubernetes.kubeconfig")
	}
	helper := findInPath(g.paths, wire.KubeHelper)
	if helper == "" {
		return false, fmt.Errorf("%s is missing from CNI_PATH", wire.KubeHelper)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helper, "--kubeconfig", g.kubeconfig, "--agent-pod", m.Namespace+"/"+m.Pod)
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = &stdout, &stderr, time.Second
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("%s: %s (%w)", wire.KubeHelper, strings.TrimSpace(stderr.String()), err)
	}
	var out struct {
		Exists *bool `json:"exists"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Exists == nil {
		return false, fmt.Errorf("%s's answer %q is not valid", wire.KubeHelper, stdout.String())
	}
	return *out.Exists, nil
}
