// Package node runs capo as it ships on a real node: the chart's DaemonSet
// and Deployment, from capo's image, on a real kubelet and containerd with
// Calico's CNI, and the teardowns that really happen there.
package node

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

var bed *nodebed.Bed

func TestMain(m *testing.M) { os.Exit(nodebed.Main(m, &bed)) }

// agentMetric sums a metric of the node's agent over the series matching
// labels.
func agentMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	text, err := nodebed.AgentMetrics()
	if err != nil {
		t.Fatal(err)
	}
	return testbed.SumMetric(text, name, labels...)
}
