// Command sleeper is the real-node bed's only test program, built into two
// images: with no arguments it is the pod sandbox's pause process (PID 1:
// reaps children, exits 0 on SIGTERM/SIGINT); as a workload, flags choose
// what it does on SIGTERM and how much memory it holds, which is what
// decides a kubelet eviction's outcome and ranking; with -install-cni it is
// the install-cni init container of the bed's model of calico-node.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	exitCode int           // exit status on SIGTERM
	grace    time.Duration // how long to take before exiting on SIGTERM
	allocMiB int           // memory to hold (touched, so it is resident)
	allocOn  string        // hold it only on this host name (one pod of a StatefulSet)
}

func main() {
	var c config
	flag.IntVar(&c.exitCode, "exit-on-term", 0, "exit status on SIGTERM")
	flag.DurationVar(&c.grace, "grace", 0, "delay between SIGTERM and exit")
	flag.IntVar(&c.allocMiB, "alloc-mib", 0, "MiB of memory to hold")
	flag.StringVar(&c.allocOn, "alloc-on", "", "hold -alloc-mib only when the host name is this (a pod's name)")
	installCNI := flag.String("install-cni", "", "SRC:DST: write SRC's bytes over DST in place and exit, as calico-node's install-cni writes its conflist")
	flag.Parse()
	if *installCNI != "" {
		os.Exit(install(*installCNI))
	}
	os.Exit(run(c))
}

// install writes the file as install-cni does (os.WriteFile over the
// existing file, its mode kept).
func install(spec string) int {
	src, dst, ok := strings.Cut(spec, ":")
	data, err := os.ReadFile(src)
	if err == nil && ok {
		err = os.WriteFile(dst, data, 0o644)
	}
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "install-cni %q: %v (want SRC:DST)\n", spec, err)
		return 1
	}
	fmt.Printf("wrote %s over %s\n", src, dst)
	return 0
}

var held [][]byte // kept reachable so the memory stays resident

func run(c config) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	host, _ := os.Hostname()
	if c.allocMiB > 0 && (c.allocOn == "" || c.allocOn == host) {
		for range c.allocMiB {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			held = append(held, b)
		}
		fmt.Printf("holding %d MiB\n", c.allocMiB)
	}
	fmt.Println("ready")
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap() // as PID 1 of a sandbox, orphans are ours to reap
			continue
		}
		fmt.Printf("%v: exiting %d after %s\n", s, c.exitCode, c.grace)
		time.Sleep(c.grace)
		return c.exitCode
	}
	return 0
}

func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
