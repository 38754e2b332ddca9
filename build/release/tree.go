package release

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// CheckTree refuses a release built from anything but the tagged commit:
// uncommitted or untracked changes would ship what no commit holds, and a
// HEAD the tag does not name would ship a version no one can rebuild. With
// allow (make release ALLOW_UNTAGGED=1, for test builds) it only says what
// it would have refused. It returns HEAD's commit, for the image's label.
func CheckTree(root, version string, allow bool, warn func(string)) (string, error) {
	rev, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("a release is built from a git checkout: %w", err)
	}
	var problems []string
	status, err := git(root, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if status != "" {
		n := len(strings.Split(status, "\n"))
		problems = append(problems, fmt.Sprintf("the tree has %d uncommitted or untracked path(s) (git status)", n))
	}
	tags, err := git(root, "tag", "--points-at", "HEAD")
	if err != nil {
		return "", err
	}
	if !slices.Contains(strings.Fields(tags), version) {
		problems = append(problems, fmt.Sprintf("HEAD (%s) is not tagged %s (git tag -a %s, then make release VERSION=%s)", rev[:12], version, version, version))
	}
	if len(problems) == 0 {
		return rev, nil
	}
	msg := strings.Join(problems, "; ")
	if !allow {
		return "", fmt.Errorf("refusing to release %s: %s. For a test build, make release VERSION=%s ALLOW_UNTAGGED=1", version, msg, version)
	}
	warn(fmt.Sprintf("a test build, not a release: %s", msg))
	return rev, nil
}

func git(root string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
