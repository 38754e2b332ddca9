package main

import (
	"os/exec"
	"strings"
	"testing"
)

// capo-install edits a conflist and lists one node's pods: it links no
// Calico client (libcalico-go once came in through pkg/kubeclient, 6.6 MB
// for nothing). A new import that brings one back fails here.
func TestLinksNoCalicoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/projectcalico/") {
			t.Errorf("capo-install links %s", p)
		}
	}
}
