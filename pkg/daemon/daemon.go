// Package daemon is what capo-agent and capo-controller share around their
// own logic: JSON logs, the clients, signals, and the metrics and health port.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/version"
)

// Run sets up logging and the clients, then runs start until SIGINT or
// SIGTERM. It returns the process exit code.
func Run(component string, level slog.Level, datastoreQPS float32, start func(ctx context.Context, kube kubernetes.Interface, calico clientv3.Interface) error) int {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", component))
	kube, err := kubeclient.Kubernetes(component, 50)
	if err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	calico, datastore, err := kubeclient.Calico(datastoreQPS)
	if err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	slog.Info("starting", "version", version.Version, "datastore", datastore)
	if err := start(ctx, kube, calico); err != nil {
		slog.Error(component+" stopped", "err", err)
		return 1
	}
	return 0
}

// ParseLevel reads a --log-level value.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: %w", err)
	}
	return l, nil
}

// ServeMetrics serves /metrics from reg, /healthz, and /readyz (200 once
// ready says so) on addr until ctx ends.
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry, ready func() bool, notReady string) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, notReady, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
