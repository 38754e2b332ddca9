package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// Check answers a probe: ok, and a one-line reason either way.
type Check func() (bool, string)

// MetricsMux serves /metrics from reg, with capo_build_info and
// capo_calico_api_info added, and the renamed metrics (current name to old)
// under their old names too.
func MetricsMux(reg *prometheus.Registry, renamed map[string]string) (*http.ServeMux, error) {
	if err := reg.Register(buildInfo()); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, err
	}
	if err := reg.Register(apigroup.Info()); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(withOldNames(reg, renamed), promhttp.HandlerOpts{}))
	return mux, nil
}

// HandleProbes adds /healthz (the process answers), /readyz and, when
// live is set, /livez: 200 or 503, the check's reason as the body.
func HandleProbes(mux *http.ServeMux, ready, live Check) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", probeHandler(ready))
	if live != nil {
		mux.HandleFunc("/livez", probeHandler(live))
	}
}

func probeHandler(check Check) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ok, why := check()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(why + "\n"))
	}
}

// Limits bound a listener of a node daemon on the host network, where
// every pod of the node can reach it: a slow or idle client is cut off,
// and past MaxInFlight requests at once the rest are answered 503 at once
// rather than queued (the kubelet's probes and Prometheus retry).
type Limits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxInFlight                   int
	MaxHeaderBytes                int
}

// DefaultLimits are generous for /metrics (a scrape is a few hundred
// KiB, written in well under a second) and the probes.
var DefaultLimits = Limits{
	ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second,
	MaxInFlight: 16, MaxHeaderBytes: 16 << 10,
}

// Serve serves mux on addr until ctx ends, within DefaultLimits; what and
// flag name the listener in the error when the address is taken.
func Serve(ctx context.Context, addr string, mux http.Handler, what, flag string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener on %s (is another process using the port? see %s): %w", what, addr, flag, err)
	}
	return serveOn(ctx, l, mux, DefaultLimits)
}

func serveOn(ctx context.Context, l net.Listener, h http.Handler, lim Limits) error {
	srv := &http.Server{
		Handler:           inFlight(h, lim.MaxInFlight),
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
	}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// inFlight answers 503 to a request past max at once.
func inFlight(h http.Handler, limit int) http.Handler {
	slots := make(chan struct{}, limit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests at once", http.StatusServiceUnavailable)
		}
	})
}
