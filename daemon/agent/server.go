package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/daemon/agent/kubecache"
	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

// maxInFlight bounds concurrent requests; past it the agent answers 503 at
// once and capo-ipam journals, rather than piling up goroutines.
const maxInFlight = 512

// listenSocket opens the unix socket: directory created, a stale socket
// from a dead agent removed, a live agent's socket left alone, mode 0600.
func listenSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent is serving %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// server answers capo-ipam on the node's unix socket.
type server struct {
	decider   Decider
	cluster   Cluster
	selectors func() []selection.Selector
	timeout   func() time.Duration // for one decision
	metrics   *metrics
	offerer   *offerer
	settler   *settler
	// records reads capo-ipam's ADD record of a sandbox from the host's
	// state dir; nil: none is trusted.
	records func(network, containerID, ifName string) *journal.AddrRecord
	// ipam and node: without a record, the sandbox's allocation on this
	// node names its pod (server_identity.go).
	ipam IPAM
	node string
	// discovered is the Calico API group discovery alone gives, for a call
	// that names none (callGroup); nil: not asked.
	discovered func(ctx context.Context) (string, error)
}

func (sv *server) serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler: sv.handler(),
		// A slow or stuck client must not hold a connection for long.
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       10 * time.Second,
		MaxHeaderBytes:    8 << 10,
	}
	shutdown := make(chan struct{})
	go func() { //nolint:gosec // G118: the shutdown runs after ctx is done, so it needs a context of its own
		defer close(shutdown)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		sv.settler.wait(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-shutdown // answers in flight, and the returns they started, finish first
	return nil
}

func (sv *server) handler() http.Handler {
	sem := make(chan struct{}, maxInFlight)
	limit := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			default:
				writeError(w, http.StatusServiceUnavailable, "agent busy")
				return
			}
			h(w, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.ReservePath, limit(sv.handleReserve))
	mux.HandleFunc("POST "+wire.AnnotationsPath, limit(sv.handleAnnotations))
	mux.HandleFunc("POST "+wire.ReturnOutcomePath, limit(sv.handleReturnOutcome))
	return sv.versioned(mux)
}

// versioned answers only a capo-ipam whose wire version the agent speaks
// (pkg/wire/version.go), and says its own in every answer. Every request
// and answer of this agent is one a capo-ipam of wire v1 (capo 0.1.0)
// reads as it did: nothing depends on the client's version yet.
func (sv *server) versioned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.VersionHeader, strconv.Itoa(wire.Version))
		v, err := wire.ParseVersion(r.Header.Get(wire.VersionHeader))
		if err == nil {
			err = wire.CheckClient(v)
		}
		label := strconv.Itoa(v)
		if v > wire.Version {
			label = "newer"
		}
		if err != nil {
			if v == 0 {
				label = "invalid"
			}
			sv.metrics.wireRequests.WithLabelValues(label, "refused").Inc()
			slog.Warn("a request in a wire version this agent does not answer: capo-ipam journals it", "err", err)
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		sv.metrics.wireRequests.WithLabelValues(label, "answered").Inc()
		next.ServeHTTP(w, r)
	})
}

func (sv *server) handleReserve(w http.ResponseWriter, r *http.Request) {
	var req wire.ReserveRequest
	if !readRequest(w, r, "reserve request", &req) {
		return
	}
	if req.ContainerID == "" || req.Network == "" {
		writeError(w, http.StatusBadRequest, "request lacks containerID or network")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), sv.timeout())
	defer cancel()
	resp, err := sv.identified(ctx, &req)
	if ref := (*refusal)(nil); errors.As(err, &ref) {
		writeError(w, http.StatusForbidden, ref.msg)
		return
	}
	if err != nil {
		sv.metrics.decisions.WithLabelValues("failed", "socket").Inc()
		slog.Error("teardown not decided; capo-ipam will journal it", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "container", req.ContainerID, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sv.metrics.decisions.WithLabelValues(string(resp.Outcome), "socket").Inc()
	writeJSON(w, http.StatusOK, resp)
}

// identified decides the teardown of the sandbox the host knows, for the
// pod the host names (server_identity.go); one whose handle holds no address on
// this node has nothing to reserve, whatever the request says.
func (sv *server) identified(ctx context.Context, req *wire.ReserveRequest) (*wire.ReserveResponse, error) {
	if err := sv.callGroup(ctx, req.CalicoAPIGroup); err != nil {
		return nil, err
	}
	if err := sv.identify(ctx, req); err != nil {
		return nil, err
	}
	failpoint.Clear(failpoint.AgentNothingToReserve, &req.RecordedIPs)
	if len(req.RecordedIPs) == 0 {
		return &wire.ReserveResponse{Outcome: wire.NothingToReserve, Rule: "handle " + req.Handle() + " holds no addresses on this node (already released)"}, nil
	}
	if claimsNoPod(req.Pod) {
		// Only a pod is ever selected: release at once.
		return &wire.ReserveResponse{Outcome: wire.NotSelected, Rule: "no pod: neither the request nor the node's CNI state names one for handle " + req.Handle() + " (an IPAM call with no K8S_POD_NAME in its CNI_ARGS)"}, nil
	}
	return sv.decider.Decide(ctx, req)
}

// handleAnnotations serves capo-ipam's ADD from the caches. A pod the agent
// cannot find is an error: capo-ipam then asks the API server itself.
func (sv *server) handleAnnotations(w http.ResponseWriter, r *http.Request) {
	var req wire.AnnotationsRequest
	if !readRequest(w, r, "annotations request", &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	pod := sv.cluster.Pod(ctx, req.Pod)
	ns := sv.cluster.Namespace(req.Pod.Namespace)
	if pod == nil || ns == nil {
		writeError(w, http.StatusNotFound, "pod or namespace not known to the agent yet")
		return
	}
	selectors := sv.selectors()
	resp := wire.AnnotationsResponse{Namespace: kubecache.CalicoOnly(ns.Annotations), Pod: kubecache.CalicoOnly(pod.Annotations), Decision: atAdd(ns, pod, selectors)}
	// Only a pod scheduled to this node has its sandbox added here: any
	// other is a request capo-ipam did not send, and is offered nothing.
	if pod.Spec.NodeName == sv.node {
		d := selection.Decide(selection.Of(sv.cluster.Node()), selection.Of(ns), selection.Of(pod), selectors)
		resp.Return = sv.offerer.offer(ctx, pod, ns, d, req.Network)
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleReturnOutcome hears from capo-ipam how an offer ended (the
// settler acts on it) and answers at once.
func (sv *server) handleReturnOutcome(w http.ResponseWriter, r *http.Request) {
	var o wire.ReturnOutcome
	if !readRequest(w, r, "return outcome", &o) {
		return
	}
	sv.settler.heard(r.Context(), o)
	writeJSON(w, http.StatusOK, struct{}{})
}

// atAdd is the decision for the pod as it starts, on its own and its
// namespace's labels and annotations alone: capo-ipam keeps it in the ADD
// record for a DEL that comes when the pod is gone and forgotten. Whether
// the node is opted in is the DEL's to judge, then.
func atAdd(ns *metav1.PartialObjectMetadata, pod *corev1.Pod, selectors []selection.Selector) *wire.Decision {
	optedIn := &selection.Object{Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}
	d := selection.Decide(optedIn, selection.Of(ns), selection.Of(pod), selectors)
	out := &wire.Decision{Selected: d.Verdict == selection.Selected, Rule: d.Rule}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		out.Owner = &wire.Owner{Kind: owners.KeyOf(*ref), Name: ref.Name, UID: string(ref.UID)}
	}
	return out
}

// readRequest decodes capo-ipam's request into v, at most wire.MaxBodyBytes
// of it; a request that does not decode is answered 400, naming what was
// expected, and readRequest returns false.
func readRequest(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request is not a valid "+what+": "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, wire.ErrorResponse{Error: msg})
}
