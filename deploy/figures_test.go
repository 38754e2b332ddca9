package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/costs.md is the one source of the controller's measured memory: the
// README, operations.md and the chart's comment quote its last run.
func TestControllerFiguresAgreeWithCosts(t *testing.T) {
	root := filepath.Join(filepath.Dir(ChartDir()), "..", "..")
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	costs := read("docs/costs.md")
	i := strings.Index(costs, "### capo-controller")
	if i < 0 {
		t.Fatal("docs/costs.md has no capo-controller section")
	}
	// | 10 000 / 1 000 | 41.6 (29.3) | 50 | ...
	row := regexp.MustCompile(`(?m)^\| ([0-9 ]+) / [0-9 ]+ \| ([0-9.]+) \(`)
	rows := row.FindAllStringSubmatch(costs[i:], -1)
	if len(rows) < 3 {
		t.Fatalf("docs/costs.md's controller table: %d rows", len(rows))
	}
	readme, ops, values := read("README.md"), read("docs/operations.md"), read("deploy/chart/capo/values.yaml")
	for _, r := range rows {
		held, resident := r[1], r[2]
		if !regexp.MustCompile(`(?m)^\| ` + held + ` (reservations )?on .*\| ` + regexp.QuoteMeta(resident) + ` \|`).MatchString(readme) {
			t.Errorf("README's controller table does not give %s MiB at %s reservations", resident, held)
		}
		if !regexp.MustCompile(`[^0-9.]` + regexp.QuoteMeta(resident) + `[^0-9.]`).MatchString(values) {
			t.Errorf("values.yaml's controller comment does not give %s MiB at %s reservations", resident, held)
		}
		if held == "10 000" && !strings.Contains(ops, resident+" MiB") {
			t.Errorf("docs/operations.md does not give %s MiB at 10 000 reservations", resident)
		}
	}
}
