package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

func TestEveryLogLineIsJSON(t *testing.T) {
	var buf bytes.Buffer
	SetupLogs(&buf, "capo-test", slog.LevelInfo)
	slog.Info("capo says", "k", 1)
	klog.InfoS("leader election says", "lease", "capo-system/capo-controller")
	klog.Errorf("client-go printf style %d", 7)
	logrus.WithField("handle", "h1").Warn("libcalico-go warns")
	logrus.Info("libcalico-go chatter at info is dropped")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"capo says", "leader election says", "client-go printf style 7", "libcalico-go warns"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %q (%v)", i, line, err)
		}
		if m["msg"] != want[i] || m["component"] != "capo-test" {
			t.Fatalf("line %d: %v, want msg %q", i, m, want[i])
		}
	}
	if !strings.Contains(lines[3], `"handle":"h1"`) || !strings.Contains(lines[3], `"level":"WARN"`) {
		t.Fatalf("logrus fields or level lost: %s", lines[3])
	}
}
