package capoctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// podExec runs cmd in a container of p through the API server (pods/exec,
// as kubectl exec does) and gives its standard output.
type podExec func(ctx context.Context, p *corev1.Pod, container string, cmd []string) ([]byte, error)

// agentNodeInfoCommand is the agent binary's command printing its node's
// CNI configs and journal, redacted (daemon/agent.NodeInfoCommand; not
// imported, to keep the agent's code out of capoctl's binary).
const agentNodeInfoCommand = "node-info"

// execTimeout bounds one exec: the agent reads a few files.
const execTimeout = time.Minute

// maxExecOutput bounds what one exec may print (a journal of thousands of
// DELs is a few MiB).
const maxExecOutput = 64 << 20

// execIn is podExec over rc, the kubeconfig's credentials: websocket, as
// kubectl 1.31 and later, else SPDY for an older API server.
func execIn(rc *rest.Config, kube kubernetes.Interface) podExec {
	return func(ctx context.Context, p *corev1.Pod, container string, cmd []string) ([]byte, error) {
		req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
		if err != nil {
			return nil, err
		}
		spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
		if err != nil {
			return nil, err
		}
		ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, execTimeout)
		defer cancel()
		out, errw := &limited{max: maxExecOutput}, &limited{max: 64 << 10}
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out, Stderr: errw}); err != nil {
			return nil, fmt.Errorf("exec %s in %s/%s: %w: %s", strings.Join(cmd, " "), p.Namespace, p.Name, err, strings.TrimSpace(errw.String()))
		}
		return out.Bytes(), nil
	}
}

// limited is a buffer that refuses to grow past max.
type limited struct {
	bytes.Buffer
	max int
}

func (l *limited) Write(b []byte) (int, error) {
	if l.Len()+len(b) > l.max {
		return 0, errors.New("output too long")
	}
	return l.Buffer.Write(b)
}

// agentNodeInfo is the full node view of agent pod p: its container's
// own command and flags, with node-info, run in its container.
func (c collector) agentNodeInfo(p *corev1.Pod) ([]byte, error) {
	if c.exec == nil {
		return nil, errors.New("no exec into pods here")
	}
	if len(p.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s/%s has no container", p.Namespace, p.Name)
	}
	ct := p.Spec.Containers[0]
	for _, x := range p.Spec.Containers {
		if x.Name == "agent" {
			ct = x
		}
	}
	bin, rest := "/usr/local/bin/capo-agent", []string(nil)
	if len(ct.Command) > 0 {
		bin, rest = ct.Command[0], ct.Command[1:]
	}
	cmd := append(append([]string{bin, agentNodeInfoCommand}, rest...), ct.Args...)
	return c.exec(c.ctx, p, ct.Name, cmd)
}
