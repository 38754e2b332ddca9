package testbed

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// EtcdFaults stands between one process and the bed's etcd, as APIFaults
// does for the API server: a gRPC proxy that passes every call through and
// fails the key-value reads (Range) of the keys a test names, with an
// error etcd's client does not retry. Give the process ETCD_ENDPOINTS=URL.
type EtcdFaults struct {
	URL    string
	Failed atomic.Int64

	mu       sync.Mutex
	prefixes []string
}

// StartEtcdFaults starts a proxy to the bed's etcd for the test.
func (b *Bed) StartEtcdFaults(t *testing.T) *EtcdFaults {
	t.Helper()
	up, err := grpc.NewClient(strings.TrimPrefix(b.EtcdURL, "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &EtcdFaults{URL: "http://" + l.Addr().String()}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		return f.forward(up, ss)
	}))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f
}

// FailReads fails every Range of a key under prefix until heal is called.
func (f *EtcdFaults) FailReads(prefix string) (heal func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prefixes = append(f.prefixes, prefix)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, p := range f.prefixes {
			if p == prefix {
				f.prefixes = append(f.prefixes[:i], f.prefixes[i+1:]...)
				return
			}
		}
	}
}

// CalicoBlocks is where Calico keeps its IPAM blocks in etcd.
const CalicoBlocks = "/calico/ipam/v2/assignment/"

func (f *EtcdFaults) failing(method string, msg []byte) bool {
	if method != "/etcdserverpb.KV/Range" {
		return false
	}
	var req etcdserverpb.RangeRequest
	if req.Unmarshal(msg) != nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.prefixes {
		if strings.HasPrefix(string(req.Key), p) {
			return true
		}
	}
	return false
}

// forward runs one call through to etcd, both ways, as it comes. A named
// read ends the call with the fault before etcd sees it.
func (f *EtcdFaults) forward(up *grpc.ClientConn, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	md, _ := metadata.FromIncomingContext(ss.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md.Copy()))
	defer cancel()
	cs, err := up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	upc, downc := make(chan error, 1), make(chan error, 1)
	go func() { upc <- f.upstream(method, ss, cs) }()
	go func() { downc <- downstream(ss, cs) }()
	for {
		select {
		case err := <-upc:
			if err != nil {
				cancel()
				<-downc //nolint:errcheck // the downstream's error is the cancel's own
				return err
			}
			upc = nil // the caller is done sending: wait for etcd's answer
		case err := <-downc:
			return err
		}
	}
}

// downstream passes etcd's messages back to the caller.
func downstream(ss grpc.ServerStream, cs grpc.ClientStream) error {
	for {
		var msg []byte
		if err := cs.RecvMsg(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				ss.SetTrailer(cs.Trailer())
				return nil
			}
			return err
		}
		if err := ss.SendMsg(msg); err != nil {
			return err
		}
	}
}

// upstream passes the caller's messages on, failing a named read.
func (f *EtcdFaults) upstream(method string, ss grpc.ServerStream, cs grpc.ClientStream) error {
	for {
		var msg []byte
		if err := ss.RecvMsg(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return cs.CloseSend()
			}
			return err
		}
		if f.failing(method, msg) {
			f.Failed.Add(1)
			return status.Error(codes.Internal, "injected by the test bed")
		}
		if err := cs.SendMsg(msg); err != nil {
			return err
		}
	}
}

// rawCodec passes messages as bytes: the proxy decodes only what it checks.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case *[]byte:
		return *b, nil
	}
	return nil, errors.New("raw codec: not bytes")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("raw codec: not bytes")
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
