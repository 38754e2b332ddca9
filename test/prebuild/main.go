// Command prebuild builds the programs the end-to-end suites run, ahead of
// the tests that run them, into the test bed's cache (CAPO_TESTBED_CACHE,
// else ~/.cache/capo-testbed): `make test` starts it early, on cores the
// tests leave idle, so a test waits for a build only when it comes first.
// Every set is built once per content of the modules that pin it; built,
// it returns at once.
//
//	go run ./test/prebuild servers node extra
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// sets are what each name builds.
var sets = map[string]func(root string, logf func(string, ...any)) error{
	// What every bed starts: etcd, kube-apiserver, Calico's CNI.
	"servers": func(root string, logf func(string, ...any)) error {
		_, _, _, err := testbed.Servers(root, logf)
		return err
	},
	// The real-node bed's kubelet, kube-controller-manager, kube-scheduler,
	// kube-proxy, kubectl and felix.
	"node": func(root string, logf func(string, ...any)) error {
		_, err := testbed.BuildNodeBinaries(root, logf)
		return err
	},
	// What some tests add: Calico's kube-controllers, the previous Calico
	// release's CNI, the previous capo release's binaries and image.
	"extra": func(root string, logf func(string, ...any)) error {
		if _, err := testbed.BuildTool(root, "", testbed.KubeControllersPkg, "kube-controllers", logf); err != nil {
			return err
		}
		if _, err := testbed.BuildTool(root, testbed.PreviousCalicoModule, testbed.CalicoPkg, "calico", logf); err != nil {
			return err
		}
		if _, err := testbed.BuildPrevious(logf); err != nil {
			return err
		}
		_, err := nodebed.PreviousImage(logf)
		return err
	},
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: prebuild SET...\nSets: %s\n", strings.Join(names(), ", "))
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args()))
}

func run(want []string) int {
	root, err := testbed.RepoRoot()
	if err != nil {
		log.Print(err)
		return 1
	}
	logf := func(f string, a ...any) { log.Printf(f, a...) }
	for _, name := range want {
		build, ok := sets[name]
		if !ok {
			log.Printf("prebuild: no set %q; the sets are %s", name, strings.Join(names(), ", "))
			return 2
		}
		start := time.Now()
		if err := build(root, logf); err != nil {
			log.Printf("prebuild %s: %v", name, err)
			return 1
		}
		log.Printf("prebuild: %s ready in %s", name, time.Since(start).Round(time.Second))
	}
	return 0
}

func names() []string {
	var n []string
	for k := range sets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
