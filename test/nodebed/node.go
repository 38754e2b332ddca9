package nodebed

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// NoPressure is the kubelet's memory threshold when no test wants an
// eviction: the kubelet's own default.
const NoPressure = "100Mi"

// Main is TestMain for packages that use the bed: it starts the node,
// installs the chart with the bed's image, runs the tests and tears
// everything down, also on SIGINT/SIGTERM.
func Main(m *testing.M, out **Bed) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("nodebed: -short given, skipping the real-node tests")
		return 0
	}
	if testbed.Listing() {
		return m.Run()
	}
	logrus.SetLevel(logrus.WarnLevel) // libcalico-go logs every call at info
	logf := func(f string, a ...any) { log.Printf(f, a...) }
	start := time.Now()
	b, err := Start(context.Background(), logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodebed:", err)
		return 1
	}
	*out = b
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "nodebed: %v: cleaning up\n", s)
		b.Stop(logf)
		os.Exit(2)
	}()
	logf("nodebed: node %s Ready after %s", b.NodeName, time.Since(start).Round(100*time.Millisecond))
	code := 1
	if err := b.InstallChart(context.Background(), nil); err != nil {
		fmt.Fprintln(os.Stderr, "nodebed: installing the chart:", err)
		fmt.Fprintln(os.Stderr, b.Diagnose(context.Background()))
	} else {
		code = m.Run()
	}
	signal.Stop(sig)
	b.Stop(logf)
	if left := FelixLeftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "nodebed: felix's state left after the bed stopped: %v\n", left)
		code = 1
	}
	return code
}

// hostIP is the address of the interface the default route leaves by: the
// API server's advertise address, reachable from pods (not loopback).
func hostIP() (net.IP, error) {
	// A UDP "connection" sends nothing; it only resolves the route.
	c, err := net.Dial("udp4", "192.0.2.254:9")
	if err == nil {
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsLoopback() {
			return a.IP, nil
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.To4(), nil
		}
	}
	return nil, fmt.Errorf("no non-loopback IPv4 address on this machine for the API server to advertise")
}

// waitNodeSchedulable waits until the node is Ready and the node lifecycle
// controller has lifted the not-ready taint the kubelet registers with.
func (b *Bed) waitNodeSchedulable(ctx context.Context) error {
	return Poll(ctx, 90*time.Second, func() error {
		n, err := b.Kube.CoreV1().Nodes().Get(ctx, b.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(n) {
			return fmt.Errorf("node %s not Ready (kubelet log: %s)", b.NodeName, b.logPath("kubelet"))
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				return fmt.Errorf("node %s still tainted %s", b.NodeName, t.Key)
			}
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
