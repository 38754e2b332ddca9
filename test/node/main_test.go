// Package node runs capo as it ships on a real node: the chart's DaemonSet
// and Deployment, from capo's image, on a real kubelet and containerd with
// Calico's CNI, and the teardowns that really happen there.
package node

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/nodebed"
)

var bed *nodebed.Bed

func TestMain(m *testing.M) { os.Exit(nodebed.Main(m, &bed)) }
