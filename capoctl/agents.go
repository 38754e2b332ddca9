package capoctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart's pod labels; capo-controller finds agents by the same.
const (
	agentSelector      = "app.kubernetes.io/name=capo,app.kubernetes.io/component=agent"
	controllerSelector = "app.kubernetes.io/name=capo,app.kubernetes.io/component=controller"
	// nodeInfoPath is the agent's summary of its node beside /metrics,
	// with no file's content (daemon/agent.NodeInfoPath; not imported, to
	// keep the agent's code out of capoctl's binary).
	nodeInfoPath = "/debug/capo/node"
)

// pods are capo's pods in capoNS that selector matches.
func (c *cli) pods(selector string) ([]corev1.Pod, error) {
	list, err := c.kube.CoreV1().Pods(c.capoNS).List(c.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("capo's pods in %s (%s): %w", c.capoNS, selector, err)
	}
	return list.Items, nil
}

// fromPod reads path from a capo pod's metrics port through the API
// server's pod proxy (pods/proxy): what kubectl can reach, capoctl can,
// with no route to the node of its own.
func (c *cli) fromPod(p *corev1.Pod, path string) ([]byte, error) {
	port := "9467"
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == "metrics" {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	b, err := c.kube.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, port, path, nil).DoRaw(c.ctx)
	if err != nil {
		return nil, fmt.Errorf("%s/%s port %s %s: %w", p.Namespace, p.Name, port, path, err)
	}
	return b, nil
}

// nodeInfo is the agent's NodeInfoPath answer (a summary), or its
// node-info command's (the CNI configs and journal too): the fields
// capoctl reads.
type nodeInfo struct {
	Version         string            `json:"version"`
	Wire            int               `json:"wireVersion"`
	Conflists       map[string]string `json:"conflists,omitempty"`
	RuntimeConf     string            `json:"runtimeConf,omitempty"`
	CapoIPAMInChain *bool             `json:"capoIPAMInChain,omitempty"`
	JournalDepth    int               `json:"journalDepth"`      // the summary's
	Journal         []json.RawMessage `json:"journal,omitempty"` // from node-info, or from an older agent's view
	Errors          []string          `json:"errors,omitempty"`
}

// sample is one line of Prometheus' text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the text format's samples; comments and lines it
// cannot read are skipped (capoctl reads a few known series).
func parseMetrics(b []byte) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name, rest = line[:i], strings.TrimSpace(line[j+1:])
			for _, kv := range splitLabels(line[i+1 : j]) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					if uq, err := strconv.Unquote(v); err == nil {
						s.labels[strings.TrimSpace(k)] = uq
					}
				}
			}
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// splitLabels splits a="x",b="y,z" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// metricValue is the first sample of name whose labels include want.
func metricValue(ss []sample, name string, want map[string]string) (float64, bool) {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			match = match && s.labels[k] == v
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// buildVersion is capo_build_info's version label.
func buildVersion(ss []sample) string {
	for _, s := range ss {
		if s.name == "capo_build_info" {
			return s.labels["version"]
		}
	}
	return ""
}

// imageTag is the version a pod's first image names, when capo cannot be
// asked.
func imageTag(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	img := p.Spec.Containers[0].Image
	if i := strings.LastIndex(img, "@"); i >= 0 {
		return img[i+1:]
	}
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		return img[i+1:]
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
