package node

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// Every line capo's pods log is one JSON object, as log collectors parse
// them: the agent's and the controllers', leader election included.
func TestCapoPodsLogJSON(t *testing.T) {
	ctx := context.Background()
	pods, err := bed.Kube.CoreV1().Pods(nodebed.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=capo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 3 {
		t.Fatalf("%d capo pods, want the agent and two controllers", len(pods.Items))
	}
	for _, p := range pods.Items {
		out, err := bed.Kubectl(ctx, "-n", nodebed.Namespace, "logs", p.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Errorf("%s logs a line that is not JSON: %s", p.Name, line)
				break
			}
		}
	}
}
