package robust

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clear deletes the run's pods and StatefulSets once it is over: the
// next run's controller would otherwise cover them (their nodes' agents
// gone) in its own datastore.
func (c *cluster) clear() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	grace := int64(0)
	if err := c.bed.Kube.CoreV1().Pods(c.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil {
		c.t.Logf("robust: deleting the run's pods: %v", err)
	}
	if err := c.bed.Kube.AppsV1().StatefulSets(c.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		c.t.Logf("robust: deleting the run's StatefulSets: %v", err)
	}
}

// EnvLogs names a folder to keep every capo process's log of each run in
// (its own subfolder by seed), for reading after the bed is gone.
const EnvLogs = "CAPO_ROBUST_LOGS"

// keepLogs copies the run's logs into $CAPO_ROBUST_LOGS, if set.
func (c *cluster) keepLogs(t testing.TB) {
	root := os.Getenv(EnvLogs)
	if root == "" {
		return
	}
	dst := filepath.Join(root, fmt.Sprintf("%s-%d", c.cfg.Datastore, c.cfg.Seed))
	for _, n := range c.nodes {
		files, _ := filepath.Glob(filepath.Join(n.env.Dir, "*.log"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.MkdirAll(filepath.Join(dst, n.env.ID), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, n.env.ID, filepath.Base(f)), b, 0o644)
			}
			if err != nil {
				t.Logf("robust: keeping %s: %v", f, err)
			}
		}
	}
	var all strings.Builder
	c.hist.Dump(&all, time.Now(), 24*time.Hour, time.Hour, 1<<30)
	if err := os.WriteFile(filepath.Join(dst, "history.txt"), []byte(all.String()), 0o644); err != nil {
		t.Logf("robust: keeping the history: %v", err)
	}
	t.Logf("robust: the run's logs and history are in %s", dst)
}
